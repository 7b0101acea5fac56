#!/usr/bin/env bash
# CTest api_fuzz.npm_ci (the fixture of api_fuzz.schema): installs the fuzzer's
# npm packages, exactly as package-lock.json pins them, into MODULES_DIR
# (under the build directory), with `npm ci --ignore-scripts` (no package's
# install script runs). A second run with the same lock file installs nothing,
# so the suite runs offline once this has run. Node.js and npm come from
# scripts/setup; without them this fails, never skips.
# Usage: install.sh SOURCE_DIR MODULES_DIR   (SOURCE_DIR: tests/api_fuzz)
set -euo pipefail
if (($# != 2)); then
  echo "usage: $0 SOURCE_DIR MODULES_DIR" >&2
  exit 2
fi
source_dir=$1
modules_dir=$2
for tool in node npm; do
  command -v "$tool" >/dev/null ||
    { echo "api_fuzz: $tool is missing: the API fuzz test needs Node.js and npm; run scripts/setup" >&2; exit 1; }
done
mkdir -p "$modules_dir"
stamp=$modules_dir/node_modules/.slotd-lock.sha256
want=$(sha256sum "$source_dir/package-lock.json" | cut -d' ' -f1)
if [[ -f $stamp && $(<"$stamp") == "$want" ]]; then
  echo "api_fuzz: npm packages already installed in $modules_dir (package-lock.json $want)"
  exit 0
fi
cp "$source_dir/package.json" "$source_dir/package-lock.json" "$modules_dir/"
(cd "$modules_dir" && npm ci --ignore-scripts --no-audit --no-fund --prefer-offline --loglevel=error)
echo "$want" >"$stamp"
echo "api_fuzz: installed $(ls "$modules_dir/node_modules" | wc -l) npm packages in $modules_dir (node $(node --version))"
