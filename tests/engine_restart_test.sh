#!/usr/bin/env bash
# CTest engine_restart.private_engine: kernels under a restart policy across a
# restart of the engine itself, on an engine of its own (scripts/dockerd-start
# under a temporary directory), so that no other test's containers are
# stopped: the engine stops every container when it goes; when it is back,
# the agent (which kept running, its event stream broken) finds a kernel under
# `always` ended and starts it again in its own container, once, with its
# allocation; a kernel under `never` stays ended.
# Usage: engine_restart_test.sh REPO_ROOT SLOTD_BINARY SLOTCTL_BINARY
set -euo pipefail
if (($# != 3)); then
  echo "usage: $0 REPO_ROOT SLOTD_BINARY SLOTCTL_BINARY" >&2
  exit 2
fi
repo=$1
slotd=$2
slotctl=$3
work=$(mktemp -d /tmp/slotd-er.XXXXXX)
slotd_pid=
cleanup() {
  [[ -z $slotd_pid ]] || { kill -KILL "$slotd_pid" 2>/dev/null; wait "$slotd_pid" 2>/dev/null; } || true
  "$repo/scripts/dockerd-stop" "$work/engine" >/dev/null 2>&1 || true
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT
fail() { echo "engine_restart_test: FAILED: $*" >&2; [[ -f $work/slotd.log ]] && tail -30 "$work/slotd.log" >&2; exit 1; }

eval "$("$repo/scripts/dockerd-start" "$work/engine")"
"$repo/scripts/make-test-image" 2>/dev/null
cat >"$work/agent.toml" <<TOML
[agent]
id = "er-test-$$"
rpc-listen-addr = "127.0.0.1:0"
ipc-base-path = "$work/ipc"
var-base-path = "$work/var"
[node]
claims-dir = "$work/claims"
[container]
docker-host = "$DOCKER_HOST"
port-range = [39010, 39019]
stop-timeout = "1s"
auto-pull = "none"
allow-root = true
[resource.cpu]
allowed-cores = "0-1"
[resource.memory]
size = "256m"
TOML
ctl() { "$slotctl" --config "$work/agent.toml" "$@"; }
# field ID KEY: one field of kernel ID's record.
field() { ctl --json kernels | python3 -c "import json,sys; print(next(k['$2'] for k in json.load(sys.stdin) if k['kernel_id'] == '$1'))"; }
# wait_for ID KEY VALUE: until kernel ID's KEY is VALUE (40 s).
wait_for() {
  for _ in $(seq 1 400); do
    [[ $(field "$1" "$2" 2>/dev/null) == "$3" ]] && return 0
    sleep 0.1
  done
  fail "kernel $1: $2 never became $3 (it is $(field "$1" "$2" 2>&1))"
}

"$slotd" --config "$work/agent.toml" --log-level debug 2>>"$work/slotd.log" &
slotd_pid=$!
for _ in $(seq 1 100); do [[ -S $work/ipc/agent.sock ]] && ctl info >/dev/null 2>&1 && break; sleep 0.1; done
# A back-off longer than the engine's stop, so that the restart is due once
# it no longer answers (docs/api.md: a start refused while it stops counts).
ctl run --id always --mem 32m --restart always --restart-backoff 5s slotd-test/busybox:latest -- sleep 3600 >/dev/null ||
  fail "creating kernel always"
ctl run --id never --mem 32m slotd-test/busybox:latest -- sleep 3600 >/dev/null || fail "creating kernel never"
cores=$(field always allocations)
container=$(field always container_id)

# The engine goes as a node's engine does (SIGTERM: it stops its containers,
# keeping them), not as scripts/dockerd-stop cleans up (which removes them).
kill -TERM "$SLOTD_DOCKERD_PID"
for _ in $(seq 1 300); do kill -0 "$SLOTD_DOCKERD_PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$SLOTD_DOCKERD_PID" 2>/dev/null && fail "the engine did not stop within 30 s"
eval "$("$repo/scripts/dockerd-start" "$work/engine")"

wait_for always restarts 1
wait_for always state RUNNING
wait_for never state TERMINATED
[[ $(field always container_id) == "$container" ]] || fail "kernel always runs in another container"
[[ $(field always allocations) == "$cores" ]] || fail "kernel always holds $(field always allocations), not $cores"
sleep 2
[[ $(field always restarts) == 1 ]] || fail "kernel always was restarted more than once"
docker ps --format '{{.Names}}' | grep -q '^slotd\.r1-' || fail "the restart is not recorded in the container's name"
echo "engine_restart_test: passed"
