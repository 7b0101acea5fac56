#!/usr/bin/env bash
# CTest gpu_check.fake: runs scripts/gpu-check without a GPU, against the fake
# libnvidia-ml (tests/fake_nvml) and fake nvidia-smi scripts written here,
# and checks its exit status and what it reports:
#   identical       nvidia-smi agrees with NVML (discovery, health)    -> 0, row remapping shown
#   rounding        NVML's size is not whole MiB, smi rounds up        -> 0, with a note
#   other-uuid      nvidia-smi shows another UUID for GPU 1            -> 1, the difference named
#   mig-identical   a GPU in MIG mode with two instances, -L agrees    -> 0, the instances listed
#   mig-other-uuid  nvidia-smi -L shows another UUID for one instance  -> 1, both UUIDs named
#   ecc-differs     nvidia-smi counts 3 uncorrected ECC errors, NVML 0 -> 1, the difference named
#   old-driver      nvidia-smi fails the health and ROW_REMAPPER queries -> 0, with notes
#   lost            NVML answers GPU_IS_LOST for GPU 1                 -> 0, checked, the GPU noted
#   lost-smi-fails  ... and nvidia-smi's discovery query fails         -> 2, the lost GPU named
#   no-smi          no nvidia-smi                                      -> 2, advice
#   no-nvml         the NVML library cannot be loaded                  -> 2, the loader's message
# and, at the end (read-only), that the script asked nvidia-smi nothing but
# its read-only queries and listing.
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
readonly mig_a=MIG-5c1d2e3f-4a5b-5c6d-8e7f-9a0b1c2d3e4f
readonly mig_b=MIG-7e8f9a0b-1c2d-5e3f-8a4b-5c6d7e8f9a0b
readonly mig_other=MIG-ffffffff-1c2d-5e3f-8a4b-5c6d7e8f9a0b
readonly header='index, uuid, name, memory.total [MiB]'

# Two GPUs: 141 GiB (144384 MiB) and 80 GiB (81920 MiB), the second one
# without retired pages (as Ampere and later: [N/A]).
cat >"$work/gpus.json" <<EOF
{"gpus": [
  {"uuid": "$uuid0", "name": "NVIDIA H200", "memory": "141g", "pci_bus_id": "00000000:17:00.0", "numa_node": 0},
  {"uuid": "$uuid1", "name": "NVIDIA H100 80GB HBM3", "memory": "80g", "retired_pages": false}
]}
EOF
# One GPU of 80 GiB + 512 KiB: 81920.5 MiB.
cat >"$work/odd-size.json" <<EOF
{"gpus": [{"uuid": "$uuid0", "name": "NVIDIA H200", "memory": $(((80 << 30) + (512 << 10)))}]}
EOF
# GPU 0 in MIG mode with a 3g.40gb and a 1g.10gb instance, 2 uncorrected ECC
# errors and no retired pages; GPU 1 whole.
cat >"$work/mig.json" <<EOF
{"gpus": [
  {"uuid": "$uuid1", "name": "NVIDIA H100 80GB HBM3", "memory": "80g", "ecc_uncorrected": 2,
   "retired_pages": false,
   "mig": {"instances": [
     {"uuid": "$mig_a", "profile": "3g.40gb", "memory": "40g", "gpu_instance": 2},
     {"uuid": "$mig_b", "profile": "1g.10gb", "memory": "9984m", "gpu_instance": 9}]}},
  {"uuid": "$uuid0", "name": "NVIDIA H200", "memory": "141g"}
]}
EOF
# As gpus.json, but GPU 1 has fallen off the bus.
cat >"$work/lost.json" <<EOF
{"gpus": [
  {"uuid": "$uuid0", "name": "NVIDIA H200", "memory": "141g", "pci_bus_id": "00000000:17:00.0", "numa_node": 0},
  {"uuid": "$uuid1", "name": "NVIDIA H100 80GB HBM3", "memory": "80g", "lost": true}
]}
EOF

