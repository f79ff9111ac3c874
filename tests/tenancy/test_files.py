#!/usr/bin/python3
"""Workspace files through the gateway (issue 17, point 3): ListFiles,
StatFile, MakeDir, RemoveFile, RenameFile, streamed UploadFile and
DownloadFile, WatchFiles.

A 64 MiB file goes up in 1 MiB chunks and comes back byte-exact, also
resumed from an offset on both sides; past the workspace quota (the
tenant's disk: 96MiB) an upload is RESOURCE_EXHAUSTED naming the limit,
whether it announced its size or not. A file the code writes (RunCode) is
seen by ListFiles, StatFile and a watch, and so is its deletion. A FIFO and
a socket the code makes are refused by every file call at once
(INVALID_ARGUMENT naming the path), never opened. Another tenant's sandbox
id answers every file call exactly like an id that never existed.
"""
import hashlib
import os
import queue
import sys
import threading
import time
import unittest
import uuid

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sgtenancy as sg  # noqa: E402

C = grpc.StatusCode
KA, KB = "fl-demo-key-1", "fl-other-key-2"
MiB = 1 << 20

POLICY = """version: 1
defaults:
  quotas: {sandboxes_per_tenant: 100, sandboxes_per_user: 50, concurrent_actions: 64,
           rate_per_s: 10000, rate_burst: 10000}
templates:
  - name: code-interpreter
tenants:
  - id: demo
    api_keys: [%s]
    templates: [code-interpreter]
    limits: {disk: 96MiB}
  - id: other
    api_keys: [%s]
    templates: [code-interpreter]
""" % (sg.key_hash(KA), sg.key_hash(KB))

S = {}


def setUpModule():
    S["tmp"] = tmp = sg.new_tmp("sandgate-tenancy-files-")
    unittest.addModuleCleanup(sg.remove_tmp, tmp)
    S["d"] = d = sg.Daemons(tmp, POLICY)
    unittest.addModuleCleanup(d.stop)
    d.start()
    S["api"] = api = sg.Api(tmp, d.addr, options=[("grpc.max_receive_message_length", 16 * MiB)])
    unittest.addModuleCleanup(api.close)
    S["sb"] = api.create(KA, "u1", "files-" + uuid.uuid4().hex[:6])
    S["other"] = api.create(KB, "u9", "files-other-" + uuid.uuid4().hex[:6])
    unittest.addModuleCleanup(lambda: api.status("KillSandbox", api.pb.KillSandboxRequest(
        sandbox_id=S["sb"].sandbox_id, user_id="u1"), KA))
    unittest.addModuleCleanup(lambda: api.status("KillSandbox", api.pb.KillSandboxRequest(
        sandbox_id=S["other"].sandbox_id, user_id="u9"), KB))


