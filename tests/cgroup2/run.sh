#!/usr/bin/env bash
# tests/cgroup2/run.sh — the host on a pure cgroup v2 machine. This machine
# (and CI's) mounts cgroup v1, so the test boots a throwaway VM: Debian's
# kernel (package linux-image-amd64) under qemu (qemu-system-x86, emulated
# unless SG_V2_ACCEL=kvm), with a busybox initramfs built here
# (guest-init.sh as /init). The VM sees this machine's root read-only over
# 9p, mounts cgroup2 with the memory, pids and cpu controllers, and runs
# guest-test.sh: the daemons from the build dir and check_v2.py. The VM has
# no network device at all (only lo), so nothing it does leaves it.
#
#   tests/cgroup2/run.sh [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../../build}" && pwd)

kernel="" kver=""
for k in /boot/vmlinuz-*; do
  v=${k#/boot/vmlinuz-}
  [ -f "/lib/modules/$v/kernel/fs/9p/9p.ko" ] && { kernel=$k; kver=$v; }
done
[ -n "$kernel" ] || { echo "cgroup2: no kernel with 9p modules in /boot (apt-get install linux-image-amd64)" >&2; exit 1; }
command -v qemu-system-x86_64 >/dev/null || { echo "cgroup2: qemu-system-x86_64 missing (apt-get install qemu-system-x86)" >&2; exit 1; }
# a dynamic busybox would find no libc in the initramfs
[ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1 || { echo "cgroup2: static busybox missing (apt-get install busybox-static)" >&2; exit 1; }

work=$(mktemp -d /tmp/sg-cg2.XXXXXX)
qpid=""
cleanup() {
  [ -n "$qpid" ] && kill "$qpid" 2>/dev/null && wait "$qpid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# initramfs: busybox, the modules 9p over virtio needs (in load order), /init.
ir=$work/ir
mkdir -p "$ir/bin" "$ir/modules"
cp /bin/busybox "$ir/bin/busybox"
ln -s busybox "$ir/bin/sh"
mods="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci 9pnet 9pnet_virtio netfs fscache 9p"
for m in $mods; do
  f=$(modinfo -k "$kver" -n "$m" 2>/dev/null || true)
  [ -n "$f" ] && [ -f "$f" ] && cp "$f" "$ir/modules/$m.ko"   # built in when absent
done
cp "$here/guest-init.sh" "$ir/init"
chmod +x "$ir/init"
(cd "$ir" && find . | cpio -o -H newc 2>/dev/null | gzip -1) >"$work/initrd.gz"

# Emulation unless asked: a /dev/kvm node is not a working KVM (here it
# exists and the guest hangs at boot). SG_V2_ACCEL=kvm where it works.
accel=${SG_V2_ACCEL:-tcg}
echo "cgroup2: booting $kernel ($accel) with $build"
# guest-test.sh and the build are read from their real paths over 9p.
timeout 900 qemu-system-x86_64 -accel "$accel" -m 3072 -smp 2 -nographic -no-reboot \
  -kernel "$kernel" -initrd "$work/initrd.gz" \
  -append "console=ttyS0 quiet panic=-1 sg.cmd=$here/guest-test.sh sg.build=$build" \
  -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap" \
  -nic none >"$work/console.log" 2>&1 </dev/null &
qpid=$!
wait "$qpid" || true
qpid=""
# the console's escape sequences make grep see binary
tr -d '\r' <"$work/console.log" | sed 's/\x1b\[[0-9;?]*[a-zA-Z]//g' | grep -av "^qemu-system-x86_64: warning: 9p" || true
grep -aq "SG-EXIT 0" "$work/console.log"
