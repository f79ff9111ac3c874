#!/bin/sh
# tests/cgroup2/guest-init.sh — /init of the throwaway VM that tests/cgroup2/run.sh
# boots (busybox, in the initramfs). It mounts this machine's root read-only
# over 9p, gives it a writable tmpfs on /run for the daemons, mounts a pure
# cgroup v2 hierarchy, and runs the command named on the kernel command line
# (sg.cmd=, with SG_V2_BUILD from sg.build=) inside that root. Its exit
# status is printed as SG-EXIT <n>.
/bin/busybox mkdir -p /proc /sys /dev /mnt
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sys /sys
/bin/busybox mount -t devtmpfs dev /dev
for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci \
         9pnet 9pnet_virtio netfs fscache 9p; do
  /bin/busybox insmod /modules/$m.ko || echo "guest: insmod $m failed"
done
cmd=$(/bin/busybox sed -n 's/.*sg\.cmd=\([^ ]*\).*/\1/p' /proc/cmdline)
build=$(/bin/busybox sed -n 's/.*sg\.build=\([^ ]*\).*/\1/p' /proc/cmdline)
/bin/busybox mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose hostroot /mnt || {
  echo "guest: cannot mount the host's root"; echo "SG-EXIT 99"; /bin/busybox poweroff -f; }
/bin/busybox mount -t proc proc /mnt/proc
/bin/busybox mount -t sysfs sys /mnt/sys
/bin/busybox mount -t cgroup2 cgroup2 /mnt/sys/fs/cgroup
/bin/busybox mount -t devtmpfs dev /mnt/dev
# The only writable place is a tmpfs on /run: the repository (and so the
# build and these scripts) may live anywhere else, /tmp and /root included.
/bin/busybox mount -t tmpfs -o mode=755 run /mnt/run
/bin/busybox mkdir -p -m 1777 /mnt/run/tmp
/bin/busybox mkdir -p /mnt/run/home
/bin/busybox ip link set lo up 2>/dev/null || /bin/busybox ifconfig lo 127.0.0.1 up
/bin/busybox chroot /mnt /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/run/home \
  TMPDIR=/run/tmp LANG=C.UTF-8 \
  SG_V2_BUILD="$build" /bin/sh -c "$cmd"
echo "SG-EXIT $?"
/bin/busybox sync
/bin/busybox poweroff -f
