#!/usr/bin/env python3
"""Runs hpcq's tests in a guest kernel with cgroup v2 alone and two real NUMA
nodes (issue 26): the meson test 'guest' (suite 'guest').

The guest is Debian 12's own kernel (tests/guest/fetch-kernel unpacks it into
HPCQ_GUEST_KERNEL_DIR, default /var/cache/hpcq-guest) under
qemu-system-x86_64 with software emulation (TCG: KVM guests hang on these
machines), -smp 2 and two NUMA nodes of one CPU each, booted with
cgroup_no_v1=all. Its init (tests/guest/init.sh, in a busybox initramfs)
mounts the host's / read-only over virtio-9p under a tmpfs overlay, so the
guest runs this build's binaries and the host's python3 and criu, then
tests/guest/inside.sh runs each test script named here as one node of its own.
Their output comes back through a second, writable 9p share.

    run_guest.py --src SRC --build BUILD [--timeout S] [TEST ...]

A TEST is a script of the source tree (tests/.../NAME.py, run with this
python3) or a program of the build tree (tests/unit/agent/cgroup_test).

Exit: 0 when every test passed, 1 when one failed (its log is printed),
77 (meson's SKIP, with the reason) when qemu, the kernel or busybox is
missing or when not root; 77 too when a test inside skipped, as the
integration tests do. A guest that does not boot where all of them are
here is a failure (1), not a skip: nothing else would show that the guest
suite no longer runs (issue 45).
"""
import argparse
import fcntl
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# What CI runs in the guest: the agent's cgroup and executor unit tests
# (programs of the build tree), the v2 and NUMA checks of this folder, then
# launch and pinning, cancel and time limit, preemption, checkpoint and
# restore, workers and containers, a container checkpoint (scripts of the
# source tree, *.py), GPU isolation by BPF device programs and private /tmp
# (t0044). g0003 (restores and a delegated cgroup) runs early:
# run last, it failed in two of four runs, its node declared down while the
# split job was restored (the agent pinned the restored tree on its loop; it
# now does so on the restore's thread and warns when that is slow). g0002 is
# t0002 with a holder job that sleeps instead of polling (see its docstring).
DEFAULT_TESTS = [
    "tests/unit/agent/cgroup_test",
    "tests/unit/agent/cgroup_v2_test",
    "tests/unit/agent/process_executor_test",
    "tests/guest/g0001_cgroup_v2_numa.py",
    "tests/guest/g0003_v2_restore_delegation.py",
    "tests/integration/t0001_launch.py",
    "tests/guest/g0002_cancel_timeout.py",
    "tests/integration/t0020_preemption.py",
    "tests/integration/t0022_checkpoint.py",
    "tests/integration/t0024_workers_containers.py",
    "tests/integration/t0029_container_checkpoint.py",
    "tests/integration/t0044_gpu_tmp_isolation.py",
]

MODULE_ORDER = "modules/order"

# The programs the tests run, by their place in the build tree (hpcqtest.py's
# binary(), the agent's job shells in shell/).
PROGRAMS = ["cli/hpcq", "cli/hpcq-rsh", "daemon/hpcqd", "agent/hpcq-agent",
            "shell/hpcq-job-shell", "shell/hpcq-container-shell",
            "bench/hpcq-submit-load", "examples/hpcq-elastic-app"]

# Developers who share a tree build under this lock (see snapshot()).
BUILD_LOCK = "/tmp/hpcq-build.lock"


def skip(why):
    print(f"SKIP: {why}", flush=True)
    sys.exit(77)


def cpio_newc(entries):
    """An initramfs (cpio 'newc') of (name, mode, data or None for a
    directory) entries."""
    out = bytearray()
    ino = 1

    def header(name, mode, size, nlink):
        nonlocal ino
        fields = [ino, mode, 0, 0, nlink, 0, size, 0, 0, 0, 0, len(name) + 1, 0]
        ino += 1
        h = b"070701" + b"".join(b"%08X" % f for f in fields)
        return h + name.encode() + b"\0"

    def pad(buf):
        buf.extend(b"\0" * ((4 - len(buf) % 4) % 4))

    for name, mode, data in entries:
        is_dir = data is None
        out += header(name, mode | (stat.S_IFDIR if is_dir else stat.S_IFREG),
                      0 if is_dir else len(data), 2 if is_dir else 1)
        pad(out)
        if not is_dir:
            out += data
            pad(out)
    out += header("TRAILER!!!", 0, 0, 1)
    pad(out)
    return bytes(out)


