#!/usr/bin/env bash
# CTest gpu_check.fake: runs scripts/gpu-check without a GPU, against the fake
# libnvidia-ml (tests/fake_nvml) and fake nvidia-smi scripts written here,
# and checks its exit status and what it reports:
#   identical   nvidia-smi agrees with NVML                   -> 0
#   rounding    NVML's size is not whole MiB, smi rounds up   -> 0, with a note
#   other-uuid  nvidia-smi shows another UUID for GPU 1       -> 1, the difference named
#   no-smi      no nvidia-smi                                 -> 2, advice
#   no-nvml     the NVML library cannot be loaded             -> 2, the loader's message
# Usage: gpu_check_test.sh REPO_ROOT FAKE_NVML_LIBRARY WORK_DIR
# WORK_DIR holds the probe's build (kept between runs, so a rerun is quick)
# and the fakes.
set -euo pipefail

if (($# != 3)); then
  echo "usage: $0 REPO_ROOT FAKE_NVML_LIBRARY WORK_DIR" >&2
  exit 2
fi
repo=$1
fake_nvml=$2
work=$3
mkdir -p "$work"

readonly uuid0=GPU-6f3c1a2b-9d4e-4f5a-8b6c-7d8e9f0a1b2c
readonly uuid1=GPU-0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d
readonly header='index, uuid, name, memory.total [MiB]'

# Two GPUs: 141 GiB (144384 MiB) and 80 GiB (81920 MiB).
cat >"$work/gpus.json" <<EOF
{"gpus": [
  {"uuid": "$uuid0", "name": "NVIDIA H200", "memory": "141g", "pci_bus_id": "00000000:17:00.0", "numa_node": 0},
  {"uuid": "$uuid1", "name": "NVIDIA H100 80GB HBM3", "memory": "80g"}
]}
EOF
# One GPU of 80 GiB + 512 KiB: 81920.5 MiB.
cat >"$work/odd-size.json" <<EOF
{"gpus": [{"uuid": "$uuid0", "name": "NVIDIA H200", "memory": $(((80 << 30) + (512 << 10)))}]}
EOF

# fake_smi FILE LINE...: writes FILE, a fake nvidia-smi that prints LINE...
# when called with exactly the query scripts/gpu-check must make.
fake_smi() {
  local file=$1
  shift
  {
    echo '#!/bin/sh'
    # shellcheck disable=SC2016  # $* is for the fake, not for us
    echo 'if [ "$*" != "--query-gpu=index,uuid,name,memory.total --format=csv" ]; then'
    echo '  echo "fake nvidia-smi: unexpected arguments: $*" >&2; exit 2'
    echo 'fi'
    echo "cat <<'CSV'"
    printf '%s\n' "$@"
    echo 'CSV'
  } >"$file"
  chmod +x "$file"
}
# nvidia-smi's own spacing varies with the GPU; the check normalises it.
fake_smi "$work/smi-identical" "$header" \
  "0, $uuid0, NVIDIA H200, 144384 MiB" \
  "1,  $uuid1,  NVIDIA H100 80GB HBM3 , 81920 MiB"
fake_smi "$work/smi-other-uuid" "$header" \
  "0, $uuid0, NVIDIA H200, 144384 MiB" \
  "1, GPU-ffffffff-4e5f-4a6b-8c7d-9e0f1a2b3c4d, NVIDIA H100 80GB HBM3, 81920 MiB"
fake_smi "$work/smi-rounded-up" "$header" "0, $uuid0, NVIDIA H200, 81921 MiB"

failures=0
# expect NAME STATUS TEXT GPUS_JSON [GPU-CHECK-ARGS...]: runs scripts/gpu-check
# with SLOTD_FAKE_NVML_FILE=GPUS_JSON and the args; passes when it exits STATUS
# and its output holds TEXT.
expect() {
  local name=$1 want_status=$2 want_text=$3 gpus=$4 status=0
  shift 4
  local log=$work/$name.log
  SLOTD_FAKE_NVML_FILE=$gpus "$repo/scripts/gpu-check" --build-dir "$work/build" "$@" >"$log" 2>&1 || status=$?
  if ((status == want_status)) && grep -qF -- "$want_text" "$log"; then
    echo "PASS $name"
    return
  fi
  echo "FAIL $name: wanted exit $want_status and output holding \"$want_text\"; got exit $status, output:"
  sed 's/^/    /' "$log"
  failures=$((failures + 1))
}

expect identical 0 "RESULT: IDENTICAL: 2 GPU(s)" "$work/gpus.json" \
  --nvml-library "$fake_nvml" --nvidia-smi "$work/smi-identical"
expect rounding 0 "counted as equal (rounded up vs down)" "$work/odd-size.json" \
  --nvml-library "$fake_nvml" --nvidia-smi "$work/smi-rounded-up"
expect other-uuid 1 "GPU row 2 (index 1): uuid: slotd '$uuid1', nvidia-smi 'GPU-ffffffff-" "$work/gpus.json" \
  --nvml-library "$fake_nvml" --nvidia-smi "$work/smi-other-uuid"
expect no-smi 2 "or pass --nvidia-smi PATH" "$work/gpus.json" \
  --nvml-library "$fake_nvml" --nvidia-smi "$work/no-such-nvidia-smi"
expect no-nvml 2 "cannot load NVML from \"$work/no-such-libnvidia-ml.so.1\"" "$work/gpus.json" \
  --nvml-library "$work/no-such-libnvidia-ml.so.1" --nvidia-smi "$work/smi-identical"

if ((failures > 0)); then
  echo "$failures case(s) failed; the logs are in $work"
  exit 1
fi
