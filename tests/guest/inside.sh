#!/bin/sh
# Runs inside the guest (tests/guest/init.sh chroots into the guest's root
# and runs this with its config sourced): the guest's facts, then each test
# of GUEST_TESTS with its output in <name>.log and one line
# "<name> <exit code> <seconds>" in results, copied after each test to the
# host's share (tag "out"), which run_guest.py reads once the guest has
# powered off. The share is mounted only to copy: CRIU cannot dump a job
# whose mount namespace holds a 9p mount.
out=/run/guest-out
mkdir -p "$out" /run/guest-share
publish() {
  mount -t 9p -o trans=virtio,version=9p2000.L,cache=none out /run/guest-share &&
    cp "$out"/* /run/guest-share/ && sync && umount /run/guest-share
}
export PATH="$(dirname "$GUEST_PYTHON"):/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
export HOME=/root LANG=C.UTF-8
export HPCQ_BUILD_ROOT="$GUEST_BUILD" PYTHONDONTWRITEBYTECODE=1
# Under TCG one launch once held an agent's loop for 37 s (g0003, the full
# suite of 2026-11-29), past hpcq start's 5 s to a down node, which failed
# the job. These tests are about cgroup v2, NUMA and restores; how fast a
# silent node goes down is t0006's, on the host.
export HPCQ_TEST_START_ARGS="--node-down-after 60"
[ -n "${GUEST_REQUIRE_CHECKPOINT:-}" ] && export HPCQ_REQUIRE_CHECKPOINT=1
ip link set lo up
hostname hpcq-guest
{
  echo "kernel $(uname -r)"
  echo "cpus $(nproc)"
  echo "numa_nodes $(ls -d /sys/devices/system/node/node* | wc -l)"
  echo "cgroup_fs $(stat -f -c %T /sys/fs/cgroup)"
  echo "cgroup_controllers $(cat /sys/fs/cgroup/cgroup.controllers)"
  echo "own_cgroup $(cat /proc/self/cgroup)"
} > "$out/facts" 2>&1
publish
# Stalls of the whole guest (a loaded host gives TCG's vCPUs no time), so
# that a missed heartbeat in a test's log can be told from a slow agent.
cat > /run/stalls.py <<'EOF'
import sys, time
last = time.monotonic()
with open(sys.argv[1], "a", buffering=1) as f:
    while True:
        time.sleep(0.25)
        now = time.monotonic()
        if now - last > 1.5:
            f.write(f"{time.strftime('%H:%M:%S')} the guest stalled {now - last:.1f} s\n")
        last = now
EOF
"$GUEST_PYTHON" /run/stalls.py "$out/stalls" &
cd "$GUEST_SRC" || exit 1
for t in $GUEST_TESTS; do
  name=$(basename "$t" .py)
  case "$t" in
    *.py) run="$GUEST_PYTHON $t" ;;  # a script of the source tree
    *) run="$GUEST_BUILD/$t" ;;       # a program of the build tree
  esac
  start=$(date +%s)
  timeout -s KILL "$GUEST_TEST_TIMEOUT" $run > "$out/$name.log" 2>&1
  rc=$?
  echo "$name $rc $(($(date +%s) - start))" >> "$out/results"
  publish
done
echo done > "$out/done"
publish
