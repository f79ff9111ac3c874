#!/usr/bin/python3
"""compare.py — what users would pick instead, timed on this machine in the
same run as sandgate (issue 7, scenarios 1 and 2). Run with Debian's
/usr/bin/python3 (python3-ipykernel, python3-jupyter-client, bubblewrap).

  compare.py kernel-start N    start a Jupyter kernel, wait until it answers
  compare.py kernel-exec N     execute `x=1+1` on one kernel, N round trips
  compare.py bwrap N           bwrap --unshare-all ... python3 -c pass
  compare.py sandbox-pss CGDIR IDS_FILE
                               idle Pss per sandbox: every process listed in
                               CGDIR/<id>/cgroup.procs, summed per sandbox;
                               roles= the mean per sandbox by role (gVisor:
                               shim, sentry, gofer, stub; process: init,
                               context), file= the mean share of file pages
                               (binaries and libraries, divided among every
                               process on the machine that maps them)

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
    return rollup(pid).get("Pss")


def rollup(pid):
    """{Pss, Pss_File, ...} KiB from /proc/PID/smaps_rollup ({} if gone)."""
    out = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[0].endswith(":") and parts[1].isdigit():
                    out[parts[0][:-1]] = int(parts[1])
    except OSError:
        pass
    return out


def role(pid):
    """What a sandbox's process is, from its argv: runsc re-execs itself as
    `runsc-sandbox ... boot` (the Sentry) and `runsc-gofer ... gofer`; the
    ptrace platform's stubs (one per address space inside) are children of
    the Sentry with an empty command line."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return "?"
    name = argv[0].decode(errors="replace").rsplit("/", 1)[-1] if argv and argv[0] else ""
    if "boot" in (a.decode(errors="replace") for a in argv[1:6]):
        return "sentry"
    if "gofer" in (a.decode(errors="replace") for a in argv[1:6]):
        return "gofer"
    return {"sandgate-gvisor-shim": "shim", "sandgate-init": "init", "": "stub"}.get(
        name, "context" if name.startswith("python") else name)


def sandbox_pss(cgdir, ids_file):
    per, procs, roles, file_kib = [], 0, {}, 0
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
            r = rollup(pid)
            if "Pss" not in r:
                continue
            total += r["Pss"]
            file_kib += r.get("Pss_File", 0)
            n += 1
            k = role(pid)
            roles[k] = roles.get(k, 0) + r["Pss"]
        if n:
            per.append(total / 1024.0)
            procs += n
    per.sort()
    if not per:
        print("RESULT n=0", flush=True)
        return
    rs = ",".join(f"{k}:{v / 1024.0 / len(per):.1f}" for k, v in sorted(roles.items(), key=lambda x: -x[1]))
    print(f"RESULT n={len(per)} mean_mib={sum(per) / len(per):.2f} median_mib={pct(per, 50):.2f} "
          f"max_mib={per[-1]:.2f} total_mib={sum(per):.1f} procs_per_sandbox={procs / len(per):.1f} "
          f"roles={rs} file_mib={file_kib / 1024.0 / len(per):.2f}",
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
