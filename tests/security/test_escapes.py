"""test_escapes.py — hostile code sent through the gateway tries to get out
of its sandbox; every test asserts the specific way the attempt fails, and
after every attack a neighbour sandbox still answers `x = 1 + 1`.

Run by run_in_netns.sh (CTest: security_escapes): the daemons and this
client live in a network namespace with only `lo` and no route, asserted
before anything started, so no network attempt here can leave the machine.
Nothing here connects to a non-loopback address; "only lo exists" is proven
by reading /proc/net from inside.

Each attack is a Python snippet: PRELUDE defines helpers, the snippet fills
dict R, and the last line prints "SGSEC:" + json(R), which the test parses.
"""

import grpc
import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgsec  # noqa: E402

PRELUDE = r'''
import os, errno, json, ctypes, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def C(rv):
    """A libc call's result: [return value, errno name] (errno read right after)."""
    return [rv, errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno())]
def E(f):
    """Call f: ["ok", repr(value)] or [exception type, errno, message]."""
    try:
        return ["ok", repr(f())]
    except BaseException as e:
        return [type(e).__name__, getattr(e, "errno", None), str(e)]
R = {}
'''
EPILOGUE = '\nprint("SGSEC:" + json.dumps(R))\n'

FIND_SOCKS = r'''
import os
def find_socks():
    """The context's sockets (its control channel to the host), from /proc/self/fd."""
    socks = []
    for f in os.listdir("/proc/self/fd"):
        try:
            if os.readlink("/proc/self/fd/" + f).startswith("socket:"):
                socks.append(int(f))
        except OSError:
            pass   # listdir's own fd, already closed
    return socks
'''

SYS = {"ptrace": 101, "mount": 165, "init_module": 175, "unshare": 272, "setns": 308,
       "finit_module": 313, "bpf": 321, "process_vm_readv": 310, "clone3": 435}