class Files(unittest.TestCase):
    def setUp(self):
        self.api = S["api"]
        self.pb = self.api.pb
        self.sid = S["sb"].sandbox_id

    # -- helpers --

    def upload(self, path, data, offset=0, chunk=MiB, size=0, key=KA, sid=None, timeout=120):
        pb, sid = self.pb, sid or self.sid

        def gen():
            first = True
            pos = 0
            while first or pos < len(data):
                piece = data[pos:pos + chunk]
                if first:
                    yield pb.UploadFileRequest(sandbox_id=sid, user_id="u1", path=path,
                                               offset=offset, size=size, data=piece)
                    first = False
                else:
                    yield pb.UploadFileRequest(data=piece)
                pos += len(piece)
        return self.api.stub.UploadFile(gen(), metadata=self.api.md(KA if key is None else key),
                                        timeout=timeout)

    def download(self, path, offset=0, length=0, chunk=0):
        chunks = self.api.call("DownloadFile", self.pb.DownloadFileRequest(
            sandbox_id=self.sid, user_id="u1", path=path, offset=offset, length=length,
            chunk_bytes=chunk), KA, timeout=120)
        self.assertTrue(chunks[-1].last)
        pos = offset
        for c in chunks:
            self.assertEqual(c.offset, pos)
            pos += len(c.data)
        return b"".join(c.data for c in chunks), chunks

    def st(self, method, req, key=KA, timeout=20):
        code, details, _, resp = self.api.status(method, req, key, timeout=timeout)
        return code, details, resp

    def run_code(self, code):
        out, err, error, _, _ = self.api.run(KA, "u1", self.sid, code)
        self.assertIsNone(error, err)
        return out

    def rm(self, path):
        self.st("RemoveFile", self.pb.RemoveFileRequest(sandbox_id=self.sid, user_id="u1",
                                                        path=path, recursive=True))

    # -- tests --

    def test_1_big_file_up_and_down(self):
        data = os.urandom(64 * MiB)
        t0 = time.monotonic()
        r = self.upload("big/blob.bin", data, size=len(data))
        up_s = time.monotonic() - t0
        self.assertEqual((r.size, r.bytes_written), (len(data), len(data)))
        t0 = time.monotonic()
        back, chunks = self.download("big/blob.bin")
        down_s = time.monotonic() - t0
        self.assertEqual(hashlib.sha256(back).digest(), hashlib.sha256(data).digest())
        self.assertEqual(len(chunks), 64)
        self.assertEqual(chunks[0].size, len(data))
        sys.stderr.write("\n64 MiB: upload %.2f s, download %.2f s (1 MiB chunks)\n"
                         % (up_s, down_s))
        # the code in the sandbox sees the same bytes
        out = self.run_code("import hashlib; print(hashlib.sha256(open('/workspace/big/blob.bin',"
                            "'rb').read()).hexdigest())")
        self.assertEqual(out.strip(), hashlib.sha256(data).hexdigest())
        # download resumed from an offset, and a range
        tail, _ = self.download("big/blob.bin", offset=50 * MiB + 7)
        self.assertEqual(tail, data[50 * MiB + 7:])
        mid, _ = self.download("big/blob.bin", offset=100, length=3 * MiB, chunk=4 * MiB)
        self.assertEqual(mid, data[100:100 + 3 * MiB])
        # past the end: INVALID_ARGUMENT naming offset
        code, details, _ = self.st("DownloadFile", self.pb.DownloadFileRequest(
            sandbox_id=self.sid, user_id="u1", path="big/blob.bin", offset=len(data) + 1))
        self.assertEqual(code, C.INVALID_ARGUMENT)
        self.assertTrue(details.startswith("offset: "), details)
        self.rm("big")

    def test_2_resumed_upload(self):
        data = os.urandom(9 * MiB + 123)
        cut = 5 * MiB + 17
        # the first attempt got cut off after `cut` bytes
        r = self.upload("res.bin", data[:cut])
        self.assertEqual(r.size, cut)
        # resume: from what the server has, writing the rest; garbage past
        # the offset (a partial chunk of the failed try) is cut away first
        self.upload("res.bin", b"junk" * 10, offset=cut)
        r = self.upload("res.bin", data[cut:], offset=cut, size=len(data))
        self.assertEqual((r.size, r.bytes_written), (len(data), len(data) - cut))
        back, _ = self.download("res.bin")
        self.assertEqual(back, data)
        # resuming past the end is refused, naming offset
        with self.assertRaises(grpc.RpcError) as cm:
            self.upload("res.bin", b"x", offset=len(data) + 1)
        self.assertEqual(cm.exception.code(), C.INVALID_ARGUMENT)
        self.assertTrue(cm.exception.details().startswith("offset: "), cm.exception.details())
        self.rm("res.bin")

    def test_3_quota(self):
        self.upload("q1.bin", os.urandom(64 * MiB), size=64 * MiB)
        # announced: refused before a byte is written
        with self.assertRaises(grpc.RpcError) as cm:
            self.upload("q2.bin", b"x" * MiB, size=40 * MiB)
        self.assertEqual(cm.exception.code(), C.RESOURCE_EXHAUSTED)
        self.assertIn("limits.disk_bytes", cm.exception.details())
        # not announced: refused by the chunk that does not fit
        with self.assertRaises(grpc.RpcError) as cm:
            self.upload("q3.bin", os.urandom(40 * MiB))
        self.assertEqual(cm.exception.code(), C.RESOURCE_EXHAUSTED)
        self.assertIn("limits.disk_bytes", cm.exception.details())
        self.assertIn("free of the workspace's", cm.exception.details())
        for p in ("q1.bin", "q2.bin", "q3.bin"):
            self.rm(p)
        # the space is back
        self.upload("q4.bin", os.urandom(60 * MiB), size=60 * MiB)
        self.rm("q4.bin")

    def watch(self, path="", recursive=True):
        it = self.api.stub.WatchFiles(self.pb.WatchFilesRequest(
            sandbox_id=self.sid, user_id="u1", path=path, recursive=recursive),
            metadata=self.api.md(KA), timeout=120)
        q = queue.Queue()

        def pump():
            try:
                for ev in it:
                    q.put(ev)
                q.put(("end", None))
            except grpc.RpcError as e:
                q.put(("error", e))
        threading.Thread(target=pump, daemon=True).start()
        first = q.get(timeout=20)
        self.assertEqual(first.type, self.pb.FILE_EVENT_READY, first)
        return it, q

    def events_until(self, q, pred, timeout=10):
        seen = []
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                ev = q.get(timeout=max(0.01, end - time.monotonic()))
            except queue.Empty:
                break
            seen.append(ev)
            if isinstance(ev, tuple) or pred(ev):
                return seen
        return seen

    def test_4_code_writes_list_stat_watch_see_it(self):
        pb = self.pb
        it, q = self.watch()
        self.run_code("import os; os.makedirs('/workspace/w/deep', exist_ok=True)\n"
                      "open('/workspace/w/deep/out.txt', 'w').write('hello' * 100)")
        # makedirs + write can all happen before the watch on w/deep exists:
        # its contents then come as CREATE from the scan of the new directory
        seen = self.events_until(q, lambda e: e.path == "w/deep/out.txt")
        kinds = [(e.type, e.path) for e in seen if not isinstance(e, tuple)]
        self.assertIn((pb.FILE_EVENT_CREATE, "w"), kinds)
        self.assertIn((pb.FILE_EVENT_CREATE, "w/deep/out.txt"), kinds)
        # with the watch in place, a write is a MODIFY
        self.run_code("open('/workspace/w/deep/out.txt', 'w').write('hello' * 100)")
        seen = self.events_until(q, lambda e: e.type == pb.FILE_EVENT_MODIFY and
                                 e.path == "w/deep/out.txt")
        self.assertEqual((seen[-1].type, seen[-1].path), (pb.FILE_EVENT_MODIFY, "w/deep/out.txt"))
        # ListFiles: one level, recursive, capped
        code, details, r = self.st("ListFiles", pb.ListFilesRequest(sandbox_id=self.sid,
                                                                   user_id="u1", path="w"))
        self.assertEqual(code, C.OK, details)
        self.assertEqual([(e.path, e.type) for e in r.entries],
                         [("w/deep", pb.FILE_TYPE_DIRECTORY)])
        code, details, r = self.st("ListFiles", pb.ListFilesRequest(
            sandbox_id=self.sid, user_id="u1", path="/workspace/w", recursive=True))
        self.assertEqual([e.path for e in r.entries], ["w/deep", "w/deep/out.txt"])
        f = r.entries[1]
        self.assertEqual((f.name, f.type, f.size, f.mode & 0o777),
                         ("out.txt", pb.FILE_TYPE_FILE, 500, 0o644))
        self.assertLess(abs(f.mtime / 1000 - time.time()), 60)
        self.assertFalse(r.truncated)
        code, details, r = self.st("ListFiles", pb.ListFilesRequest(
            sandbox_id=self.sid, user_id="u1", recursive=True, max_entries=1))
        self.assertEqual((len(r.entries), r.truncated), (1, True))
        code, details, r = self.st("StatFile", pb.StatFileRequest(
            sandbox_id=self.sid, user_id="u1", path="w/deep/out.txt"))
        self.assertEqual((code, r.size, r.type), (C.OK, 500, pb.FILE_TYPE_FILE))
        code, details, r = self.st("StatFile", pb.StatFileRequest(sandbox_id=self.sid,
                                                                  user_id="u1"))
        self.assertEqual((code, r.type, r.path), (C.OK, pb.FILE_TYPE_DIRECTORY, ""))
        # the code deletes it: the watch, ListFiles and StatFile see that
        self.run_code("import os; os.remove('/workspace/w/deep/out.txt')")
        seen = self.events_until(q, lambda e: e.type == pb.FILE_EVENT_DELETE)
        self.assertEqual((seen[-1].type, seen[-1].path),
                         (pb.FILE_EVENT_DELETE, "w/deep/out.txt"))
        code, details, r = self.st("ListFiles", pb.ListFilesRequest(
            sandbox_id=self.sid, user_id="u1", path="w", recursive=True))
        self.assertEqual([e.path for e in r.entries], ["w/deep"])
        code, details, _ = self.st("StatFile", pb.StatFileRequest(
            sandbox_id=self.sid, user_id="u1", path="w/deep/out.txt"))
        self.assertEqual(code, C.NOT_FOUND)
        # a rename by the code is one RENAME event
        self.run_code("open('/workspace/w/a.txt','w').write('x'); import os; "
                      "os.rename('/workspace/w/a.txt', '/workspace/w/deep/b.txt')")
        seen = self.events_until(q, lambda e: e.type == pb.FILE_EVENT_RENAME)
        self.assertEqual((seen[-1].from_path, seen[-1].path), ("w/a.txt", "w/deep/b.txt"))
        it.cancel()
        self.rm("w")

    def test_5_mkdir_rename_remove(self):
        pb, sid = self.pb, self.sid
        mk = lambda p, parents=False, mode=0: self.st("MakeDir", pb.MakeDirRequest(  # noqa: E731
            sandbox_id=sid, user_id="u1", path=p, parents=parents, mode=mode))
        code, details, r = mk("m/a/b", parents=True)
        self.assertEqual((code, r.path, r.type), (C.OK, "m/a/b", pb.FILE_TYPE_DIRECTORY))
        self.assertEqual(mk("m/a/b", parents=True)[0], C.OK)   # mkdir -p again: fine
        self.assertEqual(mk("m/a/b")[0], C.ALREADY_EXISTS)
        self.assertEqual(mk("m/x/y")[0], C.NOT_FOUND)
        code, details, r = mk("m/priv", mode=0o700)
        self.assertEqual((code, r.mode & 0o777), (C.OK, 0o700))
        self.api.call("WriteFile", pb.WriteFileRequest(sandbox_id=sid, user_id="u1",
                                                       path="m/f1", data=b"one"), KA)
        self.api.call("WriteFile", pb.WriteFileRequest(sandbox_id=sid, user_id="u1",
                                                       path="m/f2", data=b"two"), KA)
        self.assertEqual(mk("m/f1", parents=True)[0], C.ALREADY_EXISTS)
        mv = lambda a, b, ow=False: self.st("RenameFile", pb.RenameFileRequest(  # noqa: E731
            sandbox_id=sid, user_id="u1", from_path=a, to_path=b, overwrite=ow))
        self.assertEqual(mv("m/f1", "m/f2")[0], C.ALREADY_EXISTS)
        code, details, r = mv("m/f1", "m/f2", True)
        self.assertEqual((code, r.path, r.size), (C.OK, "m/f2", 3))
        self.assertEqual(self.api.call("ReadFile", pb.ReadFileRequest(
            sandbox_id=sid, user_id="u1", path="m/f2"), KA).data, b"one")
        # a file never replaces a directory, nor a directory a file
        code, details, _ = mv("m/f2", "m/a", True)
        self.assertEqual(code, C.FAILED_PRECONDITION, details)
        code, details, _ = mv("m/a", "m/f2", True)
        self.assertEqual(code, C.FAILED_PRECONDITION, details)
        # a directory replaces only an empty one
        self.assertEqual(mv("m/priv", "m/a", True)[0], C.FAILED_PRECONDITION)
        self.assertEqual(mv("m/a", "m/priv", True)[0], C.OK)
        self.assertEqual(mv("m/nope", "m/z")[0], C.NOT_FOUND)
        self.assertEqual(mv("m/priv", "../escape")[0], C.INVALID_ARGUMENT)
        rm = lambda p, rec=False: self.st("RemoveFile", pb.RemoveFileRequest(  # noqa: E731
            sandbox_id=sid, user_id="u1", path=p, recursive=rec))
        code, details, _ = rm("m")
        self.assertEqual(code, C.FAILED_PRECONDITION)
        self.assertIn("recursive", details)
        code, details, r = rm("m/f2")
        self.assertEqual((code, r.removed), (C.OK, 1))
        code, details, r = rm("m", True)
        self.assertEqual((code, r.removed), (C.OK, 3))   # m, m/priv, m/priv/b
        self.assertEqual(rm("m")[0], C.NOT_FOUND)
        self.assertEqual(rm("")[0], C.INVALID_ARGUMENT)   # never the workspace itself

    def test_6_special_files_refused_without_blocking(self):
        pb, sid = self.pb, self.sid
        self.run_code("import os, socket\nos.makedirs('/workspace/sp', exist_ok=True)\n"
                      "os.mkfifo('/workspace/sp/p')\n"
                      "s = socket.socket(socket.AF_UNIX); s.bind('/workspace/sp/s')")
        for path in ("sp/p", "sp/s"):
            calls = [
                ("StatFile", pb.StatFileRequest(sandbox_id=sid, user_id="u1", path=path)),
                ("ListFiles", pb.ListFilesRequest(sandbox_id=sid, user_id="u1", path=path)),
                ("ReadFile", pb.ReadFileRequest(sandbox_id=sid, user_id="u1", path=path)),
                ("WriteFile", pb.WriteFileRequest(sandbox_id=sid, user_id="u1", path=path,
                                                  data=b"x")),
                ("DownloadFile", pb.DownloadFileRequest(sandbox_id=sid, user_id="u1",
                                                        path=path)),
                ("RenameFile", pb.RenameFileRequest(sandbox_id=sid, user_id="u1",
                                                    from_path=path, to_path="sp/q")),
                ("MakeDir", pb.MakeDirRequest(sandbox_id=sid, user_id="u1", path=path,
                                              parents=True)),
            ]
            for method, req in calls:
                with self.subTest(method=method, path=path):
                    t0 = time.monotonic()
                    code, details, _ = self.st(method, req, timeout=10)
                    self.assertLess(time.monotonic() - t0, 5)
                    want = C.ALREADY_EXISTS if method == "MakeDir" else C.INVALID_ARGUMENT
                    self.assertEqual(code, want, details)
                    self.assertIn(path, details)
            with self.subTest(method="UploadFile", path=path):
                with self.assertRaises(grpc.RpcError) as cm:
                    self.upload(path, b"x", timeout=10)
                self.assertEqual(cm.exception.code(), C.INVALID_ARGUMENT)
                self.assertIn("not a regular file", cm.exception.details())
            with self.subTest(method="WatchFiles", path=path):
                with self.assertRaises(grpc.RpcError) as cm:
                    list(self.api.stub.WatchFiles(pb.WatchFilesRequest(
                        sandbox_id=sid, user_id="u1", path=path), metadata=self.api.md(KA),
                        timeout=10))
                self.assertEqual(cm.exception.code(), C.INVALID_ARGUMENT)
                self.assertIn(path, cm.exception.details())
        # the listing of their directory shows them, typed
        code, details, r = self.st("ListFiles", pb.ListFilesRequest(sandbox_id=sid, user_id="u1",
                                                                   path="sp"))
        self.assertEqual([(e.name, e.type) for e in r.entries],
                         [("p", pb.FILE_TYPE_FIFO), ("s", pb.FILE_TYPE_SOCKET)])
        # the FIFO was never opened: a writer that opens it non-blocking finds no reader
        out = self.run_code("import os, errno\ntry:\n    os.open('/workspace/sp/p', "
                            "os.O_WRONLY | os.O_NONBLOCK); print('reader')\n"
                            "except OSError as e: print(errno.errorcode[e.errno])")
        self.assertEqual(out.strip(), "ENXIO")
        # RemoveFile removes them (unlink never opens)
        code, details, r = self.st("RemoveFile", pb.RemoveFileRequest(
            sandbox_id=sid, user_id="u1", path="sp", recursive=True))
        self.assertEqual((code, r.removed), (C.OK, 3), details)

    def test_7_paths_stay_inside(self):
        pb, sid = self.pb, self.sid
        self.run_code("import os; os.symlink('/', '/workspace/root-link'); "
                      "os.symlink('/etc', '/workspace/etc-link')")
        for path in ("../x", "/etc/passwd", "root-link/etc/passwd", "etc-link", "etc-link/x"):
            for method, req in (
                    ("StatFile", pb.StatFileRequest(sandbox_id=sid, user_id="u1", path=path)),
                    ("ListFiles", pb.ListFilesRequest(sandbox_id=sid, user_id="u1", path=path)),
                    ("MakeDir", pb.MakeDirRequest(sandbox_id=sid, user_id="u1", path=path + "/d",
                                                  parents=True)),
                    ("DownloadFile", pb.DownloadFileRequest(sandbox_id=sid, user_id="u1",
                                                            path=path))):
                with self.subTest(method=method, path=path):
                    code, details, _ = self.st(method, req)
                    # etc-link itself is a symlink in the workspace: StatFile shows it
                    if method == "StatFile" and path == "etc-link":
                        self.assertEqual(code, C.OK)
                        continue
                    self.assertIn(code, (C.INVALID_ARGUMENT,), details)
        self.assertFalse(os.path.exists("/etc/d"))
        self.rm("root-link")
        self.rm("etc-link")

    def test_8_other_tenant_is_never_existed(self):
        pb = self.pb
        other = S["other"].sandbox_id
        fake = other[:-6] + ("000000" if not other.endswith("000000") else "111111")

        def every(sid):
            out = []
            for method, req in (
                    ("ListFiles", pb.ListFilesRequest(sandbox_id=sid, user_id="u1")),
                    ("StatFile", pb.StatFileRequest(sandbox_id=sid, user_id="u1", path="a")),
                    ("MakeDir", pb.MakeDirRequest(sandbox_id=sid, user_id="u1", path="a")),
                    ("RemoveFile", pb.RemoveFileRequest(sandbox_id=sid, user_id="u1", path="a")),
                    ("RenameFile", pb.RenameFileRequest(sandbox_id=sid, user_id="u1",
                                                        from_path="a", to_path="b")),
                    ("DownloadFile", pb.DownloadFileRequest(sandbox_id=sid, user_id="u1",
                                                            path="a"))):
                code, details, info, _ = self.api.status(method, req, KA)
                out.append((method, code, details, info))
            try:
                self.upload("a", b"x", sid=sid)
                out.append(("UploadFile", C.OK, "", None))
            except grpc.RpcError as e:
                out.append(("UploadFile", e.code(), e.details(), self.api.error_info(e)))
            try:
                list(self.api.stub.WatchFiles(pb.WatchFilesRequest(sandbox_id=sid, user_id="u1"),
                                              metadata=self.api.md(KA), timeout=10))
                out.append(("WatchFiles", C.OK, "", None))
            except grpc.RpcError as e:
                out.append(("WatchFiles", e.code(), e.details(), self.api.error_info(e)))
            return out
        theirs, never = every(other), every(fake)
        self.assertEqual(theirs, never)
        for method, code, _, _ in theirs:
            self.assertEqual(code, C.NOT_FOUND, method)
        # and nothing happened to theirs
        r = self.api.call("ListFiles", pb.ListFilesRequest(sandbox_id=other, user_id="u9"), KB)
        self.assertEqual(list(r.entries), [])

    def test_9_watch_ends_with_the_sandbox(self):
        pb = self.pb
        sb = self.api.create(KA, "u1", "watch-end-" + uuid.uuid4().hex[:6])
        it = self.api.stub.WatchFiles(pb.WatchFilesRequest(sandbox_id=sb.sandbox_id,
                                                           user_id="u1", recursive=True),
                                      metadata=self.api.md(KA), timeout=60)
        first = next(it)
        self.assertEqual(first.type, pb.FILE_EVENT_READY)
        t0 = time.monotonic()
        self.api.kill(KA, "u1", sb.sandbox_id)
        rest = list(it)   # ends OK, not at the deadline
        self.assertLess(time.monotonic() - t0, 10)
        self.assertTrue(all(e.type != pb.FILE_EVENT_READY for e in rest))


if __name__ == "__main__":
    unittest.main(verbosity=2)
