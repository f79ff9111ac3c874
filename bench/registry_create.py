#!/usr/bin/python3
"""registry_create.py — CreateSandbox latency through the gateway, embedded
mode beside etcd mode (issue 15's latency target: etcd mode p50 <= 15 ms,
p99 <= 40 ms on loopback). Not a test.

Both runs use one host and one gateway on loopback with the same host
config and warm pool, and bench_create (bench/create_latency.c) back to
back: each create after the previous kill answered. etcd mode adds one
etcd member (tests/registry/sgreg.py) and the task claim's two etcd round
trips (read, then the claim transaction).

    /usr/bin/python3 bench/registry_create.py [-n 200]

Env: SANDGATE_BUILD (default build/). Prints bench_create's output per mode.
"""
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "registry"))
from sgreg import BUILD, Etcd, Fleet, drivers, free_port, read, wait  # noqa: E402

KEY = "sg-demo-key-0001"
POOL = "4"


def bench(addr, n):
    r = subprocess.run([os.path.join(BUILD, "bin", "bench_create"), "--addr", addr, "--key", KEY,
                        "-n", str(n), "--mode", "b2b"], capture_output=True, text=True,
                       timeout=600)
    return r.stdout + r.stderr


def embedded(tmp, n):
    d = os.path.join(tmp, "emb")
    os.makedirs(os.path.join(d, "rt"))
    hp, pf = free_port(), os.path.join(d, "host.port")
    procs = []
    try:
        log = open(os.path.join(d, "host.log"), "w")
        procs.append(subprocess.Popen(
            [os.path.join(BUILD, "bin", "sandgate-host"), "--config",
             drivers.local_host_config(d, "process"), "--listen", "127.0.0.1:%d" % hp,
             "--name", "bemb", "--runtime-dir", os.path.join(d, "rt"), "--port-file", pf],
            stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, SANDGATE_POOL_SIZE=POOL)))
        wait(lambda: os.path.exists(pf), "the host", 30)
        gw_yaml, gpf = os.path.join(d, "gateway.yaml"), os.path.join(d, "gw.port")
        with open(gw_yaml, "w") as f:
            f.write("listen: \"127.0.0.1:1\"\npolicy: \"%s\"\nhosts:\n  - name: bemb\n"
                    "    address: \"127.0.0.1:%d\"\n" % (
                        os.path.join(REPO, "deploy", "local", "policy.yaml"), hp))
        procs.append(subprocess.Popen(
            [os.path.join(BUILD, "bin", "sandgate"), "--config", gw_yaml, "--listen",
             "127.0.0.1:0", "--port-file", gpf], stdout=log, stderr=subprocess.STDOUT))
        log.close()
        wait(lambda: os.path.exists(gpf), "the gateway", 15)
        return bench("127.0.0.1:" + read(gpf), n)
    finally:
        for p in reversed(procs):
            p.terminate()
            p.wait(timeout=30)


def etcd_mode(tmp, n):
    d = os.path.join(tmp, "etcd")
    os.makedirs(d)
    e = Etcd(d)
    e.start()
    with open(os.path.join(REPO, "deploy", "local", "policy.yaml")) as f:
        policy = f.read()
    fl = Fleet(d, e, policy, lease_ttl=5, pool=POOL)
    try:
        fl.host("betcd")
        addr = fl.gateway("g")
        wait(lambda: "registry: host betcd" in fl.log("g"), "the gateway to see the host", 15)
        return bench(addr, n)
    finally:
        fl.stop()
        e.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=200)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="sandgate-bench-reg-") as tmp:
        print("== embedded (static host list) ==")
        print(embedded(tmp, a.n))
        print("== etcd mode (claims in etcd) ==")
        print(etcd_mode(tmp, a.n))


if __name__ == "__main__":
    main()
