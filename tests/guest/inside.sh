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
# hpcq start's own timings (a node down after 5 s of silence): an agent's
# loop does not wait on a job's start (t0058). What the guest changes is the
# wait for the agents to come up. Each runs CRIU at its start (criu --version,
# criu check, two trial dumps), and a host's agents run CRIU one at a time
# (HostCriuLock). Measured 2026-12-02: criu check 0.09 s on the host, 0.9 s
# in this guest (facts: criu_check_ms); four agents up 1 s after hpcq start
# on the host, so about 10 s here when the host is quiet. A busy host made
# it more than hpcq start's 30 s (10 of 12 tests failed so). 150 s allows a
# host 15 times slower than quiet and leaves each test half of its
# GUEST_TEST_TIMEOUT (300 s).
export HPCQ_TEST_START_ARGS="--wait 150"
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
  # What an agent's start costs here (see HPCQ_TEST_START_ARGS).
  t0=$(date +%s%N)
  criu check > /dev/null 2>&1
  rc=$?
  echo "criu_check_ms $((($(date +%s%N) - t0) / 1000000)) (exit $rc)"
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
