#!/usr/bin/python3
"""Request strings at the edge (issue 13, points 5 and 6), through a real
gateway + host.

Table: every string field of every public request is sent, as raw wire
bytes (a proto3 client cannot even encode invalid UTF-8), with a good value
followed by NUL + junk, with invalid UTF-8, and one byte past its limit.
Each must be INVALID_ARGUMENT naming the field, without the bad bytes in
the message, and must not act: the sandbox named by "<id>\\0junk" is still
alive, "alice\\0evil" creates nothing for alice, "a.txt\\0../../x" writes no
a.txt. The host refuses the same when called directly. The environment's
size and entry count are limited by the policy (INVALID_ARGUMENT naming the
limit), and a 200 KB environment is INVALID_ARGUMENT, not UNAVAILABLE.
"""
import os
import sys
import unittest
import uuid

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtenancy as sg  # noqa: E402

C = grpc.StatusCode
KA, KB, KW = "st-capped-key-1", "st-default-key-2", "st-wide-key-3"

POLICY = """version: 1
templates:
  - name: code-interpreter
tenants:
  - id: capped
    api_keys: [%s]
    templates: [code-interpreter]
    limits: {env_bytes: 4KiB, env_entries: 8}
    quotas: {rate_per_s: 10000, rate_burst: 10000}
  - id: dflt
    api_keys: [%s]
    templates: [code-interpreter]
    quotas: {rate_per_s: 10000, rate_burst: 10000}
  - id: wide
    api_keys: [%s]
    templates: [code-interpreter]
    limits: {env_bytes: 128KiB}
    quotas: {rate_per_s: 10000, rate_burst: 10000}
""" % (sg.key_hash(KA), sg.key_hash(KB), sg.key_hash(KW))

S = {}


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def ld(field, data):
    """One length-delimited field: appended to a message it adds (or, for
    a singular field, replaces) that field."""
    if isinstance(data, str):
        data = data.encode()
    return varint(field << 3 | 2) + varint(len(data)) + data


def setUpModule():
    S["tmp"] = tmp = sg.new_tmp("sandgate-tenancy-strings-")
    unittest.addModuleCleanup(sg.remove_tmp, tmp)
    S["d"] = d = sg.Daemons(tmp, POLICY)
    unittest.addModuleCleanup(d.stop)
    d.start()
    S["api"] = api = sg.Api(tmp, d.addr)
    unittest.addModuleCleanup(api.close)
    with open(d.path("host.port")) as f:
        S["host_addr"] = "127.0.0.1:" + f.read().strip()
    S["hostch"] = grpc.insecure_channel(S["host_addr"])
    unittest.addModuleCleanup(S["hostch"].close)
    # the same policy on a host with no warm pool (the zygote's CREATE
    # carries the env instead of ACTIVATE)
    S["d0"] = d0 = sg.Daemons(tmp, POLICY, env={"SANDGATE_POOL_SIZE": "0"}, name="nopool")
    unittest.addModuleCleanup(d0.stop)
    d0.start()
    S["api0"] = sg.Api(tmp, d0.addr)
    unittest.addModuleCleanup(S["api0"].close)
    S["sb"] = api.create(KB, "u1", "strings-" + uuid.uuid4().hex[:6])
    unittest.addModuleCleanup(lambda: api.status("KillSandbox", api.pb.KillSandboxRequest(
        sandbox_id=S["sb"].sandbox_id, user_id="u1"), KB))


def raw_call(channel, method, data, key, stream=False):
    """(code, details) of sending data as the request bytes."""
    md = [("authorization", "Bearer " + key)] if key else []
    try:
        if stream:
            list(channel.unary_stream(method)(data, metadata=md, timeout=60))
        else:
            channel.unary_unary(method)(data, metadata=md, timeout=60)
        return C.OK, ""
    except grpc.RpcError as e:
        return e.code(), e.details() or ""


