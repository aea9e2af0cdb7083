#!/bin/busybox sh
# PID 1 of the guest (tests/guest/run_guest.py packs it as /init of a busybox
# initramfs). It builds the guest's root: the host's / over virtio-9p,
# read-only, under a tmpfs overlay, with cgroup2 alone on /sys/fs/cgroup,
# runs tests/guest/inside.sh there (switch_root) and powers off. What comes out is
# what inside.sh copies to a second, writable 9p share (tag "out").
/bin/busybox mkdir -p /proc /sys /dev /bin
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

say() { echo "guest-init: $*"; }
halt_now() { sync; poweroff -f; }

for m in $(cat /modules/order); do
  insmod "/modules/$m" || say "insmod $m failed"
done
mkdir -p /host /rw /newroot
# cache=loose: the host tree does not change under the guest while it runs.
if ! mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 hostroot /host; then
  say "FAILED: mounting the host's / over 9p"
  halt_now
fi
mount -t tmpfs -o size=70% tmpfs /rw
mkdir -p /rw/upper /rw/work
if ! mount -t overlay overlay -o lowerdir=/host,upperdir=/rw/upper,workdir=/rw/work /newroot; then
  say "FAILED: overlay over the host's /"
  halt_now
fi
mount --move /proc /newroot/proc
mount --move /sys /newroot/sys
mount --move /dev /newroot/dev
mkdir -p /newroot/dev/pts /newroot/dev/shm
mount -t devpts devpts /newroot/dev/pts
mount -t tmpfs tmpfs /newroot/dev/shm
# /tmp stays the overlay's (the host's /tmp below, the guest's writes on
# top), as on a node whose /tmp is on its root file system: CRIU dumps a
# tmpfs inside a job's mount namespace and restores a private copy of it,
# so a restored job would write its output where no one reads it.
mount -t tmpfs tmpfs /newroot/run
# The unified hierarchy alone (the kernel is booted with cgroup_no_v1=all).
mount -t cgroup2 -o nsdelegate cgroup2 /newroot/sys/fs/cgroup || say "FAILED: mounting cgroup2"
# The results share is mounted only while inside.sh copies to it: CRIU
# cannot dump a job whose mount namespace holds a 9p mount.
mkdir -p /out
if ! mount -t 9p -o trans=virtio,version=9p2000.L,cache=none out /out; then
  say "FAILED: mounting the results share"
  halt_now
fi
cp /out/config /newroot/run/guest-config
umount /out
# busybox stays reachable from the new root, for the power-off at the end.
cp /bin/busybox /newroot/run/busybox
say "root ready"
# switch_root, not chroot: CRIU refuses a task whose root is not its mount
# namespace's. The config (written by run_guest.py) names the source tree
# and the tests; PID 1 is then that shell, which reaps orphans as it waits.
exec switch_root /newroot /bin/sh -c 'set -a && . /run/guest-config && set +a &&
  /bin/sh "$GUEST_SRC/tests/guest/inside.sh"; echo "guest-init: inside.sh ended with $?";
  sync; exec /run/busybox poweroff -f'
