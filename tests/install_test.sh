#!/usr/bin/env bash
# CTest packaging.install: `cmake --install BUILD --prefix /usr` into a
# scratch DESTDIR installs exactly the files packaging/README.md lists (no
# test, no library, nothing else), the helper and binaries executable, the
# man pages gzipped, the unit's ExecStart and ExecStartPre pointing at the
# installed files, and the example config loading with `slotd check`.
# Usage: install_test.sh BUILD_DIR
set -euo pipefail
if (($# != 1)); then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
build=$1
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
DESTDIR=$root cmake --install "$build" --prefix /usr >/dev/null

want=$(sort <<'LIST'
/etc/slotd/slotd.env
/usr/bin/slotctl
/usr/bin/slotd
/usr/lib/slotd/slotd-check-node
/usr/lib/systemd/system/slotd.target
/usr/lib/systemd/system/slotd@.service
/usr/lib/tmpfiles.d/slotd.conf
/usr/share/bash-completion/completions/slotctl
/usr/share/bash-completion/completions/slotd
/usr/share/doc/slotd/changelog.Debian.gz
/usr/share/doc/slotd/copyright
/usr/share/doc/slotd/api.md
/usr/share/doc/slotd/cli.md
/usr/share/doc/slotd/config.md
/usr/share/doc/slotd/engines.md
/usr/share/doc/slotd/examples/agent.toml
/usr/share/doc/slotd/fleet.md
/usr/share/doc/slotd/multi-agent.md
/usr/share/doc/slotd/security.md
/usr/share/man/man1/slotctl.1.gz
/usr/share/man/man5/agent.toml.5.gz
/usr/share/man/man8/slotd.8.gz
LIST
)
got=$(cd "$root" && find . -type f -o -type l | sed 's|^\.||' | sort)
fail=0
if [[ $got != "$want" ]]; then
  echo "FAIL: the installed files differ from the list (< wanted, > installed):"
  diff <(echo "$want") <(echo "$got") || true
  fail=1
fi
for f in usr/bin/slotd usr/bin/slotctl usr/lib/slotd/slotd-check-node; do
  [[ -x $root/$f ]] || { echo "FAIL: /$f is not executable"; fail=1; }
done
for f in "$root"/usr/share/man/man*/*.gz; do
  gzip -t "$f" || { echo "FAIL: $f is not gzip"; fail=1; }
done
unit=$root/usr/lib/systemd/system/slotd@.service
for exec in $(sed -n 's/^Exec\(Start\|StartPre\)=\([^ ]*\).*/\2/p' "$unit"); do
  [[ -x $root$exec ]] || { echo "FAIL: slotd@.service runs $exec, which is not installed"; fail=1; }
done
out=$("$root/usr/bin/slotd" check "$root/usr/share/doc/slotd/examples/agent.toml" 2>&1) ||
  { echo "FAIL: the example config does not pass slotd check: $out"; fail=1; }
[[ -d $root/etc/slotd ]] || { echo "FAIL: /etc/slotd, the agents' config directory, is not made"; fail=1; }
# The unit reads the options of every agent from the installed slotd.env,
# which sets them to none.
grep -qx 'EnvironmentFile=-/etc/slotd/slotd.env' "$unit" || { echo "FAIL: slotd@.service does not read /etc/slotd/slotd.env"; fail=1; }
grep -q 'ExecStart=.* \$SLOTD_OPTIONS$' "$unit" || { echo "FAIL: slotd@.service does not pass \$SLOTD_OPTIONS"; fail=1; }
options=$(env -i sh -c ". '$root/etc/slotd/slotd.env' && echo \"[\$SLOTD_OPTIONS]\"")
[[ $options == "[]" ]] || { echo "FAIL: slotd.env sets SLOTD_OPTIONS to $options, not to nothing"; fail=1; }
((fail == 0)) && echo "install: $(wc -l <<<"$got") files, as listed"
exit $fail
