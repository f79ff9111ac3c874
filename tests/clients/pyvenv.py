"""Shared by the Python client tests: install clients/python the way
docs/clients.md says (a venv with --system-site-packages, pip install
--no-index --no-build-isolation, no package index), and the daemons
(deploy/local/run.sh on ephemeral ports, own run dir). Under CTest the venv
is made once by the fixture client_python_venv (`pyvenv.py setup DIR`) and
named by $SANDGATE_PY_VENV; run alone, a test makes its own in a temp dir.

A test file calls reexec_in_venv() first: run by /usr/bin/python3 it builds
the venv and runs itself again with the venv's interpreter (so `import
sandgate` resolves to the installed package, never the source tree) and
exits with that run's status, removing the temp dir afterwards.
"""
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RUN_SH = os.path.join(REPO, "deploy", "local", "run.sh")
sys.path.insert(0, os.path.join(REPO, "tests"))
import drivers  # noqa: E402
_MARK = "SANDGATE_TEST_VENV"


def make_venv(venv):
    """The venv and the package in it, exactly as docs/clients.md says."""
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv],
                   check=True, timeout=300)
    py = os.path.join(venv, "bin", "python")
    subprocess.run([py, "-m", "pip", "install", "--quiet", "--no-index",
                    "--no-build-isolation", os.path.join(REPO, "clients", "python")],
                   check=True, timeout=300, cwd=os.path.dirname(venv))
    return py


def reexec_in_venv(test_file, extra_path=None):
    """Build the venv (unless already inside it) and re-run test_file there.
    $SANDGATE_PY_VENV names one made beforehand (CTest's fixture
    client_python_venv, shared by the Python client tests); otherwise each
    run makes its own in its temp dir."""
    if os.environ.get(_MARK):
        return os.environ[_MARK]
    tmp = tempfile.mkdtemp(prefix="sandgate-pyvenv-")
    try:
        shared = os.environ.get("SANDGATE_PY_VENV")
        if shared:
            py = os.path.join(shared, "bin", "python")
            if not os.path.exists(py):
                raise RuntimeError("SANDGATE_PY_VENV=%s has no bin/python (fixture "
                                   "client_python_venv not run?)" % shared)
        else:
            py = make_venv(os.path.join(tmp, "venv"))
        env = dict(os.environ)
        env[_MARK] = tmp
        env.pop("PYTHONPATH", None)
        if extra_path:
            env["PYTHONPATH"] = extra_path
        r = subprocess.run([py, os.path.abspath(test_file)] + sys.argv[1:], env=env, cwd=tmp)
        return_code = r.returncode
    finally:
        if not os.environ.get("SANDGATE_KEEP_TMP"):
            shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(return_code)


def main(argv):
    """pyvenv.py setup|cleanup DIR: CTest's fixture for the shared venv."""
    cmd, d = argv[1], os.path.abspath(argv[2])
    shutil.rmtree(d, ignore_errors=True)
    if cmd == "setup":
        os.makedirs(os.path.dirname(d), exist_ok=True)
        make_venv(d)
    elif cmd != "cleanup":
        raise SystemExit("usage: pyvenv.py setup|cleanup DIR")


def assert_installed(mod):
    """The module must come from a venv's site-packages, not clients/python."""
    f = os.path.realpath(mod.__file__)
    if f.startswith(os.path.realpath(os.path.join(REPO, "clients")) + os.sep):
        raise AssertionError("%s imported from the source tree (%s)" % (mod.__name__, f))
    if "site-packages" not in f:
        raise AssertionError("%s not from a site-packages dir: %s" % (mod.__name__, f))


class Daemons:
    """A host + gateway from run.sh on ephemeral loopback ports."""

    def __init__(self, tmp, policy_text=None, env=None, name="run"):
        self.run_dir = os.path.join(tmp, name)
        self.env = dict(os.environ)
        self.env.update(SANDGATE_RUN_DIR=self.run_dir, SANDGATE_PORT="0",
                        SANDGATE_HOST_PORT="0")
        self.env.setdefault("SANDGATE_BUILD", os.path.join(REPO, "build"))
        if policy_text is not None:
            p = os.path.join(tmp, name + "-policy.yaml")
            with open(p, "w") as f:
                f.write(policy_text)
            self.env["SANDGATE_POLICY"] = p
        self.env.update(env or {})
        if not (env or {}).get("SANDGATE_HOST_CONFIG"):
            # deploy/local/host.yaml for this run's driver (drivers.py), not as shipped
            self.env["SANDGATE_HOST_CONFIG"] = drivers.local_host_config(
                tmp, name=name + "-host.yaml")
        self.addr = None

    def _run(self, cmd):
        return subprocess.run([RUN_SH, cmd], env=self.env, capture_output=True, text=True,
                              timeout=60)

    def start(self):
        r = self._run("start")
        if r.returncode != 0:
            raise RuntimeError("run.sh start failed (%d):\n%s%s\n%s"
                               % (r.returncode, r.stdout, r.stderr, self.logs()))
        with open(os.path.join(self.run_dir, "gateway.port")) as f:
            self.addr = "127.0.0.1:" + f.read().strip()
        return self

    def stop(self):
        r = self._run("stop")
        if r.returncode != 0:
            sys.stderr.write("run.sh stop failed: %s%s\n" % (r.stdout, r.stderr))

    def logs(self):
        out = []
        for n in ("host.log", "gateway.log"):
            p = os.path.join(self.run_dir, n)
            if os.path.exists(p):
                with open(p, errors="replace") as f:
                    out.append("--- %s (tail)\n%s" % (n, f.read()[-4000:]))
        return "\n".join(out)


def local_policy(extra_limits=""):
    """deploy/local/policy.yaml with extra `defaults.limits` lines."""
    with open(os.path.join(REPO, "deploy", "local", "policy.yaml")) as f:
        text = f.read()
    anchor = "  limits:\n"
    assert anchor in text, "deploy/local/policy.yaml changed shape"
    return text.replace(anchor, anchor + extra_limits, 1)


if __name__ == "__main__":
    main(sys.argv)
