#!/bin/sh
# systemd-analyze verify on the configured unit files, with ExecStart pointed
# at the build tree's binaries (verify checks that they exist).
set -eu
units_dir=$1 build=$2 sbindir=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for unit in hpcqd.service hpcq-agent.service; do
  sed -e "s|$sbindir/hpcqd|$build/daemon/hpcqd|" \
      -e "s|$sbindir/hpcq-agent|$build/agent/hpcq-agent|" "$units_dir/$unit" > "$tmp/$unit"
done
# The man pages are checked by their own tests (they are not installed here).
out=$(systemd-analyze verify --man=no "$tmp/hpcqd.service" "$tmp/hpcq-agent.service" 2>&1 || echo "exit status $?")
# Lines about the machine's own units (this VM has no systemd as PID 1) are not ours.
ours=$(printf '%s\n' "$out" | grep -E "hpcq|exit status" || true)
if [ -n "$ours" ]; then
  printf '%s\n' "$ours"
  exit 1
fi
echo "hpcqd.service and hpcq-agent.service verified"
