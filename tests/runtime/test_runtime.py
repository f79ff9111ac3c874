"""test_runtime.py — the sandbox runtime (host/runtime) against PROTOCOL.md.

Owns: end-to-end tests of zygote → sandbox → supervisor → context with real
processes, run with --no-contain (no namespaces, so no root needed). The test
plays the host through host_double.py. Every process started is killed by
pid in tearDown.

Both drivers (tests/drivers.py): runtime_protocol plays the host to
sandgate-init (the process driver's pid 1); runtime_protocol_gvisor plays it,
with the same supervisor and context protocol (PROTOCOL.md sections 2a, 3,
4), to the gvisor driver's peer: the real sandgate-gvisor-shim with the real
agent as pid 1 of a runsc container (tests/gvisor/sgshim.py; root and runsc).
The notebook, error, interrupt, context, exec, environment, re-seeding,
pool and host-gone cases run on both. Process-only, each skipped in the
gvisor run saying why: the handshake's PID under the zygote, pid 1 being
sandgate-init, a held context killed from the host (all three look at pids
on the host's /proc, and a gVisor sandbox's processes live inside the
Sentry, invisible there), and the zygote's own lifetime (the gvisor driver
has no zygote: each sandbox is a container its shim starts). In the gvisor
run one sandbox serves the whole RuntimeTest class (a gVisor sandbox takes
2 s+ to start under ptrace) and each test gets a fresh context of it; the
cases that need a sandbox of their own (re-seeding across sandboxes, host
gone, the pool) start one.
"""

import os
import signal
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
from host_double import (Sandbox, Zygote, descendants,  # noqa: E402
                         proc_stat, results, rich_results, text_result)
import drivers  # noqa: E402

SECRET = "SANDGATE_TEST_SECRET"
GVISOR = drivers.is_gvisor()
# The workdir a sandbox is activated with: the gvisor bundle's workspace is
# /workspace (the shim makes it); the process runs use /tmp (--no-contain).
WORKDIR = "/workspace" if GVISOR else "/tmp"


def process_only(why):
    return unittest.skipIf(GVISOR, "process driver only: " + why)


if GVISOR:
    sys.path.insert(0, os.path.join(HERE, "..", "gvisor"))
    import agentmux  # noqa: E402
    import sgshim  # noqa: E402
    SHIM = os.environ.get("SANDGATE_GVISOR_SHIM", os.path.join(
        HERE, "..", "..", "build", "bin", "sandgate-gvisor-shim"))


class ShimSandbox(Sandbox):
    """A gvisor-driver sandbox (the shim and, inside runsc, the agent),
    spoken to through host_double's Sandbox: the shim speaks the same
    supervisor protocol as sandgate-init, and its contexts section 4."""

    # deploy/local's template binds beyond sgshim's: Debian's matplotlib
    # reads /etc/matplotlibrc (import fails without it), fontconfig /etc/fonts
    BINDS = ["--ro-bind", "/etc/matplotlibrc", "--ro-bind", "/etc/fonts"]

    def __init__(self, preload="numpy"):
        self.shim = sgshim.Shim(SHIM, agent_dir=agentmux.AGENT_DIR, extra=self.BINDS + (
            ["--preload", preload] if preload else []))
        super().__init__(self.shim.sock)

    def pooled(self):
        # no PID line: the shim's sandbox starts POOLED (PROTOCOL.md, gvisor)
        self.expect(b"POOLED", timeout=120)

    def close(self):
        super().close()
        self.shim.close()


def gvisor_require():
    """The gvisor run fails, never skips, where it cannot run."""
    assert os.geteuid() == 0, "the gvisor run needs root (cgroups, runsc)"
    assert os.access("/usr/bin/runsc", os.X_OK), "no /usr/bin/runsc (deploy/packages.txt)"
    assert os.access(SHIM, os.X_OK), "no sandgate-gvisor-shim at " + SHIM


def new_sandbox(zygote, env, workdir=WORKDIR, preload=""):
    """A sandbox activated with env, and its default context. gvisor: the
    agent preloads `preload` (none by default: importing numpy under ptrace
    costs ~1 s a sandbox, and only RuntimeTest's shared sandbox needs it
    preloaded); the process zygote always has its numpy."""
    if GVISOR:
        sb = ShimSandbox(preload)
        try:
            sb.pooled()
            return sb, sb.activate(env, workdir=workdir)
        except BaseException:
            sb.close()
            raise
    sb = zygote.create(env=env, workdir=workdir)
    return sb, sb.handshake()


