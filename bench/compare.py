#!/usr/bin/python3
"""compare.py — what users would pick instead, timed on this machine in the
same run as sandgate (issue 7, scenarios 1 and 2). Run with Debian's
/usr/bin/python3 (python3-ipykernel, python3-jupyter-client, bubblewrap).

  compare.py kernel-start N    start a Jupyter kernel, wait until it answers
  compare.py kernel-exec N     execute `x=1+1` on one kernel, N round trips
  compare.py bwrap N           bwrap --unshare-all ... python3 -c pass
  compare.py sandbox-pss CGDIR IDS_FILE
                               idle Pss per sandbox: every process listed in
                               CGDIR/<id>/cgroup.procs, summed per sandbox

Each prints one line of key=value pairs beginning with RESULT."""
import subprocess
import sys
import time

BWRAP = ["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
         "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/lib", "/lib",
         "--symlink", "usr/bin", "/bin", "/usr/bin/python3", "-c", "pass"]


def pct(v, p):
    """Nearest-rank percentile of a sorted list."""
    if not v:
        return 0.0
    k = max(1, min(len(v), int(p / 100.0 * len(v) + 0.999999)))
    return v[k - 1]


def report(what, samples_ms, **extra):
    v = sorted(samples_ms)
    fields = [f"what={what}", f"n={len(v)}", f"p50_ms={pct(v, 50):.3f}",
              f"p99_ms={pct(v, 99):.3f}", f"max_ms={(v[-1] if v else 0):.3f}"]
    fields += [f"{k}={x}" for k, x in extra.items()]
    print("RESULT " + " ".join(fields), flush=True)


def kernel_start(n):
    from jupyter_client.manager import KernelManager
    out = []
    for _ in range(n):
        km = KernelManager(kernel_name="python3")
        t0 = time.perf_counter()
        km.start_kernel()
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        out.append((time.perf_counter() - t0) * 1e3)
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    report("kernel-start", out)


def kernel_exec(n):
    from jupyter_client.manager import KernelManager
    km = KernelManager(kernel_name="python3")
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    errors = 0
    for _ in range(min(20, n)):   # warm-up
        kc.execute_interactive("x=1+1", timeout=30, output_hook=lambda m: None)
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        reply = kc.execute_interactive("x=1+1", timeout=30, output_hook=lambda m: None)
        out.append((time.perf_counter() - t0) * 1e3)
        if reply["content"].get("status") != "ok":
            errors += 1
    kc.stop_channels()
    km.shutdown_kernel(now=True)
    report("kernel-exec", out, errors=errors)


def bwrap(n):
    out, errors = [], 0
    for _ in range(n):
        t0 = time.perf_counter()
        r = subprocess.run(BWRAP, stdin=subprocess.DEVNULL)
        out.append((time.perf_counter() - t0) * 1e3)
        errors += r.returncode != 0
    report("bwrap", out, errors=errors)


def pss_kib(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def sandbox_pss(cgdir, ids_file):
    per, procs = [], 0
    with open(ids_file) as f:
        ids = [x.strip() for x in f if x.strip()]
    for sid in ids:
        try:
            with open(f"{cgdir}/{sid}/cgroup.procs") as f:
                pids = [x.strip() for x in f if x.strip()]
        except OSError:
            continue
        total, n = 0, 0
        for pid in pids:
            v = pss_kib(pid)
            if v is not None:
                total += v
                n += 1
        if n:
            per.append(total / 1024.0)
            procs += n
    per.sort()
    if not per:
        print("RESULT n=0", flush=True)
        return
    print(f"RESULT n={len(per)} mean_mib={sum(per) / len(per):.2f} median_mib={pct(per, 50):.2f} "
          f"max_mib={per[-1]:.2f} total_mib={sum(per):.1f} procs_per_sandbox={procs / len(per):.1f}",
          flush=True)


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    cmd = sys.argv[1]
    if cmd == "sandbox-pss":
        sandbox_pss(sys.argv[2], sys.argv[3])
        return 0
    n = int(sys.argv[2])
    {"kernel-start": kernel_start, "kernel-exec": kernel_exec, "bwrap": bwrap}[cmd](n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
