#!/usr/bin/env bash
# CTest packaging.upgrade_packages, the setup of the upgrade tests (upgrade.*):
# the two packages they install, as OUT_DIR/previous.deb and OUT_DIR/current.deb.
#  - previous.deb: the release named in packaging/previous-release, built from
#    its own commit and kept in a cache outside the clone by
#    tests/previous_release.sh (see there).
#  - current.deb: this build's binaries, packaged by this tree's scripts/package.
# Exits 77 (CTest: skipped, saying why) when this checkout lacks the release's
# commit (not a git clone, or a shallow one); the upgrade tests then skip too.
# Usage: upgrade_packages.sh REPO_ROOT BUILD_DIR OUT_DIR
set -euo pipefail
if (($# != 3)); then
  echo "usage: $0 REPO_ROOT BUILD_DIR OUT_DIR" >&2
  exit 2
fi
repo=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
out=$3
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out/previous.deb" "$out/current.deb"

rc=0
previous=$("$repo/tests/previous_release.sh" "$repo" "$out") || rc=$?
((rc == 0)) || exit "$rc"
cp "$previous" "$out/previous.deb"

"$repo/scripts/package" --no-build --out "$out/current-package" "$build" >"$out/current-package.log" 2>&1 ||
  { cat "$out/current-package.log"; echo "FAIL: this build did not package"; exit 1; }
mv "$out"/current-package/slotd_*.deb "$out/current.deb"
rm -rf "$out/current-package"
for deb in previous current; do
  echo "$deb.deb: slotd $(dpkg-deb -f "$out/$deb.deb" Version)"
done
