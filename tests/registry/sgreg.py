"""sgreg.py — what the registry tests share: an etcd member on loopback
(free ports, a temp data dir, stopped by PID), etcdctl, and polling."""
import os
import socket
import subprocess
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def read(path):
    with open(path) as f:
        return f.read().strip()


def wait(pred, what, timeout=10):
    """Seconds until pred() is true; AssertionError after timeout."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if pred():
            return time.monotonic() - t0
        time.sleep(0.05)
    raise AssertionError("timed out after %.1f s waiting for %s" % (timeout, what))


class Etcd:
    """One etcd member; start() again reuses its data dir."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.ep = "127.0.0.1:%d" % free_port()
        self.peer = free_port()
        self.proc = None

    def start(self):
        log = open(os.path.join(self.tmp, "etcd.log"), "a")
        self.proc = subprocess.Popen(
            ["etcd", "--name", "r0", "--data-dir", os.path.join(self.tmp, "etcd"),
             "--listen-client-urls", "http://" + self.ep, "--advertise-client-urls",
             "http://" + self.ep, "--listen-peer-urls", "http://127.0.0.1:%d" % self.peer,
             "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % self.peer,
             "--initial-cluster", "r0=http://127.0.0.1:%d" % self.peer],
            stdout=log, stderr=subprocess.STDOUT)
        log.close()
        wait(lambda: self.ctl("put", "/ready", "1").returncode == 0, "etcd to start", 20)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def ctl(self, *args):
        return subprocess.run(["etcdctl", "--endpoints=" + self.ep, "--command-timeout=2s"] +
                              list(args), env=dict(os.environ, ETCDCTL_API="3"),
                              capture_output=True, text=True, timeout=10)
