#!/usr/bin/env bash
# CTest image_gc.private_engine: [container] image-gc-high/low against a real
# engine of its own (scripts/dockerd-start under a temporary directory), so
# that collecting touches no other test's images:
#   - above the high mark, the images that no container uses go, least
#     recently used first; an image a stopped container of another owner was
#     made from, and one a container uses, stay;
#   - while another agent of the node holds image-gc.lock in the claims
#     directory, an agent does not collect.
# Usage: image_gc_test.sh REPO_ROOT SLOTD_BINARY
set -euo pipefail
if (($# != 2)); then
  echo "usage: $0 REPO_ROOT SLOTD_BINARY" >&2
  exit 2
fi
repo=$1
slotd=$2
work=$(mktemp -d /tmp/slotd-gc.XXXXXX)
slotd_pid=
holder_pid=
cleanup() {
  [[ -z $slotd_pid ]] || { kill -KILL "$slotd_pid" 2>/dev/null; wait "$slotd_pid" 2>/dev/null; } || true
  [[ -z $holder_pid ]] || { kill -KILL "$holder_pid" 2>/dev/null; wait "$holder_pid" 2>/dev/null; } || true
  "$repo/scripts/dockerd-stop" "$work/engine" >/dev/null 2>&1 || true
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT
fail() { echo "image_gc_test: FAILED: $*" >&2; [[ -f $work/slotd.log ]] && tail -20 "$work/slotd.log" >&2; exit 1; }

eval "$("$repo/scripts/dockerd-start" "$work/engine")"
"$repo/scripts/make-test-image" 2>/dev/null
# new_image NAME: the test image plus a layer of its own, as NAME.
new_image() {
  local c
  head -c $((1 << 20)) /dev/urandom >"$work/blob"
  c=$(docker create --network none slotd-test/busybox:latest true)
  docker cp "$work/blob" "$c:/blob"
  docker commit "$c" "$1" >/dev/null
  docker rm "$c" >/dev/null
}
has_image() { docker image inspect "$1" >/dev/null 2>&1; }
for name in old fresh used; do new_image "gc-test/$name:1"; done
docker create --name someone-elses --label owner=someone --network none gc-test/used:1 true >/dev/null
docker create --name guard --network none slotd-test/busybox:latest true >/dev/null

# write_config: an agent that collects at every round: above 1%, down to 0%.
cat >"$work/agent.toml" <<TOML
[agent]
id = "gc-test-$$"
rpc-listen-addr = "127.0.0.1:0"
ipc-base-path = "$work/ipc"
var-base-path = "$work/var"
[node]
claims-dir = "$work/claims"
[container]
docker-host = "$DOCKER_HOST"
port-range = [39000, 39009]
image-gc-high = 1
image-gc-low = 0
[resource.cpu]
allowed-cores = "0"
[resource.memory]
size = "256m"
TOML
start_agent() {
  "$slotd" --config "$work/agent.toml" --log-level debug 2>>"$work/slotd.log" &
  slotd_pid=$!
}
# wait_log TEXT COUNT: until the log has COUNT lines with TEXT (30 s).
wait_log() {
  for _ in $(seq 1 300); do
    (($(grep -cF -- "$1" "$work/slotd.log" || true) >= $2)) && return 0
    sleep 0.1
  done
  fail "the log never had $2 line(s) with: $1"
}

# 1. Every image no container uses goes; the two in use stay.
start_agent
wait_log "image gc: removed" 2
has_image gc-test/old:1 && fail "gc-test/old:1 is unused and was not removed"
has_image gc-test/fresh:1 && fail "gc-test/fresh:1 is unused and was not removed"
has_image gc-test/used:1 || fail "gc-test/used:1, made into another owner's stopped container, was removed"
has_image slotd-test/busybox:latest || fail "the test image, which a container uses, was removed"
kill -TERM "$slotd_pid"; wait "$slotd_pid" || true; slotd_pid=

# 2. While another agent holds the node's collection lock, this one skips.
new_image gc-test/again:1
flock -n "$work/claims/image-gc.lock" sleep 60 &
holder_pid=$!
sleep 0.5
start_agent
wait_log "image gc: another agent of the node collects now" 1
has_image gc-test/again:1 || fail "gc-test/again:1 was removed while another agent held the lock"
echo "image_gc_test: passed"
