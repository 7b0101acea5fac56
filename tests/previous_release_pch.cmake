# Given to the previous release's configure (CMAKE_PROJECT_INCLUDE) by
# tests/previous_release.sh, to build it sooner without touching its
# sources: at the end of its top-level CMakeLists, every C++ target gets a
# precompiled header of the heavy headers its sources share.
function(_previous_release_pch dir)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|EXECUTABLE)$")
      target_precompile_headers(${target} PRIVATE <string> <vector> <map> <optional> <memory> <functional>
        <chrono> <algorithm> <filesystem> <fstream> <thread> <mutex> <nlohmann/json.hpp> <spdlog/spdlog.h>)
    endif()
  endforeach()
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(subdir IN LISTS subdirs)
    _previous_release_pch("${subdir}")
  endforeach()
endfunction()
cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _previous_release_pch "${CMAKE_SOURCE_DIR}")