# The calls scripts/gpu-check may make of nvidia-smi, all read-only.
readonly call_discovery='--query-gpu=index,uuid,name,memory.total --format=csv'
readonly call_list='-L'
readonly call_health='--query-gpu=index,ecc.errors.uncorrected.volatile.total,retired_pages.pending --format=csv,noheader'
readonly call_row_remapper='-q -d ROW_REMAPPER'

# fake_smi NAME [FROM]: makes the directory $work/NAME holding a fake
# nvidia-smi (NAME/nvidia-smi) that answers the calls above with its files
# discovery.csv, list.txt, health.csv and row-remapper.txt (copied from
# $work/FROM when given; write them with `put`). A FILE.fail in place of FILE:
# the fake prints it and exits 2, as an nvidia-smi without that query does.
# Any other call: a message and exit 2. Every call's arguments are appended
# to NAME/calls.
fake_smi() {
  local dir=$work/$1
  rm -rf "$dir"
  mkdir -p "$dir"
  if (($# > 1)); then cp "$work/$2"/*.csv "$work/$2"/*.txt "$dir/"; fi
  # shellcheck disable=SC2016  # the $ expansions are for the fake, not for us
  {
    echo '#!/bin/sh'
    echo 'dir=$(dirname "$0")'
    echo 'echo "$*" >>"$dir/calls"'
    echo 'case "$*" in'
    echo "  '$call_discovery') file=discovery.csv ;;"
    echo "  '$call_list') file=list.txt ;;"
    echo "  '$call_health') file=health.csv ;;"
    echo "  '$call_row_remapper') file=row-remapper.txt ;;"
    echo '  *) echo "fake nvidia-smi: unexpected arguments: $*" >&2; exit 2 ;;'
    echo 'esac'
    echo 'if [ -f "$dir/$file.fail" ]; then cat "$dir/$file.fail"; exit 2; fi'
    echo 'cat "$dir/$file"'
  } >"$dir/nvidia-smi"
  chmod +x "$dir/nvidia-smi"
}
# put NAME FILE LINE...: writes LINE... as the file FILE of the fake NAME.
put() {
  local file=$work/$1/$2
  shift 2
  printf '%s\n' "$@" >"$file"
}
# row_remapper NAME BUS_ID...: writes the fake NAME's row-remapper.txt, as
# nvidia-smi -q -d ROW_REMAPPER writes it of GPUs with those PCI bus ids and
# no remapped rows.
row_remapper() {
  local file=$work/$1/row-remapper.txt bus_id
  shift
  {
    printf '%s\n' '' '==============NVSMI LOG==============' '' \
      'Timestamp                                 : Mon Jan  6 10:00:00 2025' \
      'Driver Version                            : 550.54.15' '' \
      "Attached GPUs                             : $#"
    for bus_id in "$@"; do
      printf '%s\n' "GPU $bus_id" \
        '    Remapped Rows' \
        '        Correctable Error                 : 0' \
        '        Uncorrectable Error               : 0' \
        '        Pending                           : No' \
        '        Remapping Failure Occurred        : No' \
        '        Bank Remap Availability Histogram' \
        '            Max                           : 640 bank(s)' \
        '            None                          : 0 bank(s)' ''
    done
  } >"$file"
}

# nvidia-smi's own spacing varies with the GPU; the check normalises it.
fake_smi smi-identical
put smi-identical discovery.csv "$header" \
  "0, $uuid0, NVIDIA H200, 144384 MiB" \
  "1,  $uuid1,  NVIDIA H100 80GB HBM3 , 81920 MiB"
put smi-identical list.txt \
  "GPU 0: NVIDIA H200 (UUID: $uuid0)" \
  "GPU 1: NVIDIA H100 80GB HBM3 (UUID: $uuid1)"
put smi-identical health.csv "0, 0, No" "1, 0, [N/A]"
row_remapper smi-identical 00000000:17:00.0 00000000:02:00.0

fake_smi smi-other-uuid smi-identical
put smi-other-uuid discovery.csv "$header" \
  "0, $uuid0, NVIDIA H200, 144384 MiB" \
  "1, GPU-ffffffff-4e5f-4a6b-8c7d-9e0f1a2b3c4d, NVIDIA H100 80GB HBM3, 81920 MiB"

fake_smi smi-rounded-up
put smi-rounded-up discovery.csv "$header" "0, $uuid0, NVIDIA H200, 81921 MiB"
put smi-rounded-up list.txt "GPU 0: NVIDIA H200 (UUID: $uuid0)"
put smi-rounded-up health.csv "0, 0, No"
row_remapper smi-rounded-up 00000000:01:00.0

fake_smi smi-mig
put smi-mig discovery.csv "$header" \
  "0, $uuid1, NVIDIA H100 80GB HBM3, 81920 MiB" \
  "1, $uuid0, NVIDIA H200, 144384 MiB"
put smi-mig list.txt \
  "GPU 0: NVIDIA H100 80GB HBM3 (UUID: $uuid1)" \
  "  MIG 3g.40gb     Device  0: (UUID: $mig_a)" \
  "  MIG 1g.10gb     Device  1: (UUID: $mig_b)" \
  "GPU 1: NVIDIA H200 (UUID: $uuid0)"
put smi-mig health.csv "0, 2, [Not Supported]" "1, 0, No"
row_remapper smi-mig 00000000:01:00.0 00000000:02:00.0

fake_smi smi-mig-other-uuid smi-mig
put smi-mig-other-uuid list.txt \
  "GPU 0: NVIDIA H100 80GB HBM3 (UUID: $uuid1)" \
  "  MIG 3g.40gb     Device  0: (UUID: $mig_a)" \
  "  MIG 1g.10gb     Device  1: (UUID: $mig_other)" \
  "GPU 1: NVIDIA H200 (UUID: $uuid0)"

fake_smi smi-ecc smi-identical
put smi-ecc health.csv "0, 0, No" "1, 3, [N/A]"

# An nvidia-smi too old for the health fields and the ROW_REMAPPER display.
fake_smi smi-old-driver smi-identical
rm "$work/smi-old-driver/health.csv" "$work/smi-old-driver/row-remapper.txt"
put smi-old-driver health.csv.fail 'Field "retired_pages.pending" is not a valid field to query.'
put smi-old-driver row-remapper.txt.fail "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help."

# GPU 1 lost, as this nvidia-smi shows it.
fake_smi smi-lost smi-identical
put smi-lost discovery.csv "$header" \
  "0, $uuid0, NVIDIA H200, 144384 MiB" \
  "1, [GPU is lost], [GPU is lost], [GPU is lost]"
put smi-lost list.txt \
  "GPU 0: NVIDIA H200 (UUID: $uuid0)" \
  "Unable to determine the device handle for GPU1: 00000000:02:00.0: GPU is lost."
put smi-lost health.csv "0, 0, No" "1, [GPU is lost], [GPU is lost]"

fake_smi smi-lost-fails smi-lost
rm "$work/smi-lost-fails/discovery.csv"
put smi-lost-fails discovery.csv.fail \
  "Unable to determine the device handle for GPU1: 00000000:02:00.0: GPU is lost."

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
# also NAME TEXT...: the output of the case NAME (run by expect before) holds
# each TEXT too.
also() {
  local name=$1 text
  shift
  for text in "$@"; do
    grep -qF -- "$text" "$work/$name.log" && continue
    echo "FAIL $name: its output does not hold \"$text\" (the whole output: $work/$name.log)"
    failures=$((failures + 1))
  done
}

expect identical 0 "RESULT: IDENTICAL: 2 GPU(s)" "$work/gpus.json" \
  --nvml-library "$fake_nvml" --nvidia-smi "$work/smi-identical/nvidia-smi"
also identical "the health readings match" "compared the readings of 2 GPU(s)" \
  "1, $uuid1, No, 0, [N/A], No, No" "Remapping Failure Occurred        : No"
expect rounding 0 "counted as equal (rounded up vs down)" "$work/odd-size.json" \
  --nvml-library "$fake_nvml" --nvidia-smi "$work/smi-rounded-up/nvidia-smi"
expect other-uuid 1 "GPU row 2 (index 1): uuid: slotd '$uuid1', nvidia-smi 'GPU-ffffffff-" "$work/gpus.json" \
  --nvml-library "$fake_nvml" --nvidia-smi "$work/smi-other-uuid/nvidia-smi"
expect mig-identical 0 "RESULT: IDENTICAL: 2 GPU(s), the header and every row match, 2 MIG instance(s) match" \
  "$work/mig.json" --nvml-library "$fake_nvml" --nvidia-smi "$work/smi-mig/nvidia-smi"
also mig-identical "0, $uuid1, 3g.40gb, $mig_a, 2, 0, 40960 MiB" "0, $uuid1, 1g.10gb, $mig_b, 9, 0, 9984 MiB" \
  "the health readings match"
expect mig-other-uuid 1 "DIFFERENT: MIG instance $mig_b (1g.10gb on GPU index 0) is only in slotd's list" \
  "$work/mig.json" --nvml-library "$fake_nvml" --nvidia-smi "$work/smi-mig-other-uuid/nvidia-smi"
also mig-other-uuid "DIFFERENT: MIG instance $mig_other (1g.10gb on GPU index 0) is only in nvidia-smi's list" \
  "RESULT: DIFFERENT: 2 difference(s)"
expect ecc-differs 1 \
  "DIFFERENT: health of GPU index 1: ecc.errors.uncorrected.volatile.total: slotd '0', nvidia-smi '3'" \
  "$work/gpus.json" --nvml-library "$fake_nvml" --nvidia-smi "$work/smi-ecc/nvidia-smi"
also ecc-differs "RESULT: DIFFERENT: 1 difference(s)"
expect old-driver 0 "health not compared (see the note)" "$work/gpus.json" \
  --nvml-library "$fake_nvml" --nvidia-smi "$work/smi-old-driver/nvidia-smi"
also old-driver 'Field "retired_pages.pending" is not a valid field to query.' \
  "the health readings are not compared" "this nvidia-smi may not know ROW_REMAPPER"
expect lost 0 "note: GPU index 1 is lost: NVML answers GPU_IS_LOST" "$work/lost.json" \
  --nvml-library "$fake_nvml" --nvidia-smi "$work/smi-lost/nvidia-smi"
also lost "1, [GPU is lost], Yes, [N/A], [N/A], [N/A], [N/A]" "RESULT: IDENTICAL: 2 GPU(s)" "1 GPU(s) lost"
expect lost-smi-fails 2 "slotd's loader found GPU index 1 lost" "$work/lost.json" \
  --nvml-library "$fake_nvml" --nvidia-smi "$work/smi-lost-fails/nvidia-smi"
expect no-smi 2 "or pass --nvidia-smi PATH" "$work/gpus.json" \
  --nvml-library "$fake_nvml" --nvidia-smi "$work/no-such-nvidia-smi"
expect no-nvml 2 "cannot load NVML from \"$work/no-such-libnvidia-ml.so.1\"" "$work/gpus.json" \
  --nvml-library "$work/no-such-libnvidia-ml.so.1" --nvidia-smi "$work/smi-identical/nvidia-smi"

# The check must only read: every call it made is one of the four above.
unexpected=$(cat "$work"/smi-*/calls | grep -vxF -e "$call_discovery" -e "$call_list" -e "$call_health" \
  -e "$call_row_remapper" || true)
if [[ -n $unexpected ]]; then
  echo "FAIL read-only: scripts/gpu-check called nvidia-smi with other arguments:"
  printf '    %s\n' "$unexpected"
  failures=$((failures + 1))
else
  echo "PASS read-only"
fi

if ((failures > 0)); then
  echo "$failures case(s) failed; the logs are in $work"
  exit 1
fi
