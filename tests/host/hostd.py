"""hostd.py — what the host tests share: a host + gateway started with
deploy/local/run.sh in a run dir of their own (ephemeral ports, a random
host name), stopped by the same script, and the host's processes read from
/proc."""
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests"))
import drivers  # noqa: E402
BUILD = os.environ.get("SANDGATE_BUILD", os.path.join(REPO, "build"))
CLI = os.path.join(BUILD, "bin", "sandgate-cli")
RUN_SH = os.path.join(REPO, "deploy", "local", "run.sh")


class Daemons:
    """Started on construction; stop() ends them (by the PIDs run.sh wrote)
    and removes the temp dir. `env` is ready for sandgate-cli."""

    def __init__(self, prefix, user, host_config=None, pool_size=None):
        self.tmp = tempfile.mkdtemp(prefix=prefix)
        self.env = dict(os.environ, SANDGATE_RUN_DIR=os.path.join(self.tmp, "run"),
                        SANDGATE_PORT="0", SANDGATE_HOST_PORT="0", SANDGATE_BUILD=BUILD)
        self.env.pop("SANDGATE_HOST_NAME", None)
        self.env.pop("SANDGATE_POOL_SIZE", None)
        if pool_size is not None:
            self.env["SANDGATE_POOL_SIZE"] = str(pool_size)
        # deploy/local/host.yaml for this run's driver (drivers.py), not as shipped
        self.env["SANDGATE_HOST_CONFIG"] = host_config or drivers.local_host_config(self.tmp)
        try:
            subprocess.run([RUN_SH, "start"], env=self.env, check=True, capture_output=True)
            run = self.env["SANDGATE_RUN_DIR"]
            with open(os.path.join(run, "gateway.port")) as f:
                self.env["SANDGATE_ADDR"] = "127.0.0.1:" + f.read().strip()
            with open(os.path.join(run, "host.pid")) as f:
                self.host_pid = int(f.read())
        except BaseException:
            self.stop()
            raise
        self.env.update(SANDGATE_API_KEY="sg-demo-key-0001", SANDGATE_USER=user)

    def stop(self):
        subprocess.run([RUN_SH, "stop"], env=self.env, capture_output=True)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def cli(self, *args):
        return subprocess.run([CLI] + list(args), env=self.env, capture_output=True, text=True,
                              timeout=60)


def ppid_of(pid):
    with open("/proc/%s/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def children(pid):
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            if ppid_of(d) == pid:
                out.append(int(d))
        except OSError:
            continue
    return out


def zygotes(host_pid):
    """Children of the host running zygote.py in the host's own pid namespace
    (a dead zygote's sandboxes are reparented to the host too, but each is
    pid 1 of a namespace of its own)."""
    host_ns = os.readlink("/proc/%d/ns/pid" % host_pid)
    out = []
    for pid in children(host_pid):
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                cmd = f.read()
            ns = os.readlink("/proc/%d/ns/pid" % pid)
        except OSError:
            continue
        if b"zygote.py" in cmd and ns == host_ns:
            out.append(pid)
    return out