def make_initramfs(kernel_dir, path):
    busybox = shutil.which("busybox") or "/bin/busybox"
    with open(busybox, "rb") as f:
        busybox_data = f.read()
    entries = [("bin", 0o755, None), ("modules", 0o755, None),
               ("bin/busybox", 0o755, busybox_data)]
    with open(os.path.join(HERE, "init.sh"), "rb") as f:
        entries.append(("init", 0o755, f.read()))
    with open(os.path.join(kernel_dir, MODULE_ORDER), "rb") as f:
        order = f.read()
    entries.append(("modules/order", 0o644, order))
    for m in order.decode().split():
        with open(os.path.join(kernel_dir, "modules", m), "rb") as f:
            entries.append((f"modules/{m}", 0o644, f.read()))
    with open(path, "wb") as f:
        f.write(cpio_newc(entries))


def busybox_is_static():
    busybox = shutil.which("busybox") or "/bin/busybox"
    if not os.path.exists(busybox):
        return False
    ldd = subprocess.run(["ldd", busybox], capture_output=True, text=True)
    return "not a dynamic executable" in ldd.stdout + ldd.stderr


def qemu_command(kernel_dir, initrd, out_dir, console, memory_mb):
    half = memory_mb // 2
    cmdline = ("console=ttyS0 panic=-1 quiet loglevel=4 rdinit=/init "
               "systemd.unified_cgroup_hierarchy=1 cgroup_no_v1=all "
               # TCG's clock is slow and uneven: no soft-lockup noise.
               "nowatchdog tsc=unstable")
    return [
        "qemu-system-x86_64", "-accel", "tcg,thread=multi", "-cpu", "max",
        "-smp", "2", "-m", f"{memory_mb}M",
        "-object", f"memory-backend-ram,id=mem0,size={half}M",
        "-object", f"memory-backend-ram,id=mem1,size={memory_mb - half}M",
        "-numa", "node,nodeid=0,cpus=0,memdev=mem0",
        "-numa", "node,nodeid=1,cpus=1,memdev=mem1",
        "-kernel", os.path.join(kernel_dir, "vmlinuz"), "-initrd", initrd,
        "-append", cmdline,
        "-fsdev", "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap",
        "-device", "virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot",
        "-fsdev", f"local,id=out,path={out_dir},security_model=none",
        "-device", "virtio-9p-pci,fsdev=out,mount_tag=out",
        "-display", "none", "-monitor", "none", "-serial", f"file:{console}",
        "-no-reboot", "-nodefaults",
    ]


