"""Test helpers: run sandgate-gvisor-shim as the host would, without the host.

A Shim is one sandbox: a v1 cgroup made for it (pids + memory + cpu, as the
host makes them), the shim started in it with fd 3 = our end of a SEQPACKET
socketpair, and the supervisor protocol spoken from here. close() kills
everything in the cgroup, removes it and the state dir.
"""
import array
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
CG_ROOT = "/sys/fs/cgroup"
CONTROLLERS = ("pids", "memory", "cpu,cpuacct")
RO_BINDS = ["/usr", "/etc/alternatives", "/etc/ssl", "/etc/ld.so.cache"]
SYMLINKS = ["usr/bin:/bin", "usr/lib:/lib", "usr/lib64:/lib64", "usr/sbin:/sbin"]


def cgroup_dirs(name):
    return [os.path.join(CG_ROOT, c, name) for c in CONTROLLERS
            if os.path.isdir(os.path.join(CG_ROOT, c))]


def cgroup_pids(name):
    pids = set()
    for d in cgroup_dirs(name):
        try:
            with open(os.path.join(d, "cgroup.procs")) as f:
                pids.update(int(x) for x in f.read().split())
        except FileNotFoundError:
            pass
    return pids


class Shim:
    def __init__(self, shim_bin, agent_dir=None, pooled=True, memory=512 << 20, extra=()):
        self.name = secrets.token_hex(16)
        self.cg = "sgtest-shim-" + self.name[:12]
        self.state = "/tmp/sgtest-gvisor-%d" % os.getpid()
        for d in cgroup_dirs(self.cg):
            os.makedirs(d)
            if "/memory/" in d:
                with open(os.path.join(d, "memory.limit_in_bytes"), "w") as f:
                    f.write(str(memory + (128 << 20)))
            if "/pids/" in d:
                with open(os.path.join(d, "pids.max"), "w") as f:
                    f.write("512")
        self.sock, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        argv = [shim_bin, "--sock", "3", "--name", self.name, "--state-dir", self.state,
                "--runsc", "/usr/bin/runsc", "--platform", "ptrace", "--uid", "200999",
                "--workspace-bytes", str(64 << 20), "--tmp-bytes", str(32 << 20),
                "--nofile", "1024", "--fsize", str(8 << 20), "--nproc", "256",
                "--as-bytes", str(memory), "--python", "/usr/bin/python3",
                "--agent-dir", agent_dir or os.path.join(HERE, "fake_agent"),
                "--runtime-dir", os.path.join(SRC, "host", "runtime"),
                "--start-timeout", "60"]
        for b in RO_BINDS:
            argv += ["--ro-bind", b]
        for s in SYMLINKS:
            argv += ["--symlink", s]
        if pooled:
            argv.append("--pooled")
        argv += list(extra)
        cgs = cgroup_dirs(self.cg)

        def pre():
            for d in cgs:
                with open(os.path.join(d, "cgroup.procs"), "w") as f:
                    f.write("0")
            os.dup2(child.fileno(), 3)

        self.log = open(os.path.join("/tmp", "sgtest-shim-%s.log" % self.name[:12]), "w+")
        self.proc = subprocess.Popen(argv, preexec_fn=pre, pass_fds=(3,),
                                     stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        child.close()

    # ---- supervisor protocol ----
    def send(self, text):
        self.sock.send(text.encode() if isinstance(text, str) else text)

    def recv(self, timeout=30):
        """(text, [fds]) of the next message; ("", []) on EOF."""
        self.sock.settimeout(timeout)
        fds = array.array("i")
        msg, anc, _, _ = self.sock.recvmsg(1 << 20, socket.CMSG_SPACE(4 * fds.itemsize))
        for level, typ, data in anc:
            if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                fds.frombytes(data[:len(data) - (len(data) % fds.itemsize)])
        return msg.decode(), list(fds)

    def expect(self, prefix, timeout=30):
        text, fds = self.recv(timeout)
        assert text.startswith(prefix), "wanted %r, got %r (log: %s)" % (prefix, text,
                                                                        self.logtext())
        return text, fds

    def start(self, env=None, egress=False):
        """POOLED, ACTIVATE, READY, CTX default: returns the default's fds."""
        self.expect("POOLED", timeout=60)
        import json
        self.send("ACTIVATE " + json.dumps({"workdir": "/workspace", "egress": egress,
                                            "env": env or {"A": "1"}}))
        self.expect("READY")
        _, fds = self.expect("CTX default")
        assert len(fds) == 3
        return fds

    def logtext(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def workspace(self):
        return "/proc/%d/root/workspace" % self.proc.pid

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass
        deadline = time.time() + 10
        while time.time() < deadline:
            pids = cgroup_pids(self.cg)
            if not pids:
                break
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for d in cgroup_dirs(self.cg):
            for _ in range(100):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)
        shutil.rmtree(os.path.join(self.state, self.name), ignore_errors=True)
        try:
            os.rmdir(self.state)
        except OSError:
            pass
        self.log.close()
        try:
            os.unlink(self.log.name)
        except OSError:
            pass
