"""pss_pages.py — where an idle sandbox's PSS lies, page by page. Not a test.

    sudo /usr/bin/python3 bench/pss_pages.py PID...

For each PID (a sandbox's sandgate-init and context, found with
`pstree -p HOSTPID`), reads /proc/PID/pagemap and /proc/kpagecount and sorts
every resident page into: private (mapped once, by mapping name), anonymous
pages shared with others (the zygote's heap), and file pages; with each
class's share of PSS (page size / number of mappers). Needs root: pagemap
hides frame numbers from others.
"""

import collections
import os
import struct
import sys

PAGE = os.sysconf("SC_PAGE_SIZE")


def mappings(pid):
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            parts = line.split(None, 5)
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            name = parts[5].strip() if len(parts) > 5 else "[anon]"
            if name != "[vsyscall]":
                yield lo, hi, os.path.basename(name) or name


def pages(pid):
    """(mapping name, frame, anonymous) of every resident page."""
    with open("/proc/%d/pagemap" % pid, "rb") as pm:
        for lo, hi, name in mappings(pid):
            pm.seek(lo // PAGE * 8)
            data = pm.read((hi - lo) // PAGE * 8)
            for (v,) in struct.iter_unpack("<Q", data):
                if v >> 63 & 1:
                    yield name, v & ((1 << 55) - 1), not (v >> 61 & 1)


def report(pid, kpc):
    counts = collections.Counter()
    pss = collections.Counter()
    private = collections.Counter()
    for name, pfn, anon in pages(pid):
        kpc.seek(pfn * 8)
        n = struct.unpack("<Q", kpc.read(8))[0] or 1
        if n == 1:
            cls = "private"
            private[name] += 1
        else:
            cls = "anon shared" if anon else "file"
        counts[cls] += 1
        pss[cls] += PAGE / n
    with open("/proc/%d/comm" % pid) as f:
        comm = f.read().strip()
    print("%d %s: PSS %.2f MiB" % (pid, comm, sum(pss.values()) / 2**20))
    for cls in ("private", "anon shared", "file"):
        print("  %-12s %6d pages  %5.2f MiB" % (cls, counts[cls], pss[cls] / 2**20))
    top = ", ".join("%d %s" % (n, name) for name, n in private.most_common(4))
    print("  private by mapping: %s" % top)


def main(argv):
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open("/proc/kpagecount", "rb") as kpc:
        for pid in map(int, argv):
            report(pid, kpc)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
