#!/usr/bin/env bash
# CTest api_fuzz.schema: schema-driven fuzzing of a live agent's API
# (fuzz.mjs says what it sends and what it holds the answers to). Starts
# build/bin/slotd against the engine at $DOCKER_HOST (or the one CTest gave
# it), with a token, two mock devices, 2 cores and 1 GiB, then runs fuzz.mjs
# with the npm packages that api_fuzz.npm_ci installed into MODULES_DIR. Fails on any 5xx, any answer the
# document does not allow, or an agent that dies or does not stop cleanly.
# Usage: api_fuzz_test.sh REPO_ROOT SLOTD_BINARY MODULES_DIR [FUZZ.MJS ARGS...]
#   e.g. --seed N (replays a run), --runs N, --time-limit-s N, --verbose;
#   $SLOTD_FUZZ_SEED sets the seed too (default: a fixed one, so CI is repeatable).
set -euo pipefail
if (($# < 3)); then
  echo "usage: $0 REPO_ROOT SLOTD_BINARY MODULES_DIR [FUZZ.MJS ARGS...]" >&2
  exit 2
fi
repo=$1
slotd=$2
modules_dir=$3
shift 3
# The engine CTest gave this test, as integration/harness.cc reads it.
if [[ ${CTEST_RESOURCE_GROUP_0_ENGINE:-} =~ ^id:([a-z0-9_]+), ]]; then
  assigned=SLOTD_TEST_ENGINE_${BASH_REMATCH[1]}
  [[ -z ${!assigned:-} ]] || export DOCKER_HOST=${!assigned}
fi
: "${DOCKER_HOST:?api_fuzz needs a Docker engine: set DOCKER_HOST (scripts/test starts a private one)}"
command -v node >/dev/null || { echo "api_fuzz: node is missing: run scripts/setup" >&2; exit 1; }
[[ -d $modules_dir/node_modules ]] || { echo "api_fuzz: no npm packages in $modules_dir: run the api_fuzz.npm_ci test first" >&2; exit 1; }

work=$(mktemp -d /tmp/slotd-fuzz.XXXXXX)
id=fuzz-$$
slotd_pid=
cleanup() {
  [[ -z $slotd_pid ]] || { kill -KILL "$slotd_pid" 2>/dev/null; wait "$slotd_pid" 2>/dev/null; } || true
  docker ps -aq --filter "label=ai.backend.owner=$id" | xargs -r docker rm -f >/dev/null 2>&1 || true
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT
fail() { echo "api_fuzz: FAILED: $*" >&2; tail -30 "$work/slotd.log" >&2; exit 1; }

token=fuzz-token-$$
echo "$token" >"$work/token"
chmod 600 "$work/token"
viewer_token=fuzz-viewer-token-$$
echo "fuzz-viewer viewer $viewer_token" >"$work/tokens"
chmod 600 "$work/tokens"
cat >"$work/agent.toml" <<TOML
[agent]
id = "$id"
rpc-listen-addr = "127.0.0.1:0"
ipc-base-path = "$work/ipc"
var-base-path = "$work/var"
token-file = "$work/token"
tokens-file = "$work/tokens"
[node]
claims-dir = "$work/claims"
[container]
docker-host = "$DOCKER_HOST"
port-range = [39200, 39209]
stop-timeout = "1s"
auto-pull = "none"
allow-root = true
pull-timeout = "5s"
pull-stall-timeout = "2s"
[resource.cpu]
allowed-cores = "0-1"
[resource.memory]
size = "1g"
[resource.mock]
devices = [
  { id = "mock0", memory = "16g", processing-units = 108, numa-node = 0 },
  { id = "mock1", memory = "16g", processing-units = 108, numa-node = 0 },
]
TOML

"$slotd" --config "$work/agent.toml" --log-level info 2>"$work/slotd.log" &
slotd_pid=$!
port=
for _ in $(seq 1 300); do
  kill -0 "$slotd_pid" 2>/dev/null || fail "the agent exited at start"
  port=$(sed -n 's|.*slotd ready: agent [^ ]* api http://127\.0\.0\.1:\([0-9]*\) .*|\1|p' "$work/slotd.log" | tail -1)
  [[ -n $port ]] && break
  sleep 0.1
done
[[ -n $port ]] || fail "the agent was not ready within 30 s"

# fuzz.mjs resolves its packages from its own directory: run a copy beside them.
cp "$repo/tests/api_fuzz/fuzz.mjs" "$modules_dir/fuzz.mjs"
rc=0
node "$modules_dir/fuzz.mjs" --doc "$repo/docs/openapi.yaml" --tcp "127.0.0.1:$port" --socket "$work/ipc/agent.sock" \
  --token "$token" --viewer-token "$viewer_token" --image slotd-test/busybox:latest --devices mock0,mock1 --registry 127.0.0.1:1 \
  --seed "${SLOTD_FUZZ_SEED:-20240611}" --runs 3000 --time-limit-s 40 "$@" || rc=$?

kill -0 "$slotd_pid" 2>/dev/null || fail "the agent died during the run"
kill -TERM "$slotd_pid"
agent_rc=0
wait "$slotd_pid" || agent_rc=$?
slotd_pid=
((agent_rc == 0)) || fail "the agent exited $agent_rc on SIGTERM after the run"
if ((rc != 0)); then
  echo "api_fuzz: the agent's last log lines:" >&2
  tail -20 "$work/slotd.log" >&2
fi
exit "$rc"