def snapshot(build, tests):
    """A tree of hard links to the build's programs, taken while no build
    runs (under BUILD_LOCK, where it exists): the guest reads them for
    minutes through a cached 9p share, and a relink meanwhile must neither
    show it a half-written file nor change a program under a running test
    (the linker writes a new file, so a link keeps the old one)."""
    base = os.path.join(build, "tests", "guest")
    os.makedirs(base, exist_ok=True)
    snap = tempfile.mkdtemp(prefix="programs-", dir=base)
    lock = open(BUILD_LOCK) if os.path.exists(BUILD_LOCK) else None
    try:
        if lock:
            fcntl.flock(lock, fcntl.LOCK_SH)
        for rel in PROGRAMS + [t for t in tests if not t.endswith(".py")]:
            src = os.path.join(build, rel)
            dst = os.path.join(snap, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if os.path.islink(src):
                os.symlink(os.readlink(src), dst)
            elif os.path.exists(src):
                os.link(src, dst)
    finally:
        if lock:
            lock.close()
    return snap


def tail(path, lines=60):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", default=os.path.dirname(os.path.dirname(HERE)))
    ap.add_argument("--build", default=os.environ.get("HPCQ_BUILD_ROOT", ""))
    ap.add_argument("--timeout", type=int, default=1080, help="seconds for the whole guest")
    ap.add_argument("--test-timeout", type=int, default=300, help="seconds for one test")
    # t0020 holds a 1 GB job, dumps it to /tmp (the overlay's upper layer,
    # in guest memory) and restores it; with 2 GB its leader-restart tests
    # saw the job stop counting and its node go silent.
    ap.add_argument("--memory-mb", type=int, default=6144)
    ap.add_argument("--keep", action="store_true", help="keep the output directory")
    ap.add_argument("tests", nargs="*")
    args = ap.parse_args()
    tests = args.tests or DEFAULT_TESTS
    src = os.path.abspath(args.src)
    build = os.path.abspath(args.build) if args.build else os.path.join(src, "build")

    if os.geteuid() != 0:
        skip("the guest tests need root (qemu's 9p share of / and the tests' own needs)")
    if not shutil.which("qemu-system-x86_64"):
        skip("qemu-system-x86_64 is not installed (Debian: qemu-system-x86; .ci/install-deps)")
    kernel_dir = os.environ.get("HPCQ_GUEST_KERNEL_DIR", "/var/cache/hpcq-guest")
    if not os.path.exists(os.path.join(kernel_dir, "vmlinuz")) or not os.path.exists(
            os.path.join(kernel_dir, MODULE_ORDER)):
        skip(f"no guest kernel in {kernel_dir}: run tests/guest/fetch-kernel (.ci/install-deps does)")
    if not busybox_is_static():
        skip("no static busybox for the initramfs (Debian: busybox-static)")
    if not os.access(os.path.join(build, "daemon", "hpcqd"), os.X_OK):
        skip(f"no hpcqd in the build tree {build}")
    python = os.path.realpath(sys.executable)

    programs = snapshot(build, tests)
    out_dir = tempfile.mkdtemp(prefix="hpcq-guest-")
    console = os.path.join(out_dir, "console.log")
    initrd = os.path.join(out_dir, "initramfs.cpio")
    make_initramfs(kernel_dir, initrd)
    with open(os.path.join(out_dir, "config"), "w") as f:
        f.write(f"GUEST_SRC='{src}'\nGUEST_BUILD='{programs}'\nGUEST_PYTHON='{python}'\n"
                f"GUEST_TESTS='{' '.join(tests)}'\nGUEST_TEST_TIMEOUT={args.test_timeout}\n"
                f"GUEST_REQUIRE_CHECKPOINT='"
                f"{'1' if os.environ.get('HPCQ_REQUIRE_CHECKPOINT') == '1' else ''}'\n")
    with open(os.path.join(kernel_dir, "version")) as f:
        version = f.read().strip()
    print(f"guest: {version}, qemu TCG, 2 CPUs, 2 NUMA nodes, cgroup v2 only; "
          f"{len(tests)} test(s); output in {out_dir}", flush=True)

    started = time.monotonic()
    cmd = qemu_command(kernel_dir, initrd, out_dir, console, args.memory_mb)
    try:
        qemu = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=args.timeout)
        qemu_rc, qemu_err = qemu.returncode, qemu.stderr
    except subprocess.TimeoutExpired:
        qemu_rc, qemu_err = None, f"the guest ran past {args.timeout} s and was killed"
    took = time.monotonic() - started
    shutil.rmtree(programs, ignore_errors=True)

    log = tail(console, 400)
    results = []
    try:
        with open(os.path.join(out_dir, "results")) as f:
            results = [line.split() for line in f if line.strip()]
    except OSError:
        pass
    facts = tail(os.path.join(out_dir, "facts"))
    if "guest-init: root ready" not in log:
        print(f"qemu exit {qemu_rc}: {qemu_err.strip()}\n--- console ---\n{tail(console)}")
        shutil.rmtree(out_dir, ignore_errors=True) if not args.keep else None
        print("guest: FAIL: the guest did not boot to its root (console above), though qemu, "
              "the kernel and busybox are here", flush=True)
        return 1
    print("--- guest facts ---\n" + facts, end="")
    stalls = tail(os.path.join(out_dir, "stalls"), 20)
    if stalls:
        print("--- the guest stalled (a loaded host) ---\n" + stalls, end="")

    failed = skipped = passed = 0
    done = {r[0] for r in results}
    for name, rc, secs in results:
        rc = int(rc)
        word = {0: "PASS", 77: "SKIP"}.get(rc, "FAIL")
        if rc == 0:
            passed += 1
        elif rc == 77:
            skipped += 1
        else:
            failed += 1
        print(f"guest: {word} {name} (exit {rc}, {secs} s)", flush=True)
        if rc != 0:
            print(f"--- {name}.log (tail) ---\n{tail(os.path.join(out_dir, name + '.log'), 80)}")
    for t in tests:
        name = os.path.basename(t)[:-3] if t.endswith(".py") else os.path.basename(t)
        if name not in done:
            failed += 1
            print(f"guest: FAIL {name}: did not finish (guest {'timed out' if qemu_rc is None else 'ended'})")
            partial = os.path.join(out_dir, name + ".log")
            if os.path.exists(partial):
                print(f"--- {name}.log (tail) ---\n{tail(partial, 80)}")
            print(f"--- console (tail) ---\n{tail(console, 40)}")
            break
    print(f"guest: {took:.0f} s in all; {passed} passed, {failed} failed, {skipped} skipped",
          flush=True)
    if not args.keep and failed == 0:
        shutil.rmtree(out_dir, ignore_errors=True)
    if failed:
        return 1
    return 77 if skipped else 0


if __name__ == "__main__":
    sys.exit(main())
