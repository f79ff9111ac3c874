#!/usr/bin/python3
"""sandgate-cli's workspace, context and label commands against a real
host + gateway (deploy/local/run.sh, ephemeral ports).

files: upload (a 3 MiB file from disk, in several messages, and from stdin),
download (to a file and to stdout, byte-exact, --offset/--length), ls
(--recursive), stat, mkdir (--parents), mv (--overwrite), rm (--recursive)
and watch (--count: a file created while it watches); contexts: list,
restart, delete; labels: create --label, list --label filters, --page-size
pages with next_page_token on stderr, list walking every page. Errors exit
1 with the gRPC status on stderr; bad usage exits 2.

Env: SANDGATE_BUILD. Run with /usr/bin/python3 as root.
"""
import os
import subprocess
import sys
import time
import unittest
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tenancy"))
import sgtenancy as sg  # noqa: E402

KEY = "cli-demo-key-1"
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
""" % sg.key_hash(KEY)
S = {}


def setUpModule():
    S["tmp"] = tmp = sg.new_tmp("sandgate-cli-")
    unittest.addModuleCleanup(sg.remove_tmp, tmp)
    S["d"] = d = sg.Daemons(tmp, POLICY)
    unittest.addModuleCleanup(d.stop)
    d.start()
    S["user"] = "cli-" + uuid.uuid4().hex[:6]
    S["sid"] = cli("create", "--task", "files").stdout.strip()
    unittest.addModuleCleanup(lambda: cli("kill", S["sid"], check=False))


def cli(*args, check=True, input=None, user=None, timeout=60):
    env = dict(os.environ, SANDGATE_ADDR=S["d"].addr, SANDGATE_API_KEY=KEY,
               SANDGATE_USER=user or S["user"])
    r = subprocess.run([os.path.join(sg.BUILD, "bin", "sandgate-cli")] + list(args), env=env,
                       capture_output=True, input=input, timeout=timeout)
    r.stdout, r.stderr = r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
    if check and r.returncode != 0:
        raise AssertionError("sandgate-cli %s: %d\n%s%s" % (args, r.returncode, r.stdout,
                                                           r.stderr))
    return r


def cli_bytes(*args):
    env = dict(os.environ, SANDGATE_ADDR=S["d"].addr, SANDGATE_API_KEY=KEY,
               SANDGATE_USER=S["user"])
    r = subprocess.run([os.path.join(sg.BUILD, "bin", "sandgate-cli")] + list(args), env=env,
                       capture_output=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError("sandgate-cli %s: %d %r" % (args, r.returncode, r.stderr))
    return r.stdout


class Files(unittest.TestCase):
    def test_1_upload_download_ls_stat(self):
        sid = S["sid"]
        data = os.urandom(3 * (1 << 20) + 12345)   # more than one 1 MiB message
        src = os.path.join(S["tmp"], "src.bin")
        with open(src, "wb") as f:
            f.write(data)
        r = cli("mkdir", sid, "d/e", "--parents")
        self.assertEqual(r.stdout.split("\t")[0], "dir")
        r = cli("upload", sid, src, "d/e/blob.bin")
        self.assertIn("uploaded %d bytes" % len(data), r.stdout)
        out = os.path.join(S["tmp"], "back.bin")
        cli("download", sid, "d/e/blob.bin", out)
        with open(out, "rb") as f:
            self.assertEqual(f.read(), data)
        self.assertEqual(cli_bytes("download", sid, "d/e/blob.bin", "-", "--offset", "100",
                                   "--length", "50"), data[100:150])
        r = cli("upload", sid, "-", "small.txt", input=b"hello cli\n")
        self.assertIn("uploaded 10 bytes", r.stdout)
        self.assertEqual(cli_bytes("download", sid, "small.txt"), b"hello cli\n")
        st = cli("stat", sid, "d/e/blob.bin").stdout.strip().split("\t")
        self.assertEqual(st, ["file", str(len(data)), "0644", "d/e/blob.bin"])
        top = [l.split("\t") for l in cli("ls", sid).stdout.splitlines()]
        self.assertIn(["dir", top[[x[3] for x in top].index("d")][1], "0755", "d"], top)
        self.assertIn("small.txt", [x[3] for x in top])
        self.assertNotIn("d/e/blob.bin", [x[3] for x in top])
        rec = [l.split("\t")[3] for l in cli("ls", sid, "--recursive").stdout.splitlines()]
        self.assertIn("d/e/blob.bin", rec)
        self.assertIn("d/e", rec)
        sub = [l.split("\t")[3] for l in cli("ls", sid, "d/e").stdout.splitlines()]
        self.assertEqual(sub, ["d/e/blob.bin"])

    def test_2_mv_rm(self):
        sid = S["sid"]
        cli("upload", sid, "-", "a.txt", input=b"a")
        cli("upload", sid, "-", "b.txt", input=b"bb")
        r = cli("mv", sid, "a.txt", "b.txt", check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("ALREADY_EXISTS", r.stderr)
        r = cli("mv", sid, "a.txt", "b.txt", "--overwrite")
        self.assertEqual(r.stdout.strip().split("\t"), ["file", "1", "0644", "b.txt"])
        self.assertEqual(cli_bytes("download", sid, "b.txt"), b"a")
        cli("mkdir", sid, "tree/x/y", "--parents")
        cli("upload", sid, "-", "tree/x/y/f", input=b"f")
        r = cli("rm", sid, "tree", check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("FAILED_PRECONDITION", r.stderr)
        self.assertEqual(cli("rm", sid, "tree", "--recursive").stdout.strip(), "removed 4")
        r = cli("stat", sid, "tree", check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("NOT_FOUND", r.stderr)
        r = cli("stat", sid, "../etc/passwd", check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("INVALID_ARGUMENT", r.stderr)

    def test_3_watch(self):
        sid = S["sid"]
        cli("mkdir", sid, "w", "--parents")
        env = dict(os.environ, SANDGATE_ADDR=S["d"].addr, SANDGATE_API_KEY=KEY,
                   SANDGATE_USER=S["user"])
        p = subprocess.Popen([os.path.join(sg.BUILD, "bin", "sandgate-cli"), "watch", sid, "w",
                              "--count", "1", "--timeout", "30"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = p.stdout.readline()
        self.assertEqual(first.split("\t")[0], "READY", first)
        cli("upload", sid, "-", "w/new.txt", input=b"n")
        t0 = time.monotonic()
        out, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 0, err)
        self.assertLess(time.monotonic() - t0, 10)
        self.assertEqual(out.splitlines()[0], "CREATE\tw/new.txt", out)

    def test_4_usage(self):
        self.assertEqual(cli("ls", check=False).returncode, 2)
        self.assertEqual(cli("mv", S["sid"], "only-one", check=False).returncode, 2)


class Contexts(unittest.TestCase):
    def test_contexts(self):
        sid = S["sid"]
        ctx = cli("context", sid).stdout.strip()
        ids = [l.split("\t")[0] for l in cli("context", "list", sid).stdout.splitlines()]
        self.assertIn("default", ids)
        self.assertIn(ctx, ids)
        cli("run", sid, "x = 41", "--context", ctx)
        self.assertIn("42", cli("run", sid, "print(x + 1)", "--context", ctx).stdout)
        r = cli("context", "restart", sid, ctx)
        self.assertEqual(r.stdout.split("\t")[0], "restarted " + ctx)
        r = cli("run", sid, "print(x)", "--context", ctx, check=False)
        self.assertIn("NameError", r.stdout)   # the state is gone
        line = [l for l in cli("context", "list", sid).stdout.splitlines()
                if l.startswith(ctx + "\t")][0]
        self.assertIn("restarts=1", line)
        self.assertEqual(cli("context", "delete", sid, ctx).stdout.strip(), "deleted " + ctx)
        ids = [l.split("\t")[0] for l in cli("context", "list", sid).stdout.splitlines()]
        self.assertNotIn(ctx, ids)
        r = cli("context", "delete", sid, "default", check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("FAILED_PRECONDITION", r.stderr)
        self.assertEqual(cli("context", "delete", sid, check=False).returncode, 2)


class Labels(unittest.TestCase):
    def test_labels_filter_and_pages(self):
        user = "lab-" + uuid.uuid4().hex[:6]
        made = []
        for i in range(5):
            team = "red" if i % 2 == 0 else "blue"
            made.append(cli("create", "--task", "t%d" % i, "--label", "team=" + team,
                            "--label", "n=%d" % i, user=user).stdout.strip())
        try:
            got = cli("get", made[0], user=user).stdout
            self.assertIn("team=red", got)
            self.assertIn("n=0", got)
            red = [l.split("\t")[0] for l in
                   cli("list", "--label", "team=red", user=user).stdout.splitlines()]
            self.assertEqual(sorted(red), sorted(made[0::2]))
            both = [l.split("\t")[0] for l in cli("list", "--label", "team=red", "--label",
                                                    "n=2", user=user).stdout.splitlines()]
            self.assertEqual(both, [made[2]])
            # one page of 2, then the next by its token
            seen, token, pages = [], None, 0
            while True:
                args = ["list", "--page-size", "2"] + (["--page-token", token] if token else [])
                r = cli(*args, user=user)
                ids = [l.split("\t")[0] for l in r.stdout.splitlines()]
                self.assertLessEqual(len(ids), 2)
                seen += ids
                pages += 1
                tok = [l for l in r.stderr.splitlines() if l.startswith("next_page_token: ")]
                if not tok:
                    break
                token = tok[0].split(": ", 1)[1]
            self.assertEqual(pages, 3)
            self.assertEqual(sorted(seen), sorted(made))
            # without a page flag, every page
            self.assertEqual(sorted(l.split("\t")[0] for l in
                                    cli("list", user=user).stdout.splitlines()), sorted(made))
            r = cli("list", "--page-token", "garbage", user=user, check=False)
            self.assertEqual(r.returncode, 1)
            self.assertIn("INVALID_ARGUMENT", r.stderr)
            self.assertEqual(cli("create", "--label", "novalue", user=user,
                                 check=False).returncode, 2)
            r = cli("create", "--task", "bad", "--label", "bad key=v", user=user, check=False)
            self.assertEqual(r.returncode, 1)
            self.assertIn("INVALID_ARGUMENT", r.stderr)
        finally:
            for sid in made:
                cli("kill", sid, user=user, check=False)


if __name__ == "__main__":
    unittest.main(verbosity=2)
