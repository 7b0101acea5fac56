#!/usr/bin/env bash
# CTest packaging.upgrade_packages, the setup of the upgrade tests (upgrade.*):
# the two packages they install, as OUT_DIR/previous.deb and OUT_DIR/current.deb.
#  - previous.deb: the release named in packaging/previous-release, built from
#    its own commit (a local clone of this repository checked out there) with
#    its own scripts/package. It is built without optimisation, at a low
#    priority (the tests beside it keep the processor), to keep the test
#    short; the sources are the release's. Built once per machine: kept in
#    $SLOTD_CACHE_DIR/previous-release/<commit>/ (default ~/.cache/slotd),
#    outside every clone and build directory, and reused while that commit
#    stays named; a build that fails or is interrupted leaves nothing there.
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

read -r version commit < <(grep -v '^#' "$repo/packaging/previous-release")
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ && $commit =~ ^[0-9a-f]{40}$ ]] ||
  { echo "FAIL: packaging/previous-release does not say 'VERSION COMMIT'"; exit 1; }
if ! git -C "$repo" cat-file -e "$commit^{commit}" 2>/dev/null; then
  echo "SKIP: this checkout lacks commit $commit of release $version (not a git clone, or a shallow one);"
  echo "      clone the repository with its history to run the upgrade tests"
  exit 77
fi

cache=${SLOTD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/slotd}/previous-release
previous=$cache/$commit
if ls "$previous"/slotd_"$version"-*.deb >/dev/null 2>&1; then
  echo "release $version ($commit): the package built before, from $previous"
else
  mkdir -p "$cache"
  work=$(mktemp -d "$cache/$commit.building.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  # A clone, not an archive: the release's build records its commit (git describe).
  git clone -q --shared --no-checkout "$repo" "$work/src"
  git -C "$work/src" checkout -q --detach "$commit"
  echo "building release $version ($commit) in $work/src/build (kept as $previous)"
  cmake -S "$work/src" -B "$work/src/build" -G Ninja -DCMAKE_BUILD_TYPE=None \
    "-DCMAKE_CXX_FLAGS=-O0 -g0" -DSLOTD_BUILD_TESTS=OFF >"$work/cmake.log" 2>&1 ||
    { tail -n 40 "$work/cmake.log"; echo "FAIL: release $version did not configure"; exit 1; }
  mkdir -p "$work/package"
  if ! nice -n 15 "$work/src/scripts/package" --out "$work/package" "$work/src/build" >"$work/package.log" 2>&1; then
    tail -n 40 "$work/package.log"
    cp "$work/package.log" "$out/previous-package.log"
    echo "FAIL: release $version did not build or package (log: $out/previous-package.log)"
    exit 1
  fi
  # Only the package is kept; it appears whole, by a rename, or not at all.
  rm -rf "$previous"
  mv "$work/package" "$previous"
fi
cp "$(ls "$previous"/slotd_"$version"-*.deb)" "$out/previous.deb"

"$repo/scripts/package" --no-build --out "$out/current-package" "$build" >"$out/current-package.log" 2>&1 ||
  { cat "$out/current-package.log"; echo "FAIL: this build did not package"; exit 1; }
mv "$out"/current-package/slotd_*.deb "$out/current.deb"
rm -rf "$out/current-package"
for deb in previous current; do
  echo "$deb.deb: slotd $(dpkg-deb -f "$out/$deb.deb" Version)"
done
