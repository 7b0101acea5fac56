#!/usr/bin/env bash
# Makes sure the package of the release named in packaging/previous-release
# is in the cache, building it when it is not, and prints its path.
#  - It is built from the release's own commit (a local clone of this
#    repository checked out there) with the release's own scripts/package,
#    by clang-14 without optimisation, with a precompiled header of the
#    heavy headers (tests/previous_release_pch.cmake, given to its configure),
#    at a low priority (the tests beside it keep the processor): only the
#    package matters, and the sources are the release's, untouched.
#  - Built once per machine: kept in $SLOTD_CACHE_DIR/previous-release/<commit>/
#    (default ~/.cache/slotd), outside every clone and build directory, and
#    reused while that commit stays named; a build that fails or is
#    interrupted leaves nothing there.
#  - Two calls at once build it once: the second waits for the first (a lock
#    beside the cache entry). scripts/test starts a call before its own build,
#    so that the package is ready, or nearly, when the upgrade test asks.
# Exits 77 when this checkout lacks the release's commit (not a git clone, or
# a shallow one), 1 when the release does not build.
# Usage: previous_release.sh REPO_ROOT [LOG_DIR]
#   LOG_DIR: where a failed build's log is copied (default: none)
set -euo pipefail
if (($# < 1 || $# > 2)); then
  echo "usage: $0 REPO_ROOT [LOG_DIR]" >&2
  exit 2
fi
repo=$(cd "$1" && pwd)
log_dir=${2:-}

read -r version commit < <(grep -v '^#' "$repo/packaging/previous-release")
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ && $commit =~ ^[0-9a-f]{40}$ ]] ||
  { echo "FAIL: packaging/previous-release does not say 'VERSION COMMIT'" >&2; exit 1; }
if ! git -C "$repo" cat-file -e "$commit^{commit}" 2>/dev/null; then
  echo "SKIP: this checkout lacks commit $commit of release $version (not a git clone, or a shallow one);" >&2
  echo "      clone the repository with its history to run the upgrade tests" >&2
  exit 77
fi

cache=${SLOTD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/slotd}/previous-release
previous=$cache/$commit
mkdir -p "$cache"
exec {lock}>"$cache/$commit.lock"
if ! flock -n "$lock"; then
  echo "release $version ($commit): another call is building it; waiting" >&2
  flock "$lock"
fi
cached() { ls "$previous"/slotd_"$version"-*.deb 2>/dev/null; }
if deb=$(cached); then
  echo "release $version ($commit): the package built before, from $previous" >&2
  echo "$deb"
  exit 0
fi

# Holding the lock, no other build runs: what a killed one left is removed.
rm -rf "$cache/$commit".building.*
work=$(mktemp -d "$cache/$commit.building.XXXXXX")
# Signals are ignored while it is removed (rm too inherits that), so a
# second one cannot leave half of it.
trap 'trap "" TERM INT; rm -rf "$work"' EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
# A clone, not an archive: the release's build records its commit (git describe).
git clone -q --shared --no-checkout "$repo" "$work/src"
git -C "$work/src" checkout -q --detach "$commit"
echo "building release $version ($commit) in $work/src/build (kept as $previous)" >&2
started=$SECONDS
# Configures and packages the release in $work/src/build with cmake arguments "$@".
build_release() {
  rm -rf "$work/src/build" "$work/package"
  cmake -S "$work/src" -B "$work/src/build" -G Ninja -DCMAKE_BUILD_TYPE=None \
    -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
    "-DCMAKE_CXX_FLAGS=-O0 -g0" -DSLOTD_BUILD_TESTS=OFF "$@" >"$work/package.log" 2>&1 &&
    mkdir -p "$work/package" &&
    nice -n 15 "$work/src/scripts/package" --out "$work/package" "$work/src/build" >>"$work/package.log" 2>&1
}
# A precompiled header of the heavy headers (a third less time); a release
# whose sources do not build with it is built again without.
if ! build_release "-DCMAKE_PROJECT_INCLUDE=$repo/tests/previous_release_pch.cmake"; then
  tail -n 20 "$work/package.log" >&2
  echo "release $version did not build with a precompiled header; building it again without" >&2
  if ! build_release; then
    tail -n 40 "$work/package.log" >&2
    [[ -n $log_dir ]] && cp "$work/package.log" "$log_dir/previous-package.log" &&
      echo "log: $log_dir/previous-package.log" >&2
    echo "FAIL: release $version did not build or package" >&2
    exit 1
  fi
fi
echo "release $version built and packaged in $((SECONDS - started)) s" >&2
# Only the package is kept; it appears whole, by a rename, or not at all.
rm -rf "$previous"
mv "$work/package" "$previous"
cached
