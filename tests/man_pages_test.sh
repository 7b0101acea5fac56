#!/usr/bin/env bash
# CTest packaging.man_pages: each man page the build writes (slotd.8,
# slotctl.1, agent.toml.5) renders with groff's man macros, and through
# man -l, without a single warning (-ww), has its NAME section, and
# agent.toml(5) lists every section of the config tables.
# Usage: man_pages_test.sh MAN_DIR SLOTD_CONFIG_DOC
set -euo pipefail
if (($# != 2)); then
  echo "usage: $0 MAN_DIR SLOTD_CONFIG_DOC" >&2
  exit 2
fi
man_dir=$1
config_doc=$2
man_warnings=$(mktemp)
trap 'rm -f "$man_warnings"' EXIT
fail=0
for page in slotd.8 slotctl.1 agent.toml.5; do
  file=$man_dir/$page
  if [[ ! -s $file ]]; then
    echo "FAIL: $file is missing (build the slotd_man target; help2man comes from scripts/setup)"
    fail=1
    continue
  fi
  # groff -z: parse and format only; every warning is printed on stderr.
  warnings=$(LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z "$file" 2>&1) || true
  if [[ -n $warnings ]]; then
    echo "FAIL: $page: groff warns:"
    echo "$warnings"
    fail=1
  fi
  # man -l, as a reader would, with every groff warning on: not one either.
  text=$(LC_ALL=C.UTF-8 MANWIDTH=100 man --warnings=w -l "$file" 2>"$man_warnings")
  if [[ -s $man_warnings ]]; then
    echo "FAIL: $page: man -l warns:"
    cat "$man_warnings"
    fail=1
  fi
  if ! grep -q '^NAME' <<<"$text"; then
    echo "FAIL: $page has no NAME section"
    fail=1
  fi
  case $page in
    slotctl.1)
      for sub in run kernels rm device cluster; do
        grep -q "slotctl $sub" <<<"$text" || { echo "FAIL: slotctl.1 does not describe slotctl $sub"; fail=1; }
      done ;;
    slotd.8)
      grep -q -- '--version' <<<"$text" || { echo "FAIL: slotd.8 lacks --version"; fail=1; }
      grep -q 'slotd check' <<<"$text" || { echo "FAIL: slotd.8 does not describe slotd check"; fail=1; }
      ;;
    agent.toml.5)
      # Every section slotd-config-doc lists for docs/config.md is in the page.
      sections=$("$config_doc" | grep -o '`\[[a-z.-]*\]`' | tr -d '`' | sort -u)
      for s in $sections; do
        grep -qF "$s" <<<"$text" || { echo "FAIL: agent.toml.5 lacks section $s"; fail=1; }
      done
      grep -q 'rpc-listen-addr' <<<"$text" || { echo "FAIL: agent.toml.5 lacks agent.rpc-listen-addr"; fail=1; }
      ;;
  esac
done
((fail == 0)) && echo "man pages: all render without warnings"
exit $fail
