#!/usr/bin/env bash
# Checks that each area of src/ (a slotd_area line of src/CMakeLists.txt)
# links exactly the areas its sources include: one it includes but does not
# link builds only by luck of another's links; one it links but never
# includes is a dependency that is not there.
# Usage: tests/link_graph_test.sh <src dir>
set -euo pipefail
src=${1:?usage: link_graph_test.sh <src dir>}
failures=0
areas=0
while read -r declaration; do
  read -r -a words <<<"$(sed 's/^slotd_area(//; s/)$//' <<<"$declaration")"
  name=${words[0]} dir=${words[1]}
  linked=$(printf '%s\n' "${words[@]:2}" | sed -n 's/^slotd_//p' | sort -u | tr '\n' ' ')
  included=$(grep -rhoE '^#include "[a-z_]+/' "$src/$dir" | sed 's/^#include "//; s/\/$//' | grep -vx "$dir" |
               sort -u | tr '\n' ' ' || true)
  areas=$((areas + 1))
  if [[ $linked != "$included" ]]; then
    echo "FAIL: $name ($src/$dir) links [ $linked] but its sources include [ $included]:" \
         "make its slotd_area line in src/CMakeLists.txt name exactly the areas it includes"
    failures=$((failures + 1))
  fi
done < <(tr '\n' ' ' <"$src/CMakeLists.txt" | tr -s ' ' | grep -oE 'slotd_area\([^)]*\)')
if ((areas == 0)); then
  echo "FAIL: no slotd_area line found in $src/CMakeLists.txt"
  exit 1
fi
echo "$areas areas checked, $failures whose links differ from their includes"
((failures == 0))
