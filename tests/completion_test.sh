#!/usr/bin/env bash
# CTest packaging.bash_completion: packaging/completion/slotd.bash parses
# (bash -n), and, sourced, completes from the real binaries' --help:
#   slotctl ru<TAB>            -> run
#   slotctl run --pl<TAB>      -> --place
#   slotctl run --pull <TAB>   -> digest tag none (CLI11's choices)
#   slotctl device <TAB>       -> drain undrain clear
#   slotctl --socket PATH rm <TAB>, no agent there -> nothing, quietly
#   slotctl tls <TAB>          -> ca cert fingerprint
#   slotctl tls cert --role <TAB> -> viewer operator admin
#   slotd ch<TAB>              -> check
#   slotd --log-format <TAB>   -> text json
# Usage: completion_test.sh REPO_ROOT BIN_DIR
set -uo pipefail  # no -e: completion functions run without it, as in an interactive shell
if (($# != 2)); then
  echo "usage: $0 REPO_ROOT BIN_DIR" >&2
  exit 2
fi
script=$1/packaging/completion/slotd.bash
export PATH=$2:$PATH
bash -n "$script" || { echo "FAIL: $script does not parse"; exit 1; }
# shellcheck source=/dev/null
source "$script"
fail=0
errors_file=$(mktemp)
trap 'rm -f "$errors_file"' EXIT
# expect "WANTED WORDS" WORD...: complete the last WORD of the line.
expect() {
  local want=$1
  shift
  COMP_WORDS=("$@")
  COMP_CWORD=$(($# - 1))
  COMPREPLY=()
  local spec function
  spec=$(complete -p "$1")
  function=${spec#*-F }
  function=${function%% *}
  "$function" 2>"$errors_file"
  local errors got
  errors=$(<"$errors_file")
  got="${COMPREPLY[*]}"
  if [[ $got != "$want" || -n $errors ]]; then
    echo "FAIL: '$*' completed to '$got', want '$want'${errors:+; stderr: $errors}"
    fail=1
  fi
}
expect "run" slotctl ru
expect "--place" slotctl run --pl
expect "digest tag none" slotctl run --pull ""
expect "drain undrain clear" slotctl device ""
expect "" slotctl --socket /nonexistent/agent.sock rm ""
expect "--json" slotctl --js
expect "ca cert fingerprint" slotctl tls ""
expect "viewer operator admin" slotctl tls cert --role ""
expect "check" slotd ch
expect "text json" slotd --log-format ""
((fail == 0)) && echo "completion: all cases complete as expected"
exit $fail
