#include "stats/cgroup_host.h"

#include <sys/stat.h>

namespace slotd {

CgroupHost DetectCgroupHost(const std::string& root) {
  CgroupHost host;
  const CgroupReader reader(root);
  host.layout = reader.Layout();
  if (host.layout == CgroupLayout::kV1 || host.layout == CgroupLayout::kHybrid)
    host.unmounted_v1_controllers = reader.UnmountedV1Controllers();
  struct stat st{};
  const std::string dir = root + (root.empty() || root.back() != '/' ? "/" : "") + "run/systemd/system";
  host.systemd_manages = ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  return host;
}

std::vector<std::string> CgroupLayoutWarnings(const CgroupHost& host) {
  std::vector<std::string> warnings;
  switch (host.layout) {
    case CgroupLayout::kNone:
      warnings.push_back(
          "no cgroup file system is mounted here (/proc/self/mountinfo lists none): the agent cannot read its "
          "kernels' stats from their cgroups nor see their out-of-memory kills; mount the host's cgroup tree at "
          "/sys/fs/cgroup (an agent in a container needs the host's, read-only), or set [container] stats-type = "
          "\"docker\" to measure through the engine");
      break;
    case CgroupLayout::kV1:
    case CgroupLayout::kHybrid:
      if (!host.unmounted_v1_controllers.empty()) {
        std::string names;
        for (const std::string& c : host.unmounted_v1_controllers) names += (names.empty() ? "" : ", ") + c;
        warnings.push_back(
            "this host mounts cgroup v1 hierarchies" +
            std::string(host.layout == CgroupLayout::kHybrid ? " beside a v2 one (systemd's hybrid layout)" : "") +
            " but none with the " + names + " controller: engines make their containers' cgroups in the v1 "
            "hierarchies only, so the agent reports nothing of what " + names + " measure(s) (cpuacct: CPU time; "
            "memory: memory use and out-of-memory kills; pids: process counts; blkio: I/O; cpuset: the cores a "
            "kernel is on); mount each v1 controller, or boot cgroup v2 (systemd.unified_cgroup_hierarchy=1)");
      }
      break;
    case CgroupLayout::kV2:
      break;
  }
  return warnings;
}

std::vector<std::string> EngineCgroupWarnings(const CgroupHost& host, const EngineInfo& engine) {
  std::vector<std::string> warnings;
  if (engine.cgroup_version == "2" && engine.cgroup_driver == "cgroupfs" && host.systemd_manages)
    warnings.push_back(
        "the engine makes its containers' cgroups with the cgroupfs driver on a cgroup v2 host whose tree systemd "
        "manages: systemd does not know those cgroups and may move or remove what it finds there; use the systemd "
        "driver (Docker: \"exec-opts\": [\"native.cgroupdriver=systemd\"] in /etc/docker/daemon.json; Podman: "
        "cgroup_manager = \"systemd\" in containers.conf) and restart the engine");
  return warnings;
}

}  // namespace slotd