class Escapes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = sgsec.Client()
        cls.host_pid = int(os.environ["SG_SEC_HOST_PID"])
        cls.gw_pid = int(os.environ["SG_SEC_GATEWAY_PID"])
        cls.run_dir = os.environ["SG_SEC_RUN_DIR"]
        cls.secret = os.environ["SG_SEC_HOST_SECRET"]
        cls.uid_base = int(os.environ["SG_SEC_UID_BASE"])
        cls.neighbour = cls.c.create(user="sec-neighbour")
        cls.sb = cls.c.create(user="sec-user")
        cls.timings = {}

    @classmethod
    def tearDownClass(cls):
        for sid, user in ((cls.sb, "sec-user"), (cls.neighbour, "sec-neighbour")):
            try:
                cls.c.kill(sid, user=user)
            except Exception:
                pass
        cls.c.close()

    def setUp(self):
        self._t0 = time.time()
        self._fresh = []

    def tearDown(self):
        for sid in self._fresh:
            try:
                self.c.kill(sid)
            except Exception:
                pass
        # After every attack: both daemons alive and a separate sandbox serves.
        self.assertDaemonsServe()
        sys.stderr.write(" [%.1fs] " % (time.time() - self._t0))

    # ---- helpers ----
    def assertDaemonsServe(self, sid=None, user="sec-neighbour"):
        for pid, name in ((self.host_pid, "sandgate-host"), (self.gw_pid, "gateway")):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                self.fail("%s (pid %d) died" % (name, pid))
        r = self.c.run(sid or self.neighbour, "x = 1 + 1\nx", timeout=10, user=user)
        self.assertIsNone(r.error, r)
        self.assertEqual(r.value, "2", "sandbox %s no longer serves: %r" % (sid or "neighbour", r))

    def fresh(self):
        sid = self.c.create(user="sec-user")
        self._fresh.append(sid)
        return sid

    def probe(self, code, sid=None, timeout=20, ctx=""):
        r = self.c.run(sid or self.sb, PRELUDE + code + EPILOGUE, timeout=timeout, ctx=ctx)
        self.assertIsNone(r.error, r)
        lines = [l for l in r.out.splitlines() if l.startswith("SGSEC:")]
        self.assertTrue(lines, "no SGSEC line in %r" % r)
        return json.loads(lines[-1][6:])

    # ---- host files ----
    def test_read_etc_shadow(self):
        R = self.probe('R["shadow"] = E(lambda: open("/etc/shadow").read())\n'
                       'R["etc"] = sorted(os.listdir("/etc"))')
        self.assertEqual(R["shadow"][:2], ["FileNotFoundError", 2], R)
        self.assertNotIn("shadow", R["etc"])

    def test_read_daemon_config(self):
        run = self.run_dir
        R = self.probe('run = %r\n'
                       'R["gw"] = E(lambda: open(run + "/gateway.yaml").read())\n'
                       'R["host"] = E(lambda: open(run + "/../host.yaml").read())\n'
                       'R["exists"] = [os.path.exists(p) for p in (run, os.path.dirname(run))]\n'
                       'R["policy"] = E(lambda: open("/work/main/deploy/local/policy.yaml").read())\n'
                       % run)
        self.assertEqual(R["gw"][:2], ["FileNotFoundError", 2], R)
        self.assertEqual(R["host"][:2], ["FileNotFoundError", 2], R)
        self.assertEqual(R["exists"], [False, False], R)
        self.assertEqual(R["policy"][:2], ["FileNotFoundError", 2], R)

    def test_read_host_proc1_environ(self):
        # /proc/1 inside is the sandbox's own supervisor (not the host's
        # init); its environ is not readable (not dumpable), and no readable
        # environ anywhere holds the secret only the daemons' env has.
        R = self.probe(
            'R["env1"] = E(lambda: open("/proc/1/environ", "rb").read())\n'
            'R["status1"] = open("/proc/1/status").read()\n'
            'R["ppid"] = os.getppid()\n'
            'found = []\n'
            'for p in os.listdir("/proc"):\n'
            '    if p.isdigit():\n'
            '        try: b = open("/proc/%%s/environ" %% p, "rb").read()\n'
            '        except OSError: continue\n'
            '        if %r.encode() in b: found.append(p)\n'
            'R["found"] = found\n'
            'R["selfenv"] = %r in json.dumps(dict(os.environ))\n' % (self.secret, self.secret))
        st = dict(l.split(":\t", 1) for l in R["status1"].splitlines() if ":\t" in l)
        if sgsec.GVISOR:
            # pid 1 is the agent (host/drivers/gvisor/agent), root of gVisor's
            # own user namespace (the Sentry runs as nobody on the host); this
            # gVisor lets its environ be read: it is the agent's fixed start
            # env (PATH, LANG, HOME, TMPDIR, MPLBACKEND), checked below to
            # hold no secret, never the owner's env (that goes to contexts).
            if R["env1"][0] == "ok":
                names = sorted(kv.split("=", 1)[0] for kv in
                               eval(R["env1"][1]).decode().split("\0") if kv)
                self.assertTrue(set(names) <= {"PATH", "LANG", "HOME", "TMPDIR", "MPLBACKEND"},
                                names)
            else:
                self.assertEqual(R["env1"][:2], ["PermissionError", 13], R)
            self.assertEqual(st["Name"], "python3", st)       # the agent, not init
            self.assertEqual(int(st["Uid"].split()[0]), 0, st)
        else:
            self.assertEqual(R["env1"][:2], ["PermissionError", 13], R)
            self.assertEqual(st["Name"], "sandgate-init", st)     # the supervisor, not init
            self.assertGreaterEqual(int(st["Uid"].split()[0]), self.uid_base)
        self.assertEqual(st["PPid"].strip(), "0")
        self.assertEqual(R["ppid"], 1)
        self.assertEqual(R["found"], [])
        self.assertFalse(R["selfenv"])

    # ---- processes ----
    def test_processes_outside_invisible(self):
        R = self.probe(
            'pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())\n'
            'R["pids"] = pids\n'
            'R["uids"] = sorted({int(open("/proc/%%d/status" %% p).read().split("Uid:")[1].split()[0])'
             ' for p in pids if os.path.exists("/proc/%%d" %% p)})\n'
            'R["me"] = os.getuid()\n'
            'R["kill0"] = E(lambda: os.kill(%d, 0))\n'
            'R["kill9"] = E(lambda: os.kill(%d, 9))\n'
            'R["killpg"] = E(lambda: os.killpg(%d, 9))\n'
            'R["kill_all"] = C(libc.kill(-1, 0))\n'
            % (self.host_pid, self.gw_pid, self.host_pid))
        self.assertLessEqual(len(R["pids"]), 6, R)          # supervisor, context (+ a few)
        self.assertIn(1, R["pids"])
        # every visible pid is ours (gVisor: and pid 1, the agent, uid 0 of
        # gVisor's user namespace: root only inside the Sentry)
        self.assertEqual(R["uids"], sorted({R["me"], 0}) if sgsec.GVISOR else [R["me"]], R)
        self.assertEqual(R["kill0"][:2], ["ProcessLookupError", 3], R)
        self.assertEqual(R["kill9"][:2], ["ProcessLookupError", 3], R)
        self.assertEqual(R["killpg"][:2], ["ProcessLookupError", 3], R)

    # ---- syscalls ----
    def test_ptrace(self):
        R = self.probe('R["attach1"] = C(libc.ptrace(16, 1, None, None))\n'
                       'R["traceme"] = C(libc.ptrace(0, 0, None, None))\n'
                       'R["seize_host"] = C(libc.ptrace(0x4206, %d, None, None))\n'
                       'R["vm_readv"] = C(libc.syscall(%d, 1, None, 0, None, 0, 0))\n'
                       'R["mem1"] = E(lambda: open("/proc/1/mem", "rb"))\n'
                       % (self.host_pid, SYS["process_vm_readv"]))
        self.assertEqual(R["attach1"], [-1, "EPERM"], R)
        self.assertEqual(R["traceme"], [-1, "EPERM"], R)
        if sgsec.GVISOR:
            # the Sentry's ptrace: a host pid does not exist in its pid
            # namespace, and it has no process_vm_readv at all
            self.assertEqual(R["seize_host"], [-1, "ESRCH"], R)
            self.assertEqual(R["vm_readv"], [-1, "ENOSYS"], R)
        else:
            self.assertEqual(R["seize_host"], [-1, "EPERM"], R)
            self.assertEqual(R["vm_readv"], [-1, "EPERM"], R)
        self.assertEqual(R["mem1"][:2], ["PermissionError", 13], R)

    def test_mount(self):
        R = self.probe('R["tmpfs"] = C(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))\n'
                       'R["remount_rw"] = C(libc.mount(None, b"/", None, 32, None))\n'
                       'R["bind"] = C(libc.mount(b"/", b"/workspace", None, 4096, None))\n'
                       'R["umount"] = C(libc.umount2(b"/proc", 2))\n')
        for k in ("tmpfs", "remount_rw", "bind", "umount"):
            self.assertEqual(R[k], [-1, "EPERM"], (k, R))

    def test_unshare_setns_clone3(self):
        # gVisor grants the unshares (below): in a sandbox of its own, so
        # the shared one's context keeps its namespaces for the other cases
        R = self.probe('R["user"] = C(libc.unshare(0x10000000))\n'
                       'R["mnt"] = C(libc.unshare(0x00020000))\n'
                       'R["net"] = C(libc.unshare(0x40000000))\n'
                       'R["setns"] = C(libc.syscall(%d, 0, 0))\n'
                       'R["clone3"] = C(libc.syscall(%d, None, 0))\n'
                       % (SYS["setns"], SYS["clone3"]), sid=self.fresh() if sgsec.GVISOR else None)
        self.assertEqual(R["clone3"], [-1, "ENOSYS"], R)
        if sgsec.GVISOR:
            # The Sentry implements namespaces itself: an unprivileged user
            # namespace (and mount/net ones in it) is granted, as Linux
            # grants one without seccomp, but it is the Sentry's, made of no
            # host syscall; the gain is asserted away by every other case
            # here (no host file, process, network or kernel interface). No
            # setns: the Sentry has no namespace fds to join.
            for k in ("user", "mnt", "net"):
                self.assertEqual(R[k][0], 0, (k, R))
            self.assertEqual(R["setns"][0], -1, R)
            return
        for k in ("user", "mnt", "net", "setns"):
            self.assertEqual(R[k], [-1, "EPERM"], (k, R))

    def test_load_module(self):
        R = self.probe('R["init"] = C(libc.syscall(%d, b"\\0" * 64, 64, b""))\n'
                       'fd = os.open("/dev/null", os.O_RDONLY)\n'
                       'R["finit"] = C(libc.syscall(%d, fd, b"", 0))\n'
                       'R["bpf"] = C(libc.syscall(%d, 0, None, 0))\n'
                       % (SYS["init_module"], SYS["finit_module"], SYS["bpf"]))
        self.assertEqual(R["init"], [-1, "EPERM"], R)
        self.assertEqual(R["finit"], [-1, "EPERM"], R)
        self.assertEqual(R["bpf"], [-1, "EPERM"], R)

    def test_seccomp_denylist(self):
        # The rest of issue 3's deny list: each returns -1 EPERM.
        calls = {"keyctl": "250, 0, 0, 0, 0", "add_key": "248, b'user', b'k', b'v', 1, -3",
                 "request_key": "249, b'user', b'k', None, 0", "userfaultfd": "323, 0",
                 "io_uring_setup": "425, 1, None", "perf_event_open": "298, None, 0, -1, -1, 0",
                 "kexec_load": "246, 0, 0, None, 0", "kexec_file_load": "320, -1, -1, 0, None, 0",
                 "reboot": "169, 0xfee1dead, 0x28121969, 0x4321fedc, None",
                 "swapon": "167, b'/tmp/x', 0", "pivot_root": "155, b'/tmp', b'/tmp'",
                 "process_vm_writev": "311, 1, None, 0, None, 0, 0"}
        code = "".join('R[%r] = C(libc.syscall(%s))\n' % (k, v) for k, v in calls.items())
        code += 'R["tiocsti"] = C(libc.ioctl(1, 0x5412, ctypes.c_char_p(b"x")))\n'
        R = self.probe(code)
        if sgsec.GVISOR:
            # No seccomp filter inside gVisor: the Sentry answers each call
            # itself (unimplemented ENOSYS, keys EACCES, perf ENODEV,
            # io_uring EFAULT on this bad pointer, privileged EPERM; TIOCSTI
            # on a pipe ENOTTY); every one fails, none reaches the host.
            for k in calls:
                self.assertEqual(R[k][0], -1, (k, R))
                self.assertIn(R[k][1], ("EPERM", "EACCES", "ENOSYS", "ENODEV", "EFAULT"), (k, R))
            self.assertEqual(R["tiocsti"][0], -1, R)
            return
        for k in calls:
            self.assertEqual(R[k], [-1, "EPERM"], (k, R))
        self.assertEqual(R["tiocsti"], [-1, "EPERM"], R)

    def test_seccomp_x32_abi_kills(self):
        # A syscall through the x32 ABI (nr | 0x40000000) must not bypass the
        # x86_64 rules: the filter kills the process (SIGSYS) — the run ends
        # with ContextLost and the context restarts.
        sid = self.fresh()
        r = self.c.run(sid, 'import ctypes\nkeep = 1\nlibc = ctypes.CDLL(None, use_errno=True)\n'
                            'rv = libc.syscall(0x40000000 | 272, 0x10000000)\n'
                            'print("x32 unshare returned", rv, ctypes.get_errno())\n', timeout=10)
        if sgsec.GVISOR:
            # gVisor implements no x32 ABI: ENOSYS, and nothing was unshared
            self.assertIn(b"x32 unshare returned -1 38", r.stdout, r)
            self.assertDaemonsServe(sid, user="sec-user")
            return
        self.assertNotIn(b"returned", r.stdout, r)
        self._assert_lost(sid, r, "")

    def test_raw_netlink_packet_sockets(self):
        R = self.probe(
            'S = socket\n'
            'R["netlink"] = E(lambda: S.socket(S.AF_NETLINK, S.SOCK_RAW, 0))\n'
            'R["netlink_route"] = E(lambda: S.socket(S.AF_NETLINK, S.SOCK_DGRAM, 0))\n'
            'R["packet"] = E(lambda: S.socket(S.AF_PACKET, S.SOCK_RAW, 0))\n'
            'R["packet_dgram"] = E(lambda: S.socket(S.AF_PACKET, S.SOCK_DGRAM, 0))\n'
            'R["raw4"] = E(lambda: S.socket(S.AF_INET, S.SOCK_RAW, S.IPPROTO_ICMP))\n'
            'R["raw6"] = E(lambda: S.socket(S.AF_INET6, S.SOCK_RAW, S.IPPROTO_ICMPV6))\n'
            'R["rawtcp"] = E(lambda: S.socket(S.AF_INET, S.SOCK_RAW, S.IPPROTO_TCP))\n')
        if sgsec.GVISOR:
            # netlink is the Sentry's own (route, over its netstack: only lo,
            # test_network_only_lo_and_no_dns); packet and raw sockets EPERM
            for k in ("netlink", "netlink_route"):
                self.assertIn(R[k][0], ("ok", "OSError"), (k, R))
            for k in ("packet", "packet_dgram", "raw4", "raw6", "rawtcp"):
                self.assertEqual(R[k][:2], ["PermissionError", 1], (k, R))
            return
        for k in ("netlink", "netlink_route", "packet", "packet_dgram"):
            self.assertEqual(R[k][:2], ["OSError", 97], (k, R))       # EAFNOSUPPORT
        for k in ("raw4", "raw6", "rawtcp"):
            self.assertEqual(R[k][:2], ["PermissionError", 1], (k, R))  # EPERM

    def test_network_only_lo_and_no_dns(self):
        # This namespace (daemons and us) has no route out, asserted before
        # anything started; the sandbox has its own, inner one.
        with open("/proc/net/route") as f:
            self.assertEqual(len(f.read().splitlines()), 1, "test netns has an IPv4 route")
        R = self.probe(
            'R["dev"] = [l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:]]\n'
            'R["route"] = open("/proc/net/route").read().splitlines()[1:]\n'
            'R["route6"] = [l.split()[-1] for l in open("/proc/net/ipv6_route").read().splitlines()]\n'
            'R["if6"] = [l.split()[-1] for l in open("/proc/net/if_inet6").read().splitlines()]\n'
            'R["lo"] = E(lambda: socket.create_connection(("127.0.0.1", 9), 2))\n'
            'R["resolv"] = os.path.exists("/etc/resolv.conf")\n'
            'R["dns"] = E(lambda: socket.getaddrinfo("example.com", 443))\n'
            'R["netns"] = os.readlink("/proc/self/ns/net")\n')
        self.assertEqual(R["dev"], ["lo"], R)
        self.assertEqual(R["route"], [], R)
        self.assertTrue(set(R["route6"]) <= {"lo"}, R)
        self.assertTrue(set(R["if6"]) <= {"lo"}, R)
        self.assertEqual(R["lo"][:2], ["ConnectionRefusedError", 111], R)
        self.assertFalse(R["resolv"], R)
        self.assertEqual(R["dns"][0], "gaierror", R)
        self.assertIn(R["dns"][1], (-2, -3, -4, -5), R)   # NONAME, AGAIN, FAIL, NODATA
        self.assertNotEqual(R["netns"], os.readlink("/proc/self/ns/net"),
                            "sandbox shares the daemons' network namespace")

    # ---- filesystem ----
    def test_write_readonly_root(self):
        R = self.probe('R["usr"] = E(lambda: open("/usr/x", "w"))\n'
                       'R["root"] = E(lambda: open("/x", "w"))\n'
                       'R["mkdir"] = E(lambda: os.mkdir("/x"))\n'
                       'R["bin"] = E(lambda: open("/bin/sh", "ab"))\n'
                       'R["passwd"] = E(lambda: open("/etc/passwd", "a"))\n'
                       'R["chmod"] = E(lambda: os.chmod("/usr/bin/python3", 0o4755))\n')
        # EROFS (gVisor: EACCES, its gofer's read-only bind refuses first)
        self.assertIn(R["usr"][:2], (["OSError", 30], ["PermissionError", 13]) if sgsec.GVISOR
                      else (["OSError", 30],), R)
        self.assertIn(R["root"][:2], (["OSError", 30], ["PermissionError", 13]), R)
        self.assertIn(R["mkdir"][:2], (["OSError", 30], ["PermissionError", 13]), R)
        self.assertIn(R["bin"][:2], (["OSError", 30], ["PermissionError", 13]), R)
        self.assertIn(R["passwd"][:2], (["OSError", 30], ["PermissionError", 13]), R)
        self.assertIn(R["chmod"][:2], (["OSError", 30], ["PermissionError", 1]), R)

    def test_disk_quota(self):
        sid = self.fresh()
        R = self.probe(
            'n = 0\n'
            'chunk = b"\\xa5" * (1 << 20)\n'
            'R["err"] = None\n'
            'i = 0\n'
            'try:\n'
            '    while n < (2 << 30):\n'
            '        with open("/workspace/fill%d" % i, "wb", buffering=0) as f:\n'
            '            i += 1\n'
            '            for _ in range(32):\n'
            '                n += f.write(chunk)\n'
            'except OSError as e:\n'
            '    R["err"] = [type(e).__name__, e.errno, str(e)]\n'
            'R["n"] = n\n'
            'st = os.statvfs("/workspace")\n'
            'R["size"] = st.f_blocks * st.f_frsize\n'
            'R["big"] = E(lambda: open("/workspace/one", "wb").truncate(300 << 20))\n'
            'for f in os.listdir("/workspace"): os.unlink("/workspace/" + f)\n', sid=sid, timeout=60)
        self.assertIsNotNone(R["err"], "wrote %d bytes without error" % R["n"])
        self.assertIn(R["err"][1], (28, 122), R)            # ENOSPC / EDQUOT
        self.assertIn(R["err"][2].split("]")[1].strip(),
                      ("No space left on device", "Disk quota exceeded"), R)
        self.assertLessEqual(R["n"], 256 << 20, R)          # policy disk: 256MiB
        self.assertEqual(R["size"], 256 << 20, R)
        # One file past RLIMIT_FSIZE (= the workspace size) is "File too large".
        self.assertEqual(R["big"][:2], ["OSError", 27], R)
        sys.stderr.write(" [wrote %d MiB: %s] " % (R["n"] >> 20, R["err"][2]))
        self.assertDaemonsServe(sid, user="sec-user")

    # ---- resource bombs ----
    def test_fork_bomb(self):
        # os.fork in a loop, in a small interpreter started from the context
        # (forking the context itself, ~100 MB with numpy and pandas, takes
        # 10-30 s for 128 forks on a loaded 2-core machine under the 1-core
        # CPU limit: longer than the policy's 30 s action timeout).
        sid = self.fresh()
        if sgsec.GVISOR:
            return self._fork_bomb_gvisor(sid)
        R = self.probe(
            'import subprocess\n'
            'bomb = """\n'
            'import os, json\n'
            'r, w = os.pipe()\n'
            'kids, err = [], None\n'
            'try:\n'
            '    for i in range(100000):\n'
            '        pid = os.fork()\n'
            '        if pid == 0:\n'
            '            os.close(w)\n'
            '            os.read(r, 1)\n'
            '            os._exit(0)\n'
            '        kids.append(pid)\n'
            'except OSError as e:\n'
            '    err = [type(e).__name__, e.errno, str(e)]\n'
            'os.close(w)\n'
            'for k in kids: os.waitpid(k, 0)\n'
            'print(json.dumps([len(kids), err]))\n'
            '"""\n'
            'p = subprocess.run([sys.executable, "-I", "-S", "-c", bomb], capture_output=True, timeout=25)\n'
            'R["kids"], R["err"] = json.loads(p.stdout)\n', sid=sid, timeout=30)
        self.assertEqual(R["err"][:2], ["BlockingIOError", 11], R)   # EAGAIN from pids.max
        self.assertLess(R["kids"], 128, R)                            # policy pids: 128
        self.assertGreater(R["kids"], 50, R)
        sys.stderr.write(" [%d forks, then %s] " % (R["kids"], R["err"][2]))
        self.assertDaemonsServe(sid, user="sec-user")
        out, err, ex = self.c.exec(sid, "echo alive", timeout=10)
        self.assertEqual((out, ex.exit_code), (b"alive\n", 0), (out, err, ex))

    def _fork_bomb_gvisor(self, sid):
        # This gVisor (Debian's 20221219, platform ptrace) lets the bomb run
        # into the host's pids.max backstop (limit + 256 host tasks: each
        # app task is a stub thread and a Sentry thread) before any EAGAIN
        # inside, and the Sentry then dies with the sandbox. What the
        # attacker gets is its own sandbox ended (or a clean EAGAIN); the
        # host, the gateway and the neighbour sandbox keep serving.
        r = self.c.run(sid, 'import os\nkids = 0\ntry:\n    while True:\n'
                            '        if os.fork() == 0:\n            import time; time.sleep(60)\n'
                            '        kids += 1\nexcept OSError as e:\n    print("EAGAIN", kids, e.errno)\n',
                       timeout=30)
        sys.stderr.write(" [%s] " % (r.out.strip() or r.status or r.error,))
        if r.status is None and r.error is None:
            self.assertIn("EAGAIN", r.out, r)
        self.assertDaemonsServe()
        self.c.create(user="sec-neighbour", task="after-bomb-%d" % os.getpid())

    def test_memory_bomb(self):
        sid = self.fresh()
        r = self.c.run(sid, 'keep = 1\n', timeout=10)
        self.assertIsNone(r.error, r)
        r = self.c.run(sid, 'a = []\nwhile True:\n    a.append(b"\\x01" * (64 << 20))\n',
                       timeout=60)
        self.assertIsNone(r.status, r)
        self.assertIsNotNone(r.error, r)
        self.assertEqual(r.error[0], "MemoryError", r)
        if sgsec.GVISOR:
            # RLIMIT_AS inside: Python's own MemoryError, the context lives
            # on (issue 14: preferred over an OOM kill of the Sentry)
            r = self.c.run(sid, 'del a\n"keep" in globals()', timeout=10)
            self.assertEqual(r.value, "True", r)
            self.assertDaemonsServe(sid, user="sec-user")
            return
        self.assertIn("out of memory", r.error[1], r)
        self.assertIn("state was lost", r.error[1], r)
        self.assertTrue(r.end.context_restarted, r)
        sys.stderr.write(" [%s: %s] " % (r.error[0], r.error[1]))
        r = self.c.run(sid, '"keep" in globals()', timeout=10)
        self.assertEqual(r.value, "False", r)              # restarted: state lost
        self.assertDaemonsServe(sid, user="sec-user")

    def test_infinite_loop_ignoring_sigint(self):
        sid = self.fresh()
        t = time.time()
        r = self.c.run(sid, 'import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n'
                            'keep = 1\nwhile True:\n    pass\n', timeout=2)
        took = time.time() - t
        self.assertIsNone(r.status, r)
        self.assertEqual(r.error[0], "TimeoutError", r)
        self.assertIn("state was lost", r.error[1], r)
        self.assertTrue(r.end.timed_out, r)
        self.assertTrue(r.end.context_restarted, r)
        self.assertLess(took, 10, r)                       # 2 s timeout + 2 s grace
        sys.stderr.write(" [%.1fs: %s] " % (took, r.error[1]))
        r = self.c.run(sid, '"keep" in globals()', timeout=10)
        self.assertEqual(r.value, "False", r)
        self.assertDaemonsServe(sid, user="sec-user")

    # ---- the protocol ----
    def _assert_lost(self, sid, r, words):
        self.assertIsNone(r.status, r)
        self.assertIsNotNone(r.error, r)
        self.assertEqual(r.error[0], "ContextLost", r)
        self.assertIn(words, r.error[1], r)
        self.assertIn("state was lost", r.error[1], r)
        self.assertTrue(r.end.context_restarted, r)
        sys.stderr.write(" [%s: %s] " % (r.error[0], r.error[1]))
        r2 = self.c.run(sid, '"keep" in globals()', timeout=10)
        self.assertEqual(r2.value, "False", r2)
        self.assertDaemonsServe(sid, user="sec-user")

    def test_close_all_fds(self):
        sid = self.fresh()
        r = self.c.run(sid, 'import os\nkeep = 1\n'
                            'for fd in sorted(int(f) for f in os.listdir("/proc/self/fd")):\n'
                            '    if fd >= 3:\n'
                            '        try: os.close(fd)\n'
                            '        except OSError: pass\n'
                            'print("still here")\n', timeout=10)
        # gVisor: the context's channel is a socket the agent relays; with
        # it closed the runtime exits (code 1) and the host says so
        self._assert_lost(sid, r, "exited" if sgsec.GVISOR else "closed")

    def test_garbage_on_control_socket(self):
        sid = self.fresh()
        r = self.c.run(sid, FIND_SOCKS + 'keep = 1\n'
                            'socks = find_socks()\n'
                            'assert socks, "no socket fd"\n'
                            'for fd in socks:\n'
                            '    os.write(fd, b"\\xffGARBAGE" * 100)\n'
                            'import time; time.sleep(5)\n', timeout=15)
        self._assert_lost(sid, r, "garbage")

    def test_dup2_control_socket_over_stdout(self):
        sid = self.fresh()
        r = self.c.run(sid, FIND_SOCKS + 'keep = 1\n'
                            'sock = find_socks()[0]\n'
                            'os.dup2(sock, 1)\nos.dup2(sock, 2)\n'
                            'os.write(1, b"garbage written to fd 1")\n'
                            'import time; time.sleep(5)\n', timeout=15)
        self._assert_lost(sid, r, "garbage")

    def test_dup2_devnull_over_stdout(self):
        # Hiding fds 1 and 2 only loses C-level output; the protocol is intact.
        sid = self.fresh()
        r = self.c.run(sid, 'import os\nkeep = 1\n'
                            'n = os.open("/dev/null", os.O_WRONLY)\n'
                            'os.dup2(n, 1)\nos.dup2(n, 2)\n'
                            'os.write(1, b"lost\\n")\n'
                            'print("via frames")\n'
                            '41 + 1\n', timeout=10)
        self.assertIsNone(r.error, r)
        self.assertEqual(r.out, "via frames\n", r)
        self.assertEqual(r.value, "42", r)
        self.assertFalse(r.end.context_restarted, r)
        r = self.c.run(sid, '"keep" in globals()', timeout=10)
        self.assertEqual(r.value, "True", r)
        self.assertDaemonsServe(sid, user="sec-user")

    # ---- teardown ----
    def test_setsid_daemon_dies_with_sandbox(self):
        sid = self.fresh()
        R = self.probe(
            'import time, signal\n'
            'r, w = os.pipe()\n'
            'if os.fork() == 0:\n'
            '    os.setsid()\n'
            '    if os.fork() == 0:\n'
            '        for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT): signal.signal(s, signal.SIG_IGN)\n'
            '        os.write(w, str(os.getpid()).encode())\n'
            '        os.closerange(0, 1024)\n'
            '        while True: time.sleep(1)\n'
            '    os._exit(0)\n'
            'R["daemon"] = int(os.read(r, 32))\n'
            'R["uid"] = os.getuid()\n'
            'time.sleep(0.2)\n'
            'R["daemon_ppid"] = int(open("/proc/%d/stat" % R["daemon"]).read().rsplit(")", 1)[1].split()[1])\n',
            sid=sid)
        uid = R["uid"]
        self.assertGreaterEqual(uid, self.uid_base)
        self.assertEqual(R["daemon_ppid"], 1, R)               # reparented to the supervisor
        if sgsec.GVISOR:
            # Its processes live in the Sentry, not as host processes of the
            # uid: what must go with the sandbox is every host process in its
            # cgroups (shim, runsc, gofer, Sentry, stubs) and the groups.
            dirs = sgsec.cgroup_dirs(sid)
            in_cg = set()
            for d in dirs:
                in_cg |= set(sgsec.cgroup_procs(d))
            self.assertGreaterEqual(len(in_cg), 3, in_cg)
            self._fresh.remove(sid)
            self.c.kill(sid)
            self.assertEqual(sgsec.cgroup_dirs(sid), [], "cgroup dirs of %s left" % sid)
            left = [p for p in in_cg if os.path.exists("/proc/%d" % p)]
            self.assertEqual(left, [], "host processes of %s survived the kill" % sid)
            return
        before = sgsec.pids_with_uid(uid)
        self.assertGreaterEqual(len(before), 3, before)        # supervisor, context, daemon
        dirs = sgsec.cgroup_dirs(sid)
        self.assertTrue(dirs, "no cgroup dirs for %s" % sid)
        in_cg = set()
        for d in dirs:
            in_cg |= set(sgsec.cgroup_procs(d))
        # Zombies (the intermediate child, unreaped by the context) have left
        # the cgroup already; every live process must be in it.
        self.assertTrue({p[0] for p in before if p[3] != "Z"} <= in_cg, (before, in_cg))
        self._fresh.remove(sid)
        self.c.kill(sid)
        # KillSandbox answers once the cgroups are empty and removed.
        # The uid's slot may already be reused by a new (warm pool) sandbox:
        # a process with this uid is a leak unless it sits in the cgroup of
        # another, live sandbox, or is that sandbox's pid 1 just forked by
        # one of the host's zygotes and not yet moved into its cgroup (seen
        # on a loaded box: sandgate-init, parent the zygote, cgroup "/").
        zygotes = {z[0] for z in sgsec.children(self.host_pid)}
        old_pids = {b[0] for b in before}
        left = []
        for p in sgsec.pids_with_uid(uid):
            cg = sgsec.proc_cgroup(p[0])
            if p[3] == "Z" or (cg.startswith("/sandgate/") and cg != "/sandgate/" + sid):
                continue
            if p[2] in zygotes and p[0] not in old_pids:
                continue
            left.append(p + (cg,))
        self.assertEqual(left, [], "processes of sandbox uid %d survived the kill" % uid)
        self.assertEqual(sgsec.cgroup_dirs(sid), [], "cgroup dirs of %s left" % sid)
        for pid, _, _, _, _ in before:
            self.assertFalse(os.path.exists("/proc/%d" % pid), pid)

    # ---- other sandboxes ----
    def test_other_sandbox_invisible(self):
        a = self.fresh()
        b = self.fresh()
        token = "sg-sec-token-%d" % os.getpid()
        ra = self.probe('open("/workspace/secret-a.txt", "w").write(%r)\n'
                        'open("/tmp/secret-a.txt", "w").write(%r)\n'
                        'import subprocess\n'
                        'p = subprocess.Popen(["sleep", "30"], start_new_session=True)\n'
                        'R["uid"] = os.getuid()\n'
                        'R["ws"] = os.stat("/workspace").st_dev\n' % (token, token), sid=a)
        rb = self.probe(
            'token = %r\n'
            'R["ws"] = sorted(os.listdir("/workspace"))\n'
            'R["tmp"] = sorted(os.listdir("/tmp"))\n'
            'R["open"] = E(lambda: open("/workspace/secret-a.txt").read())\n'
            'R["uid"] = os.getuid()\n'
            'hits = []\n'
            'for p in os.listdir("/proc"):\n'
            '    if p.isdigit():\n'
            '        try: cmd = open("/proc/%%s/cmdline" %% p, "rb").read()\n'
            '        except OSError: continue\n'
            '        if b"sleep" in cmd: hits.append(p)\n'
            'R["sleep"] = hits\n'
            'found = []\n'
            'for top in ("/workspace", "/tmp", "/dev/shm"):\n'
            '    for d, _, fs in os.walk(top):\n'
            '        for f in fs:\n'
            '            try:\n'
            '                if token.encode() in open(os.path.join(d, f), "rb").read(): found.append(f)\n'
            '            except OSError: pass\n'
            'R["found"] = found\n' % token, sid=b)
        self.assertNotEqual(ra["uid"], rb["uid"])
        self.assertEqual(rb["ws"], [], rb)
        self.assertEqual(rb["tmp"], [], rb)
        self.assertEqual(rb["open"][:2], ["FileNotFoundError", 2], rb)
        self.assertEqual(rb["sleep"], [], rb)
        self.assertEqual(rb["found"], [], rb)
        # Through the API: sandbox b's ReadFile cannot name a's file either.
        try:
            data = self.c.stub.ReadFile(self.c.pb.ReadFileRequest(
                sandbox_id=b, user_id="sec-user", path="secret-a.txt"),
                metadata=self.c.md, timeout=10).data
            self.fail("ReadFile in b returned a's file: %r" % data)
        except self.c.grpc.RpcError as e:
            self.assertEqual(e.code(), self.c.grpc.StatusCode.NOT_FOUND, e)

    # ---- privileges ----
    def test_proc_self_status(self):
        R = self.probe('R["st"] = open("/proc/self/status").read()')
        st = dict(l.split(":\t", 1) for l in R["st"].splitlines() if ":\t" in l)
        if sgsec.GVISOR:
            # No capability in effect; the bounding set keeps what the agent
            # (pid 1) holds, CAP_KILL|SETGID|SETUID (0xe0), which no_new_privs
            # keeps any exec from gaining. This gVisor's status has no
            # CapAmb, NoNewPrivs or Seccomp lines (there is no seccomp inside:
            # the Sentry is the kernel).
            for k in ("CapInh", "CapPrm", "CapEff"):
                self.assertEqual(st[k].strip(), "0000000000000000", (k, st[k]))
            self.assertEqual(int(st["CapBnd"], 16) & ~0xe0, 0, st["CapBnd"])
            uid = st["Uid"].split()
            self.assertEqual(len(set(uid)), 1, uid)
            self.assertGreaterEqual(int(uid[0]), self.uid_base)
            out, err, ex = self.c.exec(self.sb, "grep -E '^CapEff:' /proc/self/status; id -u")
            self.assertEqual(out.decode().split()[:2], ["CapEff:", "0000000000000000"],
                             (out, err, ex))
            self.assertGreaterEqual(int(out.decode().split()[2]), self.uid_base)
            return
        for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            self.assertEqual(st[k].strip(), "0000000000000000", (k, st[k]))
        self.assertEqual(st["NoNewPrivs"].strip(), "1")
        self.assertEqual(st["Seccomp"].strip(), "2")
        uid = st["Uid"].split()
        self.assertEqual(len(set(uid)), 1, uid)          # real/effective/saved/fs all the same
        self.assertGreaterEqual(int(uid[0]), self.uid_base)
        # The same for a command run by Exec.
        out, err, ex = self.c.exec(self.sb, "grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status")
        self.assertEqual(out.decode().split(),
                         ["CapEff:", "0000000000000000", "NoNewPrivs:", "1", "Seccomp:", "2"],
                         (out, err, ex))

    def test_later_context_contained_like_the_default(self):
        # A context made after the sandbox (CreateContext, and every restart)
        # is a zygote fork that joins the running sandbox (PROTOCOL.md 1a):
        # it must land in the same namespaces, cgroups, uid, caps and
        # seccomp as the default context, as a child of the sandbox's pid 1,
        # and with the sandbox's env, never the zygote's.
        code = ('st = dict(l.split(":\\t", 1) for l in open("/proc/self/status").read()'
                '.splitlines() if ":\\t" in l)\n'
                'R["st"] = {k: st.get(k, "").strip() for k in ("CapInh", "CapPrm", "CapEff",'
                ' "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp", "Uid", "Gid")}\n'
                'R["ns"] = {n: os.readlink("/proc/self/ns/" + n) for n in'
                ' ("mnt", "net", "pid", "ipc", "uts", "cgroup", "user")'
                ' if os.path.lexists("/proc/self/ns/" + n)}\n'
                'R["cg"] = open("/proc/self/cgroup").read()\n'
                'R["ppid"] = os.getppid()\n'
                'R["cwd"] = os.getcwd()\n'
                'R["env"] = sorted(os.environ)\n'
                'R["root"] = sorted(os.listdir("/"))\n'
                'R["numpy"] = "numpy" in sys.modules\n')
        ctx = self.c.new_context(self.sb)
        default, later = self.probe(code), self.probe(code, ctx=ctx)
        self.assertEqual(later, default)
        self.assertEqual(later["ppid"], 1, later)
        self.assertTrue(later["numpy"], "a later context shares the zygote's preloaded heap")
        self.assertEqual(later["st"]["CapEff"], "0000000000000000", later)
        # gVisor: no seccomp inside (and no such line); the Sentry is the kernel
        self.assertEqual(later["st"]["Seccomp"], "" if sgsec.GVISOR else "2", later)
        self.assertNotIn("PYTHONPATH", later["env"])
        # Restarted after it dies: joined again, contained the same way.
        r = self.c.run(self.sb, "import os\nos._exit(7)", ctx=ctx)
        self.assertIsNotNone(r.error, r)
        self.assertEqual(self.probe(code, ctx=ctx), default)

    def test_context_flood_is_capped(self):
        # Each context is a process in the sandbox: a sandbox holds at most 64
        # (the default one included), and the 65th is refused by name.
        sid = self.fresh()
        made = []
        with self.assertRaises(grpc.RpcError) as cm:
            for _ in range(80):
                made.append(self.c.new_context(sid))
        if sgsec.GVISOR and cm.exception.code() == grpc.StatusCode.UNAVAILABLE:
            # FINDING (gVisor driver): each context is a fork of the agent
            # whose pages Python's refcounts dirty (~40 MB each); ~18 reach
            # the sandbox's memory cgroup (limit + 192 MiB) and the host's
            # OOM killer ends the Sentry: the flood costs the attacker its
            # own sandbox, never the host or a neighbour (asserted after
            # every test). The process driver's cap (64) is not reached.
            sys.stderr.write(" [%d contexts, then %s] " % (len(made), cm.exception.details()))
            self._fresh.remove(sid)
            return
        self.assertEqual(len(made), 63)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertIn("64 contexts", cm.exception.details())
        r = self.c.run(sid, "print(6 * 7)", ctx=made[-1])
        self.assertEqual(r.out, "42\n", r)
        r = self.c.run(sid, "print(6 * 7)")
        self.assertEqual(r.out, "42\n", r)

    # ---- smolagents' published escapes (in-process executor) ----
    def test_smolagents_subclasses_popen(self):
        R = self.probe(
            'import subprocess  # loaded anyway by pandas; the walk below does not need the name\n'
            'popen = [c for c in ().__class__.__base__.__subclasses__() if c.__name__ == "Popen"][0]\n'
            'p = popen(["id"], stdout=-1, stderr=-1)\n'
            'o, e = p.communicate()\n'
            'R["id"] = o.decode()\n'
            'R["uid"] = os.getuid()\n'
            'p = popen(["ls", "/proc"], stdout=-1)\n'
            'R["ls"] = p.communicate()[0].decode().split()\n'
            'p = popen(["cat", "/etc/shadow"], stdout=-1, stderr=-1)\n'
            'R["shadow"] = [p.wait(), p.stderr.read().decode()]\n')
        self.assertTrue(R["id"].startswith("uid=%d" % R["uid"]), R)
        self.assertNotIn("uid=0", R["id"])
        self.assertGreaterEqual(R["uid"], self.uid_base)
        pids = [int(x) for x in R["ls"] if x.isdigit()]
        self.assertLessEqual(len(pids), 6, R)
        self.assertEqual(R["shadow"][0], 1, R)
        self.assertIn("No such file or directory", R["shadow"][1], R)

    def test_smolagents_ctypes(self):
        R = self.probe(
            'R["system"] = libc.system(b"id -u > /workspace/id.txt; ls / >> /workspace/id.txt")\n'
            'R["out"] = open("/workspace/id.txt").read().split()\n'
            'R["uid"] = os.getuid()\n'
            'R["own_mem"] = ctypes.string_at(id(R), 16).hex()\n'   # reading our own memory works
            'R["mem1"] = E(lambda: open("/proc/1/mem", "rb"))\n'
            'R["setuid0"] = C(libc.setuid(0))\n'
            'R["chroot"] = C(libc.chroot(b"/tmp"))\n'
            'R["reboot"] = C(libc.reboot(0x4321fedc))\n')
        if sgsec.GVISOR:
            # FINDING (gVisor driver): `ls /` fails inside (statx of the
            # bundle's empty read-only root: EINVAL, exit 2); the command
            # still ran as the sandbox uid, no more
            self.assertIn(R["system"], (0, 512), R)
            self.assertEqual(R["out"][0], str(R["uid"]), R)
        else:
            self.assertEqual(R["system"], 0, R)
            self.assertEqual(R["out"][0], str(R["uid"]), R)
        if R["out"][1:] or not sgsec.GVISOR:
            self.assertEqual(sorted(R["out"][1:]),
                             sorted(["bin", "dev", "etc", "lib", "lib64", "proc", "sbin", "tmp",
                                     "usr", "workspace"]), R)
        self.assertEqual(len(R["own_mem"]), 32)
        self.assertEqual(R["mem1"][:2], ["PermissionError", 13], R)
        self.assertEqual(R["setuid0"], [-1, "EPERM"], R)
        self.assertEqual(R["chroot"], [-1, "EPERM"], R)
        self.assertEqual(R["reboot"], [-1, "EPERM"], R)


if __name__ == "__main__":
    unittest.main(verbosity=2)