class Strings(unittest.TestCase):
    def setUp(self):
        self.api = S["api"]
        self.pb = self.api.pb
        self.sid = S["sb"].sandbox_id

    def pub(self, rpc, data, key=KB):
        return raw_call(self.api.channel, "/sandgate.v1.Sandboxes/" + rpc, data, key,
                        stream=rpc in ("RunCode", "Exec", "DownloadFile", "WatchFiles"))

    def alive(self):
        code, _, _, _ = self.api.status("GetSandbox", self.pb.GetSandboxRequest(
            sandbox_id=self.sid, user_id="u1"), KB)
        return code == C.OK

    def requests(self):
        """(rpc, base message, {field: (wire-bytes maker, shown name, good value, limit)}).
        The base message is valid; the maker appends the field."""
        pb, sid, task = self.pb, self.sid, "t-" + uuid.uuid4().hex[:6]
        plain = lambda n: lambda v: ld(n, v)  # noqa: E731
        user = {"user_id": (plain(2), "user_id", "u1", 127)}
        ref = dict({"sandbox_id": (plain(1), "sandbox_id", sid, 79)}, **user)
        return [
            ("CreateSandbox", pb.CreateSandboxRequest(template=sg.TEMPLATE, user_id="u1",
                                                      task_id=task), {
                "template": (plain(1), "template", sg.TEMPLATE, 127),
                "user_id": (plain(2), "user_id", "u1", 127),
                "task_id": (plain(3), "task_id", task, 127),
                "env key": (lambda v: ld(5, ld(1, v) + ld(2, "v")), "env key #0", "A", 128),
                "env value": (lambda v: ld(5, ld(1, "A") + ld(2, v)), 'env["A"]', "a", None),
                "egress host": (lambda v: ld(6, ld(1, v)), "egress[0].host", "example.com",
                                253),
                "secrets": (plain(7), "secrets[0]", "nope", 127),
                "user_token": (plain(8), "user_token", "x", 1023),
                "metadata key": (lambda v: ld(9, ld(1, v) + ld(2, "v")), "metadata key #0", "k",
                                 63),
                "metadata value": (lambda v: ld(9, ld(1, "k") + ld(2, v)), 'metadata["k"]', "v",
                                   255)}),
            ("GetSandbox", pb.GetSandboxRequest(sandbox_id=sid, user_id="u1"), ref),
            ("ListSandboxes", pb.ListSandboxesRequest(user_id="u1"),
             {"user_id": (plain(1), "user_id", "u1", 127),
              "metadata key": (lambda v: ld(2, ld(1, v) + ld(2, "v")), "metadata key #0", "k",
                               63),
              "metadata value": (lambda v: ld(2, ld(1, "k") + ld(2, v)), 'metadata["k"]', "v",
                                 255),
              "page_token": (plain(4), "page_token", "sgp1.abc", 255)}),
            ("ExtendSandbox", pb.ExtendSandboxRequest(sandbox_id=sid, user_id="u1",
                                                      ttl_seconds=300), ref),
            ("CreateContext", pb.CreateContextRequest(sandbox_id=sid, user_id="u1"),
             dict({"language": (plain(3), "language", "python", 32)}, **ref)),
            # context management (issue 17.5)
            ("ListContexts", pb.ListContextsRequest(sandbox_id=sid, user_id="u1"), ref),
            ("RestartContext", pb.RestartContextRequest(sandbox_id=sid, user_id="u1",
                                                        context_id="nope"),
             dict({"context_id": (plain(3), "context_id", "nope", 127)}, **ref)),
            ("DeleteContext", pb.DeleteContextRequest(sandbox_id=sid, user_id="u1",
                                                      context_id="nope"),
             dict({"context_id": (plain(3), "context_id", "nope", 127)}, **ref)),
            ("RunCode", pb.RunCodeRequest(sandbox_id=sid, user_id="u1", code="1"),
             dict({"context_id": (plain(3), "context_id", "default", 127),
                   "code": (plain(4), "code", "print(1)", None)}, **ref)),
            ("Exec", pb.ExecRequest(sandbox_id=sid, user_id="u1", command="true"),
             dict({"command": (plain(3), "command", "echo hi", None)}, **ref)),
            ("WriteFile", pb.WriteFileRequest(sandbox_id=sid, user_id="u1", path="w.txt",
                                              data=b"x"),
             dict({"path": (plain(3), "path", "w.txt", 4095)}, **ref)),
            ("ReadFile", pb.ReadFileRequest(sandbox_id=sid, user_id="u1", path="w.txt"),
             dict({"path": (plain(3), "path", "w.txt", 4095)}, **ref)),
            # the workspace file calls (issue 17.3)
            ("ListFiles", pb.ListFilesRequest(sandbox_id=sid, user_id="u1"),
             dict({"path": (plain(3), "path", "d", 4095)}, **ref)),
            ("StatFile", pb.StatFileRequest(sandbox_id=sid, user_id="u1"),
             dict({"path": (plain(3), "path", "w.txt", 4095)}, **ref)),
            ("MakeDir", pb.MakeDirRequest(sandbox_id=sid, user_id="u1", path="d"),
             dict({"path": (plain(3), "path", "d", 4095)}, **ref)),
            ("RemoveFile", pb.RemoveFileRequest(sandbox_id=sid, user_id="u1", path="zz"),
             dict({"path": (plain(3), "path", "zz", 4095)}, **ref)),
            ("RenameFile", pb.RenameFileRequest(sandbox_id=sid, user_id="u1", from_path="zz",
                                                to_path="zy"),
             dict({"from_path": (plain(3), "from_path", "zz", 4095),
                   "to_path": (plain(4), "to_path", "zy", 4095)}, **ref)),
            ("DownloadFile", pb.DownloadFileRequest(sandbox_id=sid, user_id="u1", path="w.txt"),
             dict({"path": (plain(3), "path", "w.txt", 4095)}, **ref)),
            ("WatchFiles", pb.WatchFilesRequest(sandbox_id=sid, user_id="u1"),
             dict({"path": (plain(3), "path", "d", 4095)}, **ref)),
            # KillSandbox last: if a bad id got through, the sandbox would be gone
            ("KillSandbox", pb.KillSandboxRequest(sandbox_id=sid, user_id="u1"), ref),
        ]

    def test_every_field_of_every_request(self):
        n = 0
        for rpc, base, fields in self.requests():
            head = base.SerializeToString()
            for name, (make, shown, good, limit) in fields.items():
                vals = [("NUL", good.encode() + b"\0junk", "contains a NUL byte"),
                        ("invalid UTF-8", good.encode() + b"\xff\xfe", "not valid UTF-8"),
                        ("overlong", good.encode() + b"\xc0\xaf", "not valid UTF-8")]
                if limit:
                    ch = b"A" if name in ("env key", "metadata key") else b"a"
                    vals.append(("too long", ch * (limit + 1),
                                 "is %d bytes; the limit is %d" % (limit + 1, limit)))
                for what, v, want in vals:
                    with self.subTest(rpc=rpc, field=name, value=what):
                        code, details = self.pub(rpc, head + make(v))
                        self.assertEqual(code, C.INVALID_ARGUMENT, details)
                        self.assertEqual(details, "%s: %s" % (shown, want))
                        self.assertNotIn("junk", details)
                        n += 1
            self.assertTrue(self.alive(), "sandbox gone after %s" % rpc)
        sys.stderr.write("\n%d field cases refused\n" % n)

    def upload(self, msgs, key=KB):
        """(code, details) of an UploadFile whose messages are raw bytes."""
        try:
            self.api.channel.stream_unary("/sandgate.v1.Sandboxes/UploadFile")(
                iter(msgs), metadata=[("authorization", "Bearer " + key)], timeout=60)
            return C.OK, ""
        except grpc.RpcError as e:
            return e.code(), e.details() or ""

    def test_upload_fields(self):
        # the client-streaming call: every string of its first and later messages
        pb, sid = self.pb, self.sid
        head = pb.UploadFileRequest(user_id="u1", data=b"x").SerializeToString()
        good = ld(1, sid) + ld(3, "up.txt")
        for field, make, shown in (("sandbox_id", lambda v: ld(1, v) + ld(3, "up.txt"),
                                    "sandbox_id"),
                                   ("user_id", lambda v: ld(1, sid) + ld(3, "up.txt") + ld(2, v),
                                    "user_id"),
                                   ("path", lambda v: ld(1, sid) + ld(3, v), "path")):
            for what, v, want in (("NUL", b"up\0junk", "contains a NUL byte"),
                                  ("invalid UTF-8", b"up\xff", "not valid UTF-8")):
                with self.subTest(field=field, value=what, message="first"):
                    code, details = self.upload([head + make(v)])
                    self.assertEqual((code, details), (C.INVALID_ARGUMENT,
                                                       "%s: %s" % (shown, want)))
                with self.subTest(field=field, value=what, message="later"):
                    code, details = self.upload([head + good, make(v)])
                    self.assertEqual(code, C.INVALID_ARGUMENT, details)
                    self.assertTrue(details.startswith(shown + ": "), details)
        # later messages carry data only
        code, details = self.upload([head + good, pb.UploadFileRequest(
            path="other.txt", data=b"y").SerializeToString()])
        self.assertEqual(code, C.INVALID_ARGUMENT)
        self.assertTrue(details.startswith("path: set on a later message"), details)
        # the file the refused calls named was never written
        code, _, _, _ = self.api.status("ReadFile", pb.ReadFileRequest(
            sandbox_id=sid, user_id="u1", path="up"), KB)
        self.assertEqual(code, C.NOT_FOUND)

    def test_ranges_of_file_fields(self):
        pb, sid = self.pb, self.sid
        for rpc, req, want in (
                ("ListFiles", pb.ListFilesRequest(sandbox_id=sid, user_id="u1",
                                                  max_entries=10001),
                 "max_entries: 10001; at most 10000"),
                ("MakeDir", pb.MakeDirRequest(sandbox_id=sid, user_id="u1", path="d",
                                              mode=0o1000), "mode: 01000; at most 0777"),
                ("DownloadFile", pb.DownloadFileRequest(sandbox_id=sid, user_id="u1",
                                                        path="w.txt", chunk_bytes=(4 << 20) + 1),
                 "chunk_bytes: 4194305; at most 4194304")):
            with self.subTest(rpc=rpc):
                code, details = self.pub(rpc, req.SerializeToString())
                self.assertEqual((code, details), (C.INVALID_ARGUMENT, want))
        code, details = self.upload([pb.UploadFileRequest(sandbox_id=sid, user_id="u1",
                                                          path="m.txt", mode=0o1000)
                                     .SerializeToString()])
        self.assertEqual((code, details), (C.INVALID_ARGUMENT, "mode: 01000; at most 0777"))
        big = pb.UploadFileRequest(data=b"z" * ((4 << 20) + 1)).SerializeToString()
        code, details = self.upload([pb.UploadFileRequest(sandbox_id=sid, user_id="u1",
                                                          path="m.txt").SerializeToString(), big])
        self.assertEqual((code, details),
                         (C.INVALID_ARGUMENT, "data: 4194305 bytes in one message; at most "
                                              "4194304"))

    def test_nul_does_not_act(self):
        # "<id>\0junk" would kill the real sandbox
        code, details = self.pub("KillSandbox", self.pb.KillSandboxRequest(
            user_id="u1").SerializeToString() + ld(1, self.sid + "\0junk"))
        self.assertEqual(code, C.INVALID_ARGUMENT)
        self.assertTrue(self.alive())
        # "alice\0evil" would be alice; "T\0a" and "T\0b" would be one task
        before = len(self.api.list(KB, "alice"))
        for user, task in (("alice\0evil", "t1"), ("alice", "T\0a"), ("alice", "T\0b")):
            req = self.pb.CreateSandboxRequest(template=sg.TEMPLATE)
            code, details = self.pub("CreateSandbox", req.SerializeToString() +
                                     ld(2, user) + ld(3, task))
            self.assertEqual(code, C.INVALID_ARGUMENT, details)
        self.assertEqual(len(self.api.list(KB, "alice")), before)
        # "a.txt\0../../x" would write a.txt
        code, details = self.pub("WriteFile", self.pb.WriteFileRequest(
            sandbox_id=self.sid, user_id="u1", data=b"pwn").SerializeToString() +
            ld(3, "nul-a.txt\0../../x"))
        self.assertEqual((code, details), (C.INVALID_ARGUMENT, "path: contains a NUL byte"))
        code, _, _, _ = self.api.status("ReadFile", self.pb.ReadFileRequest(
            sandbox_id=self.sid, user_id="u1", path="nul-a.txt"), KB)
        self.assertEqual(code, C.NOT_FOUND)

    def test_invalid_utf8_user_creates_nothing(self):
        req = self.pb.CreateSandboxRequest(template=sg.TEMPLATE, task_id="utf8")
        code, details = self.pub("CreateSandbox", req.SerializeToString() + ld(2, b"al\xe9"))
        self.assertEqual((code, details), (C.INVALID_ARGUMENT, "user_id: not valid UTF-8"))
        # the same user, valid, has nothing: nothing was orphaned under a mangled name
        self.assertEqual(self.api.list(KB, "al\u00e9"), [])

    def test_good_strings_pass(self):
        # non-ASCII ids and env values, newlines, every field at its limit
        task = "t\u00e9-" + uuid.uuid4().hex[:6]
        env = {"PEM": "-----BEGIN-----\nabc\n-----END-----\n", "UNI": "caf\u00e9 \U0001F600",
               "L" * 128: "x"}
        sb = self.api.create(KB, "j\u00f6rg", task, env=env)
        self.addCleanup(self.api.kill, KB, "j\u00f6rg", sb.sandbox_id)
        out, _, err, _, _ = self.api.run(KB, "j\u00f6rg", sb.sandbox_id,
                                         "import os; print(os.environ['UNI'], "
                                         "os.environ['PEM'].count('\\n'))")
        self.assertIsNone(err)
        self.assertEqual(out.strip(), "caf\u00e9 \U0001F600 3")

    def test_env_limits_from_policy(self):
        # capped tenant: 8 variables, 4 KiB
        code, details, _, _ = self.api.status("CreateSandbox", self.pb.CreateSandboxRequest(
            template=sg.TEMPLATE, user_id="u", task_id="many",
            env={"V%d" % i: "x" for i in range(9)}), KA)
        self.assertEqual(code, C.INVALID_ARGUMENT)
        self.assertEqual(details, "env: 9 variables; the policy limit is 8 (limits.env_entries)")
        code, details, _, _ = self.api.status("CreateSandbox", self.pb.CreateSandboxRequest(
            template=sg.TEMPLATE, user_id="u", task_id="big", env={"BIG": "x" * 4094}), KA)
        self.assertEqual(code, C.INVALID_ARGUMENT)
        self.assertEqual(details, "env: 4097 bytes (names and values); the policy limit is "
                                  "4096 (limits.env_bytes)")
        # within both: created
        sb = self.api.create(KA, "u", "fits", env={"BIG": "x" * 4093})
        self.api.kill(KA, "u", sb.sandbox_id)

    def test_big_env_is_invalid_not_unavailable(self):
        # The default limit (64 KiB); before, this was UNAVAILABLE "could not
        # activate; retry" and burnt a warm sandbox on every try.
        for attempt in range(3):
            code, details, _, _ = self.api.status("CreateSandbox", self.pb.CreateSandboxRequest(
                template=sg.TEMPLATE, user_id="u", task_id="huge-%d" % attempt,
                env={"HUGE": "x" * 200000}), KB)
            self.assertEqual(code, C.INVALID_ARGUMENT, details)
            self.assertEqual(details, 'env["HUGE"]: is 200000 bytes; the limit is 131069')
        # over the policy's default (64 KiB), under the per-value ceiling
        code, details, _, _ = self.api.status("CreateSandbox", self.pb.CreateSandboxRequest(
            template=sg.TEMPLATE, user_id="u", task_id="big", env={"BIG": "x" * 100000}), KB)
        self.assertEqual(code, C.INVALID_ARGUMENT, details)
        self.assertEqual(details, "env: 100003 bytes (names and values); the policy limit is "
                                  "65536 (limits.env_bytes)")
        # at the default limit it works
        sb = self.api.create(KB, "u", "at-limit", env={"HUGE": "x" * (65536 - 4)})
        self.addCleanup(self.api.kill, KB, "u", sb.sandbox_id)
        out, _, err, _, _ = self.api.run(KB, "u", sb.sandbox_id,
                                         "import os; print(len(os.environ['HUGE']))")
        self.assertEqual(out.strip(), "65532")

    def test_env_at_the_ceiling_pool_on_and_off(self):
        # Before: ~200 KB was UNAVAILABLE "could not activate; retry" with the
        # pool and "Message too long" without; now the ceiling (128 KiB) fits
        # both ways and what cannot be carried is INVALID_ARGUMENT.
        for label, api in (("pool", self.api), ("no pool", S["api0"])):
            with self.subTest(host=label):
                # two variables filling the 128 KiB, then one as large as execve takes
                for env, want in (({"A": "x" * 65535, "B": "y" * 65535}, "65535 65535"),
                                  ({"BIG": "x" * (131070 - 3)}, "131067 0")):
                    sb = api.create(KW, "w", "ceil-" + uuid.uuid4().hex[:6], env=env)
                    out, _, err, _, _ = api.run(KW, "w", sb.sandbox_id, "import os; e = os.environ; "
                                                "print(len(e.get('A', e.get('BIG'))), "
                                                "len(e.get('B', '')))")
                    xout, _, _, _ = api.exec(KW, "w", sb.sandbox_id, "printenv | wc -c")
                    api.kill(KW, "w", sb.sandbox_id)
                    self.assertIsNone(err)
                    self.assertEqual(out.strip(), want)
                    self.assertGreater(int(xout.strip()), 131000)
                code, details, _, _ = api.status("CreateSandbox", self.pb.CreateSandboxRequest(
                    template=sg.TEMPLATE, user_id="w", task_id="one",
                    env={"BIG": "x" * (131071 - 3)}), KW)
                self.assertEqual((code, details), (C.INVALID_ARGUMENT,
                                 'env["BIG"]: name and value are 131071 bytes; the limit for '
                                 'one variable is 131070'))
                # 100 KiB of control characters encodes to 600 KiB: the host's bound
                code, details, _, _ = api.status("CreateSandbox", self.pb.CreateSandboxRequest(
                    template=sg.TEMPLATE, user_id="w", task_id="ctrl",
                    env={"C": "\x01" * (100 << 10)}), KW)
                self.assertEqual(code, C.INVALID_ARGUMENT, details)
                self.assertIn("once encoded", details)

    def test_health_and_reflection(self):
        # The standard services on both daemons check their strings too: a
        # health check for "<service>\0junk" is not one for <service>, and
        # reflection (which echoes the request) refuses invalid UTF-8.
        for label, ch in (("gateway", self.api.channel), ("host", S["hostch"])):
            with self.subTest(daemon=label):
                code, details = raw_call(ch, "/grpc.health.v1.Health/Check",
                                         ld(1, "sandgate.v1.Sandboxes\0junk"), None)
                self.assertEqual((code, details),
                                 (C.INVALID_ARGUMENT, "service: contains a NUL byte"))
                try:
                    list(ch.stream_stream("/grpc.reflection.v1.ServerReflection/"
                                          "ServerReflectionInfo")(
                        iter([ld(1, b"h\xff") + ld(7, "")]), timeout=30))
                    code, details = C.OK, ""
                except grpc.RpcError as e:
                    code, details = e.code(), e.details()
                self.assertEqual((code, details), (C.INVALID_ARGUMENT, "host: not valid UTF-8"))

    def test_host_validates_again(self):
        ch = S["hostch"]
        call = lambda m, d: raw_call(ch, "/sandgate.v1.Host/" + m, d, None)  # noqa: E731
        # KillSandbox on "<id>\0junk", straight to the host
        code, details = call("KillSandbox", ld(1, self.sid + "\0junk"))
        self.assertEqual((code, details), (C.INVALID_ARGUMENT, "sandbox_id: contains a NUL byte"))
        self.assertTrue(self.alive())
        # a create whose owner is "alice\0evil"
        inner = self.pb.CreateSandboxRequest(template=sg.TEMPLATE, user_id="alice",
                                             task_id="h").SerializeToString()
        owner = ld(1, "dflt") + ld(2, "alice\0evil") + ld(3, "h")
        code, details = call("CreateSandbox", ld(1, inner) + ld(2, owner))
        self.assertEqual((code, details),
                         (C.INVALID_ARGUMENT, "owner.user_id: contains a NUL byte"))
        # an env value with invalid UTF-8 inside the create
        inner_bad = inner + ld(5, ld(1, "A") + ld(2, b"\xff"))
        code, details = call("CreateSandbox", ld(1, inner_bad) + ld(2, ld(1, "dflt") +
                                                                    ld(2, "alice") + ld(3, "h")))
        self.assertEqual((code, details),
                         (C.INVALID_ARGUMENT, 'request.env["A"]: not valid UTF-8'))
        # a 200 KB env sent to the host directly: the host's own ceiling
        inner_big = inner + ld(5, ld(1, "A") + ld(2, "x" * 200000))
        code, details = call("CreateSandbox", ld(1, inner_big) + ld(2, ld(1, "dflt") +
                                                                    ld(2, "alice") + ld(3, "h")))
        self.assertEqual(code, C.INVALID_ARGUMENT, details)
        self.assertIn('request.env["A"]: is 200000 bytes', details)
        # RunCode on the sandbox with a NUL in its code
        run = self.pb.RunCodeRequest(sandbox_id=self.sid, user_id="u1").SerializeToString()
        code, details = raw_call(ch, "/sandgate.v1.Host/RunCode", run + ld(4, "1\0junk"), None,
                                 stream=True)
        self.assertEqual((code, details), (C.INVALID_ARGUMENT, "code: contains a NUL byte"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