def new_pool_sandbox(zygote):
    """A pool sandbox (PROTOCOL.md 2a) that has said POOLED."""
    sb = ShimSandbox("") if GVISOR else zygote.create(pool=True)
    try:
        sb.pooled()
    except BaseException:
        sb.close()
        raise
    return sb


SANDBOX_ENV = {"SANDBOX_VAR": "visible", "PATH": "/usr/bin:/bin"}


class RuntimeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # The zygote (gvisor: the shim) gets the test's whole environment,
        # secret included: the sandbox must still see only what CREATE sets.
        env = dict(os.environ)
        env[SECRET] = "leaked"
        cls.zygote = cls.shared = None
        if GVISOR:
            gvisor_require()
            os.environ[SECRET] = "leaked"     # the shim inherits ours
            cls.shared, default = new_sandbox(None, SANDBOX_ENV, preload="numpy")
            default.close()
            cls.n_ctx = 0
        else:
            cls.zygote = Zygote(preload="numpy", env=env)

    @classmethod
    def tearDownClass(cls):
        if cls.shared:
            cls.shared.close()
        if cls.zygote:
            cls.zygote.close()

    def setUp(self):
        if GVISOR:
            # one sandbox for the class, a fresh context per test (see the top)
            RuntimeTest.n_ctx += 1
            self.sb = self.shared
            self.ctx = self.sb.new_context("t%d" % self.n_ctx)
        else:
            self.sb, self.ctx = new_sandbox(self.zygote, SANDBOX_ENV)

    def tearDown(self):
        self.ctx.close()
        if not GVISOR:
            self.sb.close()

    def assert_gone(self, pid):
        """The context process pid has exited and been reaped."""
        if not GVISOR:
            self.assertIsNone(proc_stat(pid), "context reaped")
            return
        # inside gVisor: its pid namespace is the Sentry's, seen from a context
        deadline = time.monotonic() + 5
        while text_result(self.ctx.run("import os\nos.path.exists('/proc/%d')" % pid)) != "False":
            self.assertLess(time.monotonic(), deadline, "context %d not reaped" % pid)
            time.sleep(0.05)

    # -- create --
    @process_only("the handshake's PID is a zygote child on the host; a gVisor sandbox "
                  "says POOLED with no PID and its processes live inside the Sentry")
    def test_handshake(self):
        st = proc_stat(self.sb.pid)
        self.assertIsNotNone(st, "PID names a live process")
        self.assertIn(self.sb.pid, descendants(self.zygote.pid))

    # -- notebook semantics --
    def test_state_persists_and_final_expression(self):
        f = self.ctx.run("x = 1")
        self.assertEqual(results(f, "r"), [])
        self.assertEqual(f[-1], ("d", b""))
        f = self.ctx.run("x + 1")
        self.assertEqual(text_result(f), "2")
        f = self.ctx.run("y = [x]\ny")
        self.assertEqual(text_result(f), "[1]")

    def test_none_gives_no_result(self):
        f = self.ctx.run("None")
        self.assertEqual(results(f, "r"), [])
        f = self.ctx.run("print('p')")
        self.assertEqual(results(f, "r"), [])
        self.assertEqual(b"".join(results(f, "o")), b"p\n")

    def test_stdout_stderr_order(self):
        f = self.ctx.run("import sys\nprint('a')\nprint('b', file=sys.stderr)"
                         "\nprint('c')\nsys.stderr.write('d')")
        stream = [(t, p) for t, p in f if t in "oe"]
        joined = []
        for t, p in stream:
            if joined and joined[-1][0] == t:
                joined[-1] = (t, joined[-1][1] + p)
            else:
                joined.append((t, p))
        self.assertEqual(joined, [("o", b"a\n"), ("e", b"b\n"),
                                  ("o", b"c\n"), ("e", b"d")])
        f = self.ctx.run("(sys.stdout.isatty(), sys.stdout.fileno(), "
                         "sys.stderr.fileno(), sys.stdout.encoding)")
        self.assertEqual(text_result(f), "(False, 1, 2, 'utf-8')")

    def test_large_output_is_split(self):
        f = self.ctx.run("print('é' * 100000)")
        outs = results(f, "o")
        self.assertGreater(len(outs), 1)
        for p in outs:
            p.decode("utf-8")  # each frame stands alone as UTF-8
        self.assertEqual(b"".join(outs).decode(), "é" * 100000 + "\n")

    def test_subprocess_output_reaches_pipe(self):
        f = self.ctx.run("import os, subprocess\nos.system('echo from-system')"
                         "\nsubprocess.run(['echo', 'from-subprocess'])\n"
                         "os.write(2, b'raw-err')\nNone")
        self.assertEqual(f[-1], ("d", b""))
        out = self.ctx.read_pipe(self.ctx.out_r, b"from-subprocess\n")
        self.assertEqual(out, b"from-system\nfrom-subprocess\n")
        err = self.ctx.read_pipe(self.ctx.err_r, b"raw-err")
        self.assertEqual(err, b"raw-err")

    def test_stdin_is_devnull(self):
        f = self.ctx.run("import sys\nsys.stdin.read()")
        self.assertEqual(text_result(f), "''")

    def test_matplotlib_figure_becomes_png(self):
        f = self.ctx.run("import sys\n'matplotlib' in sys.modules")
        self.assertEqual(text_result(f), "False")  # never imported for us
        f = self.ctx.run("import matplotlib\nmatplotlib.use('Agg')\n"
                         "import matplotlib.pyplot as plt\n"
                         "plt.plot([1, 2, 3])\nNone", timeout=30)
        pngs = [p for p in results(f, "r") if p.startswith(b"image/png\0")]
        self.assertEqual(len(pngs), 1)
        self.assertTrue(pngs[0][10:].startswith(b"\x89PNG"))
        f = self.ctx.run("len(plt.get_fignums())")
        self.assertEqual(text_result(f), "0")  # figures closed once sent

    # -- rich results (display.py, mplinline.py) --
    def test_result_split_across_frames_arrives_whole(self):
        f = self.ctx.run("'\u00e9x' * 100000")
        rs = rich_results(f)
        self.assertEqual(len(rs), 1)
        main, reps = rs[0]
        self.assertTrue(main)
        self.assertGreater(len(results(f, "k")), 2)   # several frames
        self.assertTrue(all(len(t) + len(p) <= 65536 for t, p in f))
        self.assertEqual(reps, [("text/plain", repr("\u00e9x" * 100000).encode())])

    def test_display_order_semicolon_and_bundles(self):
        f = self.ctx.run("class H:\n"
                         "    def _repr_html_(self): return '<i>h</i>'\n"
                         "    def _repr_json_(self): raise ValueError('no json')\n"
                         "display(1, H())\nprint('between')\ndisplay('x')\n42;")
        rs = rich_results(f)
        self.assertEqual([r[0] for r in rs], [False, False, False])  # `;` hides 42
        self.assertEqual(rs[0][1], [("text/plain", b"1")])
        self.assertEqual([m for m, _ in rs[1][1]], ["text/plain", "text/html"])
        self.assertEqual(rs[2][1], [("text/plain", b"'x'")])
        err = b"".join(results(f, "e")).decode()
        self.assertIn("_repr_json_ of a H object raised ValueError: no json", err)
        kinds = [t for t, _ in f]
        self.assertLess(kinds.index("o"), len(kinds) - 1 - kinds[::-1].index("b"))

    def test_failing_repr_traceback_starts_in_cell(self):
        f = self.ctx.run("class Bad:\n    def __repr__(self): raise KeyError('r')\n"
                         "display(Bad())")
        name, _, tb = results(f, "x")[0].decode().split("\0")
        self.assertEqual(name, "KeyError")
        self.assertNotIn("display.py", tb)
        self.assertNotIn("notebook.py", tb)
        self.assertIn("__repr__", tb)

    def test_plt_show_sends_figure_where_called(self):
        f = self.ctx.run("import matplotlib.pyplot as plt\nplt.plot([1, 2])\n"
                         "plt.show()\nprint('after')\n"
                         "import matplotlib; matplotlib.get_backend()", timeout=30)
        rs = rich_results(f)
        self.assertEqual(len(rs), 2)
        self.assertEqual([m for m, _ in rs[0][1]], ["text/plain", "image/png"])
        self.assertTrue(rs[0][1][1][1].startswith(b"\x89PNG"))
        self.assertEqual(rs[1], (True, [("text/plain", b"'module://sandgate_inline'")]))
        kinds = [t for t, _ in f]
        self.assertLess(kinds.index("f"), kinds.index("o"))   # the figure before 'after'

    # -- errors --
    def test_exception_traceback_and_survival(self):
        self.ctx.run("a = 5")
        f = self.ctx.run("def g():\n    return 1/0\n\ng()")
        xs = results(f, "x")
        self.assertEqual(len(xs), 1)
        name, value, tb = xs[0].decode().split("\0")
        self.assertEqual(name, "ZeroDivisionError")
        self.assertEqual(value, "division by zero")
        self.assertTrue(tb.startswith("Traceback (most recent call last):\n"
                                      '  File "<cell-'), tb)
        self.assertIn(", line 4, in <module>\n    g()\n", tb)
        self.assertIn(", line 2, in g\n    return 1/0\n", tb)
        self.assertNotIn("notebook.py", tb)
        self.assertNotIn("context.py", tb)
        self.assertEqual(f[-1], ("d", b""))
        self.assertEqual(text_result(self.ctx.run("a")), "5")

    def test_syntax_error(self):
        f = self.ctx.run("x = (")
        name, value, tb = results(f, "x")[0].decode().split("\0")
        self.assertEqual(name, "SyntaxError")
        self.assertIn("<cell-", tb)
        self.assertEqual(text_result(self.ctx.run("1")), "1")

    def test_system_exit_is_an_error(self):
        f = self.ctx.run("import sys\nsys.exit(4)")
        name, value, _ = results(f, "x")[0].decode().split("\0")
        self.assertEqual((name, value), ("SystemExit", "4"))
        self.assertEqual(text_result(self.ctx.run("2 * 3")), "6")

    def test_sigint_interrupts_busy_loop(self):
        self.ctx.run("n = 41")
        self.ctx.submit("while True:\n    pass")
        time.sleep(0.3)
        self.sb.send("INT %s" % self.ctx.id)
        f = self.ctx.collect(timeout=5)
        xs = results(f, "x")
        self.assertEqual(len(xs), 1)
        self.assertEqual(xs[0].split(b"\0")[0], b"KeyboardInterrupt")
        self.assertEqual(f[-1], ("d", b""))
        self.assertEqual(text_result(self.ctx.run("n + 1")), "42")
        # An interrupt while idle does not hurt the context.
        self.sb.send("INT %s" % self.ctx.id)
        time.sleep(0.1)
        self.assertEqual(text_result(self.ctx.run("n")), "41")

    def test_sigint_ignored_then_killctx(self):
        ctx = self.sb.new_context("stubborn")
        try:
            pid = int(text_result(ctx.run("import os\nos.getpid()")))
            ctx.submit("import signal\n"
                       "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                       "while True:\n    pass")
            time.sleep(0.2)
            self.sb.send("INT stubborn")
            with self.assertRaises(TimeoutError):
                ctx.collect(timeout=0.5)
            self.sb.send("KILLCTX stubborn")
            m, _ = self.sb.expect(b"CTXEXIT stubborn")
            self.assertEqual(m, b"CTXEXIT stubborn -1 9")
            self.assert_gone(pid)
        finally:
            ctx.close()
        # The default context is untouched.
        self.assertEqual(text_result(self.ctx.run("3")), "3")

    def test_context_exit_reported(self):
        ctx = self.sb.new_context("quits")
        try:
            ctx.submit("import os\nos._exit(7)")
            m, _ = self.sb.expect(b"CTXEXIT quits")
            self.assertEqual(m, b"CTXEXIT quits 7 0")
        finally:
            ctx.close()

    def test_new_context_isolated(self):
        self.ctx.run("shared = 'default'")
        other = self.sb.new_context("c2")
        try:
            f = other.run("shared")
            self.assertEqual(results(f, "x")[0].split(b"\0")[0], b"NameError")
            other.run("shared = 'c2'")
            self.assertEqual(text_result(self.ctx.run("shared")), "'default'")
            self.assertEqual(text_result(other.run("shared")), "'c2'")
            self.assertEqual(text_result(other.run("__name__")), "'__main__'")
            # Each context its own process group, so KILLCTX's killpg works.
            pid = int(text_result(other.run("import os\nos.getpid()")))
            if GVISOR:   # a pid inside the Sentry: ask the context itself
                self.assertEqual(text_result(other.run("os.getpgrp()")), str(pid))
            else:
                self.assertEqual(proc_stat(pid)[2], pid)
            self.sb.send("CTX c2")  # still running: refused
            m, _ = self.sb.expect(b"CTXERR c2")
        finally:
            other.close()

    # -- exec --
    def test_exec_exit_code_and_output(self):
        out_r, err_r = self.sb.exec("e1", "echo hello; echo oops >&2; exit 3")
        try:
            m, _ = self.sb.expect(b"EXIT e1")
            self.assertEqual(m, b"EXIT e1 3 0")
            self.assertEqual(self.ctx.read_pipe(out_r, b"hello\n"), b"hello\n")
            self.assertEqual(self.ctx.read_pipe(err_r, b"oops\n"), b"oops\n")
        finally:
            os.close(out_r)
            os.close(err_r)

    def test_killexec(self):
        out_r, err_r = self.sb.exec("e2", "sleep 100")
        try:
            time.sleep(0.1)
            self.sb.send("KILLEXEC e2")
            m, _ = self.sb.expect(b"EXIT e2", timeout=5)
            self.assertEqual(m, b"EXIT e2 -1 9")
        finally:
            os.close(out_r)
            os.close(err_r)

    # -- environment and randomness --
    def test_env_is_only_the_create_env(self):
        f = self.ctx.run("import os\n(os.environ.get(%r), "
                         "os.environ.get('SANDBOX_VAR'))" % SECRET)
        self.assertEqual(text_result(f), "(None, 'visible')")
        out_r, err_r = self.sb.exec("env", "env")
        try:
            self.sb.expect(b"EXIT env")
            out = self.ctx.read_pipe(out_r)
            self.assertIn(b"SANDBOX_VAR=visible", out)
            self.assertNotIn(SECRET.encode(), out)
        finally:
            os.close(out_r)
            os.close(err_r)

    @process_only("pid 1 is sandgate-init on the host's /proc; under gVisor it is the agent, "
                  "inside the Sentry (test_later_context_is_fresh_with_sandbox_env checks a "
                  "context's ppid is 1)")
    def test_pid1_is_sandgate_init_with_one_python(self):
        with open("/proc/%d/comm" % self.sb.pid) as f:
            self.assertEqual(f.read().strip(), "sandgate-init")
        kids = descendants(self.sb.pid)
        self.assertEqual(len(kids), 1, kids)   # the default context, nothing else
        f = self.ctx.run("import os\nos.getppid()")
        self.assertEqual(text_result(f), str(self.sb.pid))

    def test_later_context_is_fresh_with_sandbox_env(self):
        # Not a fork: a new interpreter, started by pid 1 with the CREATE env
        # and workdir, that has imported nothing of the template's preload.
        # gvisor: a fork of the agent (pid 1 inside) after its preload
        # (host/drivers/gvisor/PROTOCOL.md, "Contexts"), so numpy is there.
        other = self.sb.new_context("c3")
        try:
            f = other.run("import os, sys\n(os.environ.get('SANDBOX_VAR'), "
                          "os.environ.get(%r), os.getcwd(), 'numpy' in sys.modules, "
                          "os.getppid())" % SECRET)
            self.assertEqual(text_result(f), "('visible', None, %r, %s, %d)" % (
                WORKDIR, GVISOR, 1 if GVISOR else self.sb.pid))
            f = other.run("import numpy\nint(numpy.arange(4).sum())")
            self.assertEqual(text_result(f), "6")
        finally:
            other.close()

    def test_sandboxes_and_contexts_reseeded(self):
        code = "import random, numpy\n(random.random(), numpy.random.rand())"
        sb2, ctx2 = new_sandbox(self.zygote, {})
        ctx3 = self.sb.new_context("r3")
        try:
            a = text_result(self.ctx.run(code))
            b = text_result(ctx2.run(code))
            c = text_result(ctx3.run(code))
            ra, rb, rc = eval(a), eval(b), eval(c)
            self.assertNotEqual(ra[0], rb[0])
            self.assertNotEqual(ra[1], rb[1])
            self.assertNotEqual(ra[0], rc[0])
            self.assertNotEqual(ra[1], rc[1])
        finally:
            ctx2.close()
            ctx3.close()
            sb2.close()

    # -- teardown --
    def test_host_gone_kills_sandbox_and_zygote_reaps(self):
        if GVISOR:
            return self.host_gone_gvisor()
        sb = self.zygote.create()
        ctx = sb.handshake()
        try:
            ctx_pid = int(text_result(ctx.run("import os\nos.getpid()")))
            # A double-forked setsid daemon must die with the sandbox too.
            ctx.run("import subprocess\nsubprocess.Popen(['/bin/sh', '-c', "
                    "'setsid sleep 300 & echo $! > /tmp/sg_daemon_%d'])"
                    % ctx_pid)
            daemon = None
            for _ in range(100):
                try:
                    with open("/tmp/sg_daemon_%d" % ctx_pid) as f:
                        daemon = int(f.read())
                    break
                except (OSError, ValueError):
                    time.sleep(0.02)
            self.assertIsNotNone(daemon)
            out_r, err_r = sb.exec("long", "sleep 300")
            os.close(out_r)
            os.close(err_r)
            pids = [sb.pid, ctx_pid, daemon]
        finally:
            ctx.close()
            sb.close()  # EOF on sandbox_sock: the supervisor kills all
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if all(proc_stat(p) is None for p in pids):
                break
            time.sleep(0.02)
        for p in pids:
            self.assertIsNone(proc_stat(p), "pid %d left behind" % p)
        os.unlink("/tmp/sg_daemon_%d" % ctx_pid)
        # No zombies under the zygote (A children, dead supervisors).
        time.sleep(0.1)
        zombies = [p for p in descendants(self.zygote.pid)
                   if (proc_stat(p) or ("?",))[0] == "Z"]
        self.assertEqual(zombies, [])

    def host_gone_gvisor(self):
        """The gvisor form: EOF on the shim's socket ends the container
        (Sentry, gofer, every process inside, a setsid daemon and an exec
        too): the shim exits and the sandbox's cgroup empties, before
        sgshim's own cleanup would kill anything."""
        sb, ctx = new_sandbox(None, {"PATH": "/usr/bin:/bin"})
        try:
            ctx.run("import subprocess\nsubprocess.Popen(['/bin/sh', '-c', "
                    "'setsid sleep 300 &'])")
            out_r, err_r = sb.exec("long", "sleep 300")
            os.close(out_r)
            os.close(err_r)
            self.assertTrue(sgshim.cgroup_pids(sb.shim.cg))
            ctx.close()
            sb.sock.close()   # the host gone
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                if sb.shim.proc.poll() is not None and not sgshim.cgroup_pids(sb.shim.cg):
                    break
                time.sleep(0.05)
            self.assertIsNotNone(sb.shim.proc.poll(), "the shim outlived its host")
            self.assertEqual(sgshim.cgroup_pids(sb.shim.cg), set(), "left in the cgroup")
        finally:
            sb.close()


class PoolTest(unittest.TestCase):
    """Pool sandboxes (PROTOCOL.md section 2a): made before any request,
    given their env and fresh random state only at ACTIVATE."""

    @classmethod
    def setUpClass(cls):
        cls.zygote = None
        if GVISOR:
            gvisor_require()
        else:
            cls.zygote = Zygote(preload="numpy")

    @classmethod
    def tearDownClass(cls):
        if cls.zygote:
            cls.zygote.close()

    def test_nothing_before_activate_then_env_and_workdir(self):
        sb = new_pool_sandbox(self.zygote)
        try:
            # A pool sandbox says nothing more until it is activated.
            with self.assertRaises(TimeoutError):
                sb.expect(b"READY", timeout=0.3)
            ctx = sb.activate({"OWNER_SECRET": "s3cret", "PATH": "/usr/bin:/bin"},
                              workdir="/")
            f = ctx.run("import os\n(dict(os.environ), os.getcwd())")
            self.assertEqual(text_result(f),
                             "({'OWNER_SECRET': 's3cret', 'PATH': '/usr/bin:/bin'}, '/')")
            # The supervisor took the env too: exec children see it.
            out_r, err_r = sb.exec("env", "echo $OWNER_SECRET; pwd")
            try:
                sb.expect(b"EXIT env")
                self.assertEqual(ctx.read_pipe(out_r), b"s3cret\n/\n")
            finally:
                os.close(out_r)
                os.close(err_r)
            # The context is an ordinary one from here on.
            self.assertEqual(text_result(ctx.run("x = 41\nx + 1")), "42")
            ctx.close()
        finally:
            sb.close()

    def test_pool_sandboxes_reseeded_at_activation(self):
        code = "import random, numpy\n(random.random(), numpy.random.rand())"
        sbs = []
        try:
            for _ in range(2):
                sbs.append(new_pool_sandbox(self.zygote))
            ctxs = [sb.activate({}) for sb in sbs]
            a, b = (eval(text_result(c.run(code))) for c in ctxs)
            self.assertNotEqual(a[0], b[0])
            self.assertNotEqual(a[1], b[1])
            for c in ctxs:
                c.close()
        finally:
            for sb in sbs:
                sb.close()

    @process_only("the held context is killed by its host pid; under gVisor it is a pid "
                  "inside the Sentry the host cannot signal (gvisor_agent_runsc covers the "
                  "agent replacing a held context that died)")
    def test_held_context_died_before_activate(self):
        # sandgate-init starts a fresh context under the held one's id.
        sb = self.zygote.create(pool=True)
        try:
            sb.pooled()
            init_pid, ctx_pid = sb.pid, descendants(sb.pid)[0]
            os.kill(ctx_pid, signal.SIGKILL)
            deadline = time.monotonic() + 5
            while proc_stat(ctx_pid) not in (None,) and time.monotonic() < deadline:
                time.sleep(0.02)   # reaped by init: gone, not a zombie
            self.assertIsNone(proc_stat(ctx_pid))
            ctx = sb.activate({"K": "v"}, workdir="/")
            f = ctx.run("import os\n(os.environ['K'], os.getcwd(), os.getppid())")
            self.assertEqual(text_result(f), "('v', '/', %d)" % init_pid)
            ctx.close()
        finally:
            sb.close()

    def test_bad_activate_is_err(self):
        sb = new_pool_sandbox(self.zygote)
        try:
            sb.send("ACTIVATE " + '{"env": {"A": 1}}')
            m, _ = sb.expect(b"ERR ")
            self.assertIn(b"env", m)
        finally:
            sb.close()

    def test_host_gone_kills_pool_sandbox(self):
        if GVISOR:
            sb = new_pool_sandbox(None)
            try:
                self.assertTrue(sgshim.cgroup_pids(sb.shim.cg))
                sb.sock.close()
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline and (
                        sb.shim.proc.poll() is None or sgshim.cgroup_pids(sb.shim.cg)):
                    time.sleep(0.05)
                self.assertIsNotNone(sb.shim.proc.poll(), "the shim outlived its host")
                self.assertEqual(sgshim.cgroup_pids(sb.shim.cg), set())
            finally:
                sb.close()
            return
        sb = self.zygote.create(pool=True)
        sb.pooled()
        pids = [sb.pid] + descendants(sb.pid)
        self.assertEqual(len(pids), 2, "supervisor and its held context")
        sb.close()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if all(proc_stat(p) in (None,) or proc_stat(p)[0] == "Z"
                   for p in pids):
                break
            time.sleep(0.05)
        for p in pids:
            st = proc_stat(p)
            self.assertTrue(st is None or st[0] == "Z", (p, st))


@unittest.skipIf(GVISOR, "process driver only: the gvisor driver has no zygote (each "
                          "sandbox is a runsc container its own shim starts)")
class ZygoteLifetimeTest(unittest.TestCase):
    def test_zygote_exits_on_control_eof(self):
        z = Zygote(preload="")
        try:
            z.ctl.close()
            z.proc.wait(timeout=5)
        finally:
            if z.proc.poll() is None:
                z.proc.kill()
                z.proc.wait()

    def test_create_err_on_bad_json(self):
        z = Zygote(preload="")
        try:
            import socket
            mine, theirs = socket.socketpair(socket.AF_UNIX,
                                             socket.SOCK_SEQPACKET)
            socket.send_fds(z.ctl, [b"CREATE {nope"], [theirs.fileno()])
            theirs.close()
            # The zygote forks first and always says PID; the child, which
            # parses the request, answers ERR.
            bad = Sandbox(mine)
            bad.expect(b"PID ")
            m, _ = bad.expect(b"ERR ")
            self.assertIn(b"JSON", m.upper())
            bad.close()
            sb = z.create(workdir="/nonexistent-sandgate")
            sb.expect(b"PID ")
            m, _ = sb.expect(b"ERR ")
            self.assertIn(b"nonexistent-sandgate", m)
        finally:
            z.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
