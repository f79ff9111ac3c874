#!/usr/bin/python3
"""Prometheus metrics of both daemons, scraped by Debian's real prometheus.

Starts a host + gateway with deploy/local/run.sh (ephemeral loopback ports,
metrics listeners on port 0), moves counters with known calls through the
gateway (sandgate-cli: creates, runs, a run that times out, a call with a
wrong key, a kill), checks both /metrics pages with `promtool check
metrics` and for the exact values those calls must give, then starts
prometheus on loopback scraping both daemons every second and waits until
its HTTP query API returns the same counters. Every process started here is
stopped by PID; the temp dir is removed.

Env: SANDGATE_BUILD (build dir with bin/). Run with /usr/bin/python3.
"""
import json
import os
import sys
import shutil
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.parse
import urllib.request
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tenancy"))
import sgtenancy as sg  # noqa: E402

REPO = sg.REPO
KEY = "sg-demo-key-0001"
S = {}


def cli(*args, key=KEY, check=True, timeout=60):
    env = dict(S["env"], SANDGATE_ADDR=S["addr"], SANDGATE_API_KEY=key, SANDGATE_USER="m-user")
    r = subprocess.run([os.path.join(S["env"]["SANDGATE_BUILD"], "bin", "sandgate-cli")] +
                       list(args), env=env, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError("sandgate-cli %s: %d %s%s" % (args, r.returncode, r.stdout, r.stderr))
    return r


def scrape(name):
    with urllib.request.urlopen("http://127.0.0.1:%s/metrics" % S[name + "_metrics"],
                                timeout=10) as r:
        return r.headers.get("Content-Type"), r.read().decode()


def sample(text, name, **labels):
    """The value of the one series of name with exactly these labels, or None."""
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        series, _, value = line.rpartition(" ")
        base, _, rest = series.partition("{")
        if base != name:
            continue
        got = {}
        for part in filter(None, rest.rstrip("}").split('",')):
            k, _, v = part.partition('="')
            got[k] = v.rstrip('"')
        if got == labels:
            return float(value)
    return None


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def setUpModule():
    S["tmp"] = tmp = tempfile.mkdtemp(prefix="sandgate-metrics-")
    unittest.addModuleCleanup(shutil.rmtree, tmp, ignore_errors=True)
    with open(os.path.join(REPO, "deploy", "local", "policy.yaml")) as f:
        d = sg.Daemons(tmp, f.read(), env={"SANDGATE_METRICS_PORT": "0",
                                           "SANDGATE_HOST_METRICS_PORT": "0"})
    unittest.addModuleCleanup(d.stop)
    d.start()
    S["env"] = d.env
    S["addr"] = d.addr
    S["gateway_metrics"] = d.read("gateway-metrics.port").strip()
    S["host_metrics"] = d.read("host-metrics.port").strip()
    # The calls whose counts the tests expect.
    sb = cli("create", "--template", "code-interpreter", "--task",
             "m-" + uuid.uuid4().hex[:8]).stdout.strip()
    for i in range(3):
        cli("run", sb, "x = %d" % i)
    cli("run", sb, "import time; time.sleep(30)", "--timeout", "1", check=False)
    bad = cli("list", key="sg-wrong-key", check=False)
    assert bad.returncode != 0, bad.stdout
    cli("kill", sb)
    S["sandbox"] = sb


class MetricsPages(unittest.TestCase):
    def test_pages_are_valid_exposition(self):
        for name in ("gateway", "host"):
            ctype, text = scrape(name)
            self.assertTrue(ctype.startswith("text/plain; version=0.0.4"), ctype)
            r = subprocess.run(["promtool", "check", "metrics"], input=text, text=True,
                               capture_output=True, timeout=30)
            self.assertEqual(r.returncode, 0, "%s: %s%s" % (name, r.stdout, r.stderr))
            self.assertEqual(r.stdout + r.stderr, "", name)   # no lint warnings either

    def test_gateway_counts_what_happened(self):
        _, t = scrape("gateway")
        call = dict(grpc_service="sandgate.v1.Sandboxes", tenant="demo")
        self.assertEqual(sample(t, "sandgate_gateway_calls_total", grpc_method="RunCode",
                                grpc_code="OK", **call), 4)
        self.assertEqual(sample(t, "sandgate_gateway_calls_total", grpc_method="CreateSandbox",
                                grpc_code="OK", **call), 1)
        self.assertEqual(sample(t, "sandgate_gateway_calls_total", grpc_method="ListSandboxes",
                                grpc_code="UNAUTHENTICATED",
                                grpc_service="sandgate.v1.Sandboxes", tenant=""), 1)
        self.assertEqual(sample(t, "sandgate_gateway_call_seconds_count",
                                grpc_service="sandgate.v1.Sandboxes", grpc_method="RunCode"), 4)
        self.assertEqual(sample(t, "sandgate_gateway_forward_seconds_count",
                                grpc_method="CreateSandbox"), 1)
        self.assertEqual(sample(t, "sandgate_gateway_policy_decisions_total", action="create",
                                decision="allow"), 1)
        hosts = [l for l in t.splitlines() if l.startswith("sandgate_gateway_host_serving{")]
        self.assertEqual(len(hosts), 1)
        self.assertTrue(hosts[0].endswith(" 1"), hosts)
        self.assertEqual(len([l for l in t.splitlines()
                              if l.startswith("sandgate_gateway_policy_info{")]), 1)

    def test_host_counts_what_happened(self):
        _, t = scrape("host")
        self.assertEqual(sample(t, "sandgate_host_calls_total", grpc_service="sandgate.v1.Host",
                                grpc_method="RunCode", grpc_code="OK"), 4)
        self.assertEqual(sample(t, "sandgate_host_action_timeouts_total", kind="run"), 1)
        self.assertEqual(sample(t, "sandgate_host_action_timeouts_total", kind="exec"), 0)
        self.assertEqual(sample(t, "sandgate_host_sandboxes", template="code-interpreter",
                                isolation="process"), 0)   # killed
        pool = sample(t, "sandgate_host_warm_pool", template="code-interpreter",
                      isolation="process")
        self.assertIsNotNone(pool)
        self.assertGreaterEqual(pool, 0)

    def test_only_get_metrics_is_served(self):
        base = "http://127.0.0.1:%s" % S["gateway_metrics"]
        for url, method, code in ((base + "/", "GET", 404), (base + "/metrics", "POST", 405)):
            req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
            with self.assertRaises(urllib.error.HTTPError) as cm:
                urllib.request.urlopen(req, timeout=10)
            self.assertEqual(cm.exception.code, code)


class RealPrometheus(unittest.TestCase):
    def test_prometheus_scrapes_both_daemons(self):
        d = os.path.join(S["tmp"], "prom")
        os.makedirs(d)
        with open(os.path.join(d, "prometheus.yml"), "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    "scrape_configs:\n"
                    "  - job_name: gateway\n    static_configs:\n"
                    "      - targets: ['127.0.0.1:%s']\n"
                    "  - job_name: host\n    static_configs:\n"
                    "      - targets: ['127.0.0.1:%s']\n"
                    % (S["gateway_metrics"], S["host_metrics"]))
        port = free_port()
        log = open(os.path.join(d, "prometheus.log"), "w")
        p = subprocess.Popen(["prometheus", "--config.file=" + os.path.join(d, "prometheus.yml"),
                              "--storage.tsdb.path=" + os.path.join(d, "data"),
                              "--web.listen-address=127.0.0.1:%d" % port],
                             stdout=log, stderr=subprocess.STDOUT)

        def stop():
            p.terminate()
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            log.close()
        self.addCleanup(stop)

        def query(q):
            url = "http://127.0.0.1:%d/api/v1/query?%s" % (port, urllib.parse.urlencode({"query": q}))
            with urllib.request.urlopen(url, timeout=5) as r:
                body = json.load(r)
            return [float(x["value"][1]) for x in body["data"]["result"]]

        want = {
            'sandgate_gateway_calls_total{job="gateway",grpc_method="RunCode",grpc_code="OK",tenant="demo"}': 4,
            'sandgate_host_action_timeouts_total{job="host",kind="run"}': 1,
            'up{job="gateway"}': 1,
            'up{job="host"}': 1,
        }
        got = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                got = {q: query(q) for q in want}
            except (OSError, ValueError, KeyError):
                got = {}
            if all(got.get(q) == [v] for q, v in want.items()):
                break
            self.assertIsNone(p.poll(), "prometheus exited; see %s" % d)
            time.sleep(0.5)
        for q, v in want.items():
            self.assertEqual(got.get(q), [v], q)


if __name__ == "__main__":
    unittest.main(verbosity=2)
