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
#   slotd_engine_up [MODE]     make a Docker engine answer at DOCKER_HOST (exported)
#       MODE auto (default): use the engine that already answers at
#         $DOCKER_HOST (or the default socket), else start a private one.
#       MODE private: always start a private one.
#       SLOTD_DOCKER_HOST_REUSE=1 turns private into auto; =0 turns auto into private.
#       A private engine lives in a fresh /tmp/slotd-engine.XXXXXX and is
#       stopped by its pid when the script exits (slotd_engine_down).
#   slotd_engine_down          stop the private engine now (no-op when none)

SLOTD_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export SLOTD_ROOT
export SLOTD_TEST_IMAGE=${SLOTD_TEST_IMAGE:-slotd-test/busybox:latest}
SLOTD_EXIT_STATUS=  # set by the exit trap, for the steps it runs
export SLOTD_EXIT_STATUS
SLOTD_ENGINE_DIR=  # set while a private engine started by slotd_engine_up runs

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
  local mode=${1:-auto} env
  case ${SLOTD_DOCKER_HOST_REUSE:-} in
    1) mode=auto ;;
    0) mode=private ;;
  esac
  if [[ $mode == auto ]] && slotd_engine_answers; then
    export DOCKER_HOST=${DOCKER_HOST:-unix:///var/run/docker.sock}
    slotd_log "using the Docker engine that already answers at $DOCKER_HOST"
    return 0
  fi
  SLOTD_ENGINE_DIR=$(mktemp -d /tmp/slotd-engine.XXXXXX)  # short: unix socket paths are limited
  slotd_on_exit slotd_engine_down  # registered first, so a half-started engine is stopped too
  env=$("$SLOTD_ROOT/scripts/dockerd-start" "$SLOTD_ENGINE_DIR") ||
    slotd_die "could not start a private Docker engine (see above)"
  eval "$env"  # exports DOCKER_HOST and SLOTD_DOCKERD_PID
  slotd_log "private Docker engine: DOCKER_HOST=$DOCKER_HOST pid=$SLOTD_DOCKERD_PID"
}

slotd_engine_down() {
  [[ -n $SLOTD_ENGINE_DIR ]] || return 0
  local dir=$SLOTD_ENGINE_DIR
  SLOTD_ENGINE_DIR=
  "$SLOTD_ROOT/scripts/dockerd-stop" "$dir" || slotd_log "dockerd-stop $dir failed"
  # Keep the engine's log for a post-mortem; build/ is ignored by git.
  if [[ -d $SLOTD_ROOT/build && -f $dir/dockerd.log ]]; then
    cp "$dir/dockerd.log" "$SLOTD_ROOT/build/dockerd-last.log" 2>/dev/null || true
  fi
  rm -rf --one-file-system "$dir" || slotd_log "could not remove $dir"
}
