# shellcheck shell=bash
# Shared helpers for scripts/test and scripts/demo. Source it, do not run it:
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#
# Sourcing it sets SLOTD_ROOT (the repository root), SLOTD_TEST_IMAGE, and
# one EXIT/INT/TERM trap that runs the steps given to slotd_on_exit, last
# registered first, and then exits with the script's status. Do not set
# your own EXIT/INT/TERM trap; register a step instead.
#
#   slotd_log MSG...           one line on stderr, prefixed with the script's name
#   slotd_die MSG...           slotd_log, then exit 1
#   slotd_pid_alive PID        true while PID runs (a zombie counts as gone)
#   slotd_on_exit CMD          run the shell text CMD when the script exits;
#                              it can read the exit status in SLOTD_EXIT_STATUS
#   slotd_engine_up [MODE]     make an engine answer at DOCKER_HOST (exported)
#       MODE auto (default): use the engine that already answers at
#         $DOCKER_HOST (or the default socket), else start a private one.
#       MODE private: always start a private one.
#       SLOTD_DOCKER_HOST_REUSE=1 turns private into auto; =0 turns auto into private.
#       A private engine lives in a fresh /tmp/slotd-engine.XXXXXX and is
#       stopped by its pid when the script exits (slotd_engine_down).
#       SLOTD_ENGINE_KIND=podman makes the private engines Podman services
#       (scripts/podman-start) instead of dockerd (scripts/dockerd-start).
#   slotd_engine_add           start one more private engine and set
#                              SLOTD_ENGINE_HOST to its socket (DOCKER_HOST
#                              is left as it is)
#   slotd_engine_down          stop the private engines now (no-op when none);
#                              the first one's log is kept as build/<kind>-last.log,
#                              the others' as build/<kind>-last-N.log (kind: dockerd or podman)
#   SLOTD_ENGINE_DIRS          the private engines' directories, in start order
#   SLOTD_ENGINE_PIDS          the pid (dockerd's or podman's) of each private
#                              engine started here (kept after slotd_engine_down, to check)

SLOTD_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export SLOTD_ROOT
export SLOTD_TEST_IMAGE=${SLOTD_TEST_IMAGE:-slotd-test/busybox:latest}
export SLOTD_ENGINE_KIND=${SLOTD_ENGINE_KIND:-docker}
SLOTD_EXIT_STATUS=  # set by the exit trap, for the steps it runs
export SLOTD_EXIT_STATUS
# Configures build/ afresh when it was configured with another compiler (g++
# before clang-14 was the default): CMake would otherwise wipe its cache and
# re-run without the check preset's build type. Usage: slotd_forget_other_compiler DIR
slotd_forget_other_compiler() {
  local cached
  cached=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$1/CMakeCache.txt" 2>/dev/null || true)
  [[ -z $cached || ${cached##*/} == clang++-14 ]] && return 0
  slotd_log "$1/ was configured with $cached; configuring it afresh with clang++-14"
  rm -rf "$1/CMakeCache.txt" "$1/CMakeFiles"
}
SLOTD_ENGINE_DIRS=()  # the private engines started here, while they run
SLOTD_ENGINE_PIDS=()
SLOTD_ENGINE_HOST=    # the socket of the last one slotd_engine_add started

slotd_log() { printf '[%s] %s\n' "$(basename "$0")" "$*" >&2; }
slotd_die() { slotd_log "$@"; exit 1; }

slotd_pid_alive() {
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) && [[ -n $state && $state != Z ]]
}

_slotd_exit_steps=()
slotd_on_exit() { _slotd_exit_steps+=("$1"); }

_slotd_on_exit_trap() {
  local rc=$? i
  SLOTD_EXIT_STATUS=$rc
  trap - EXIT
  trap '' INT TERM  # a second Ctrl-C must not cut the clean-up short
  for ((i = ${#_slotd_exit_steps[@]} - 1; i >= 0; i--)); do
    eval "${_slotd_exit_steps[i]}" || slotd_log "clean-up step failed: ${_slotd_exit_steps[i]}"
  done
  exit "$rc"
}
trap _slotd_on_exit_trap EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# True when a Docker engine answers at $DOCKER_HOST (or the default socket).
slotd_engine_answers() { timeout 10 docker version >/dev/null 2>&1; }

slotd_engine_up() {
  local mode=${1:-auto}
  case ${SLOTD_DOCKER_HOST_REUSE:-} in
    1) mode=auto ;;
    0) mode=private ;;
  esac
  if [[ $mode == auto ]] && slotd_engine_answers; then
    export DOCKER_HOST=${DOCKER_HOST:-unix:///var/run/docker.sock}
    slotd_log "using the Docker engine that already answers at $DOCKER_HOST"
    return 0
  fi
  slotd_engine_add
  export DOCKER_HOST=$SLOTD_ENGINE_HOST
  slotd_log "private $SLOTD_ENGINE_KIND engine: DOCKER_HOST=$DOCKER_HOST pid=${SLOTD_ENGINE_PIDS[-1]}"
}

# The start and stop scripts' stem of SLOTD_ENGINE_KIND: dockerd or podman.
_slotd_engine_script() {
  case $SLOTD_ENGINE_KIND in
    docker) echo dockerd ;;
    podman) echo podman ;;
    *) slotd_die "SLOTD_ENGINE_KIND must be docker or podman, not '$SLOTD_ENGINE_KIND'" ;;
  esac
}

slotd_engine_add() {
  local dir env script
  script=$(_slotd_engine_script) || exit 1
  dir=$(mktemp -d /tmp/slotd-engine.XXXXXX)  # short: unix socket paths are limited
  # Recorded first, so that a half-started engine is stopped too.
  ((${#SLOTD_ENGINE_DIRS[@]} > 0)) || slotd_on_exit slotd_engine_down
  SLOTD_ENGINE_DIRS+=("$dir")
  env=$("$SLOTD_ROOT/scripts/$script-start" "$dir") ||
    slotd_die "could not start a private $SLOTD_ENGINE_KIND engine (see above)"
  # dockerd-start and podman-start print the export lines of DOCKER_HOST and
  # SLOTD_DOCKERD_PID or SLOTD_PODMAN_PID.
  SLOTD_ENGINE_PIDS+=("$(sed -n 's/^export SLOTD_[A-Z]*_PID=//p' <<<"$env")")
  SLOTD_ENGINE_HOST=$(sed -n 's/^export DOCKER_HOST=//p' <<<"$env")
}

slotd_engine_down() {
  local i dir log script
  script=$(_slotd_engine_script) || return 1
  for ((i = ${#SLOTD_ENGINE_DIRS[@]} - 1; i >= 0; i--)); do
    dir=${SLOTD_ENGINE_DIRS[i]}
    "$SLOTD_ROOT/scripts/$script-stop" "$dir" || slotd_log "$script-stop $dir failed"
    # Keep the engine's log for a post-mortem; build/ is ignored by git.
    log=$SLOTD_ROOT/build/$script-last.log
    ((i == 0)) || log=$SLOTD_ROOT/build/$script-last-$i.log
    if [[ -d $SLOTD_ROOT/build && -f $dir/$script.log ]]; then
      cp "$dir/$script.log" "$log" 2>/dev/null || true
    fi
    rm -rf --one-file-system "$dir" || slotd_log "could not remove $dir"
  done
  SLOTD_ENGINE_DIRS=()
}
