#!/usr/bin/python3
"""Data work in the default template (issue 17.1), through the gateway.

The host runs deploy/local/host.yaml as is (the template agents get), so
these check the real template: every package its preload list names (and
matplotlib, scipy where installed) imports without a warning; a chart from
plt.show() or a figure as the last value comes back as a PNG; a DataFrame
as text/html and text/plain; display() of several objects gives several
results in order; _repr_html_/_repr_svg_/_repr_json_ give those MIME types;
a result larger than one frame arrives whole; a result over the run's
output cap is dropped with a notice the agent sees (and End says so);
IPython.display's display() sends results too.

Prints figures (time to the first and a later chart, PNG sizes).
Env: SANDGATE_BUILD; SANDGATE_KEEP_TMP=1 keeps the daemon logs.
"""
import importlib.util
import json
import os
import re
import struct
import sys
import time
import unittest
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tenancy"))
import sgtenancy as sg  # noqa: E402

KEY = "data-work-key-1"
POLICY = """version: 1
templates:
  - name: code-interpreter
tenants:
  - id: data
    api_keys: [%s]
    templates: [code-interpreter]
    limits: {output_bytes: 4MiB, action_timeout: 60s}
""" % sg.key_hash(KEY)
HOST_YAML = os.path.join(sg.REPO, "deploy", "local", "host.yaml")
PNG_SIG = b"\x89PNG\r\n\x1a\n"

S = {}


def template_preload():
    """The preload list of the code-interpreter template in host.yaml."""
    with open(HOST_YAML) as f:
        text = f.read()
    m = re.search(r"name: code-interpreter.*?\n\s*preload:\s*\[([^\]]*)\]", text, re.S)
    assert m, "no preload list in " + HOST_YAML
    return [p.strip() for p in m.group(1).split(",") if p.strip()]


def setUpModule():
    S["tmp"] = tmp = sg.new_tmp("sandgate-data-")
    unittest.addModuleCleanup(sg.remove_tmp, tmp)
    S["d"] = d = sg.Daemons(tmp, POLICY)
    unittest.addModuleCleanup(d.stop)
    d.start()
    S["api"] = api = sg.Api(tmp, d.addr)
    unittest.addModuleCleanup(api.close)
    sb = api.create(KEY, "du", "data-" + uuid.uuid4().hex[:6])
    S["sid"] = sb.sandbox_id
    unittest.addModuleCleanup(lambda: api.kill(KEY, "du", S["sid"]))


def png_size(data):
    """(width, height) from a PNG's IHDR."""
    assert data[:8] == PNG_SIG, data[:16]
    return struct.unpack(">II", data[16:24])


class Data(unittest.TestCase):
    def setUp(self):
        self.api = S["api"]
        self.pb = self.api.pb

    def run_code(self, code, max_output=0):
        req = self.pb.RunCodeRequest(sandbox_id=S["sid"], user_id="du", code=code,
                                     timeout_seconds=60, max_output_bytes=max_output)
        ev = self.api.call("RunCode", req, KEY, timeout=90)
        out = b"".join(e.stdout.data for e in ev if e.WhichOneof("event") == "stdout").decode()
        err = b"".join(e.stderr.data for e in ev if e.WhichOneof("event") == "stderr").decode()
        error = next((e.error for e in ev if e.WhichOneof("event") == "error"), None)
        end = next(e.end for e in ev if e.WhichOneof("event") == "end")
        results = [e.result for e in ev if e.WhichOneof("event") == "result"]
        return out, err, error, end, results, ev

    @staticmethod
    def reps(result):
        return {r.mime_type: bytes(r.data) for r in result.representations}

    def test_01_template_packages_import(self):
        mods = template_preload() + ["matplotlib", "matplotlib.pyplot"]
        if importlib.util.find_spec("scipy") is not None:   # "where installed"
            mods += ["scipy", "scipy.stats", "scipy.optimize"]
        code = "import importlib\n" + "".join(
            "print(%r, getattr(importlib.import_module(%r), '__version__', '-'))\n" % (m, m)
            for m in mods)
        code += "import matplotlib\nprint('backend', matplotlib.get_backend())\n"
        code += "import os\nprint('cfg', os.environ.get('MPLCONFIGDIR'))\n"
        t0 = time.monotonic()
        out, err, error, end, _, _ = self.run_code(code)
        took = time.monotonic() - t0
        self.assertIsNone(error, error and error.traceback)
        for m in mods:
            self.assertRegex(out, r"(?m)^%s \S+$" % re.escape(m))
        self.assertIn("backend module://sandgate_inline", out)
        # A writable per-sandbox config/cache dir: no "created a temporary
        # cache directory" warning, no fontconfig error: nothing on stderr
        # but the note matplotlib logs when building its font list takes
        # over 5 s (a loaded machine).
        err = err.replace("Matplotlib is building the font cache; this may take a moment.\n", "")
        self.assertEqual(err, "")
        self.assertIn("cfg /tmp/", out)
        sys.stderr.write("imported in %.2f s (first in the sandbox): %s\n"
                         % (took, ", ".join(mods)))

    def test_02_plt_show_gives_png_in_order(self):
        code = ("import matplotlib.pyplot as plt\n"
                "print('before')\n"
                "plt.plot([1, 4, 9, 16], label='squares'); plt.title('chart'); plt.legend()\n"
                "plt.show()\n"
                "print('after')\n")
        t0 = time.monotonic()
        out, err, error, end, results, ev = self.run_code(code)
        first = time.monotonic() - t0
        self.assertIsNone(error, error and error.traceback)
        self.assertEqual(len(results), 1)
        res = results[0]
        reps = self.reps(res)
        self.assertIn("image/png", reps)
        self.assertEqual(res.mime_type, "image/png")        # what older clients read
        self.assertEqual(bytes(res.data), reps["image/png"])
        w, h = png_size(reps["image/png"])
        self.assertTrue(200 < w < 2000 and 200 < h < 2000, (w, h))
        self.assertGreater(len(reps["image/png"]), 5000)
        self.assertFalse(res.is_main_result)
        # Order: stdout 'before', the figure, stdout 'after'.
        kinds = [e.WhichOneof("event") for e in ev]
        self.assertLess(kinds.index("stdout"), kinds.index("result"))
        after = [i for i, e in enumerate(ev) if e.WhichOneof("event") == "stdout"
                 and b"after" in e.stdout.data]
        self.assertTrue(after and after[0] > kinds.index("result"), kinds)
        self.assertEqual(end.results_dropped, 0)
        t0 = time.monotonic()
        _, _, error, _, results, _ = self.run_code(
            "plt.figure(); plt.bar(['a', 'b'], [3, 5]); plt.show()")
        later = time.monotonic() - t0
        self.assertIsNone(error)
        self.assertEqual(len(results), 1)
        sys.stderr.write("chart RunCode round trip: first plt.show() %.2f s (pyplot imported by test_01), "
                         "later %.2f s; "
                         "PNG %d bytes (%dx%d), bar chart %d bytes\n"
                         % (first, later, len(reps["image/png"]), w, h,
                            len(self.reps(results[0])["image/png"])))

    def test_03_figure_as_last_value_once(self):
        code = ("import matplotlib.pyplot as plt\n"
                "fig, ax = plt.subplots(figsize=(4, 3))\n"
                "ax.scatter([1, 2, 3], [3, 1, 2])\n"
                "fig\n")
        _, _, error, _, results, _ = self.run_code(code)
        self.assertIsNone(error, error and error.traceback)
        self.assertEqual(len(results), 1, [r.mime_type for r in results])  # not twice
        reps = self.reps(results[0])
        self.assertTrue(results[0].is_main_result)
        self.assertEqual(list(reps), ["text/plain", "image/png"])
        self.assertIn("Figure", reps["text/plain"].decode())
        png_size(reps["image/png"])

    def test_04_dataframe_html_and_text(self):
        code = ("import pandas as pd\n"
                "df = pd.DataFrame({'city': ['Oslo', 'Lima'], 'temp': [3.5, 19.0]})\n"
                "df\n")
        _, _, error, _, results, _ = self.run_code(code)
        self.assertIsNone(error, error and error.traceback)
        self.assertEqual(len(results), 1)
        res = results[0]
        reps = self.reps(res)
        self.assertTrue(res.is_main_result)
        self.assertIn("<table", reps["text/html"].decode())
        self.assertIn("Oslo", reps["text/html"].decode())
        self.assertIn("Lima", reps["text/plain"].decode())
        # Older clients keep getting the repr as before.
        self.assertEqual(res.mime_type, "text/plain")
        self.assertEqual(bytes(res.data), reps["text/plain"])

    def test_05_display_several_in_order(self):
        code = ("import pandas as pd\n"
                "print('start')\n"
                "display(1, 'two', [3])\n"
                "display(pd.Series([7, 8], name='s'))\n"
                "'last'\n")
        out, _, error, _, results, _ = self.run_code(code)
        self.assertIsNone(error, error and error.traceback)
        self.assertEqual(out, "start\n")
        texts = [self.reps(r)["text/plain"].decode() for r in results]
        self.assertEqual(texts[:3], ["1", "'two'", "[3]"])
        self.assertIn("Name: s", texts[3])
        self.assertEqual(texts[4], "'last'")
        self.assertEqual([r.is_main_result for r in results], [False] * 4 + [True])

    def test_06_repr_methods_give_mime_types(self):
        code = ("class Rich:\n"
                "    def __repr__(self): return 'Rich()'\n"
                "    def _repr_html_(self): return '<b>rich</b>'\n"
                "    def _repr_svg_(self): return '<svg xmlns=\"http://www.w3.org/2000/svg\"/>'\n"
                "    def _repr_json_(self): return {'rich': [1, 2]}\n"
                "    def _repr_markdown_(self): return None\n"
                "class Bundle:\n"
                "    def _repr_mimebundle_(self, include=None, exclude=None):\n"
                "        return {'text/plain': 'B', 'text/latex': '$x$'}\n"
                "display(Rich())\n"
                "Bundle()\n")
        _, err, error, _, results, _ = self.run_code(code)
        self.assertIsNone(error, error and error.traceback)
        self.assertEqual(len(results), 2)
        reps = self.reps(results[0])
        self.assertEqual(list(reps), ["text/plain", "text/html", "image/svg+xml",
                                      "application/json"])
        self.assertEqual(reps["text/plain"], b"Rich()")
        self.assertEqual(reps["text/html"], b"<b>rich</b>")
        self.assertTrue(reps["image/svg+xml"].startswith(b"<svg"))
        self.assertEqual(json.loads(reps["application/json"]), {"rich": [1, 2]})
        self.assertEqual(self.reps(results[1]), {"text/plain": b"B", "text/latex": b"$x$"})

    def test_07_result_larger_than_a_frame(self):
        code = ("import pandas as pd\n"
                "pd.set_option('display.max_rows', 5000)\n"
                "df = pd.DataFrame({'n': range(3000), 'sq': [i * i for i in range(3000)]})\n"
                "df\n")
        _, _, error, end, results, _ = self.run_code(code, max_output=2 << 20)
        self.assertIsNone(error, error and error.traceback)
        html = self.reps(results[0])["text/html"].decode()
        self.assertGreater(len(html), 3 * 65536)        # several frames
        self.assertIn("<td>8994001</td>", html)          # the last row, whole
        self.assertTrue(html.rstrip().endswith("</div>"))
        self.assertFalse(results[0].dropped)
        sys.stderr.write("3000-row DataFrame: text/html %d bytes, text/plain %d bytes\n"
                         % (len(html), len(self.reps(results[0])["text/plain"])))

    def test_08_over_the_cap_dropped_with_notice(self):
        code = ("import matplotlib.pyplot as plt\n"
                "plt.figure(figsize=(8, 6), dpi=150)\n"
                "import numpy as np\n"
                "plt.imshow(np.random.default_rng(1).random((300, 300)))\n"
                "plt.show()\n"
                "display({'text/plain': 'x' * 20000}, raw=True)\n"
                "print('done')\n")
        out, _, error, end, results, _ = self.run_code(code, max_output=8192)
        self.assertIsNone(error, error and error.traceback)
        self.assertEqual(out, "done\n")
        self.assertEqual(len(results), 2)
        fig, big = results
        # The figure's PNG did not fit; its small text/plain did.
        self.assertTrue(fig.dropped)
        self.assertEqual(list(fig.dropped_mime_types), ["image/png"])
        self.assertEqual(list(self.reps(fig)), ["text/plain"])
        self.assertIn("image/png", fig.notice)
        self.assertIn("output limit", fig.notice)
        # Nothing of the 20000-byte text fit: the result is the notice,
        # where every client (old ones included) shows the result.
        self.assertTrue(big.dropped)
        self.assertEqual(len(big.representations), 0)
        self.assertEqual(big.mime_type, "text/plain")
        self.assertEqual(bytes(big.data).decode(), big.notice)
        self.assertIn("result dropped", big.notice)
        self.assertEqual(end.results_dropped, 2)
        self.assertTrue(end.truncated)
        self.assertGreater(end.output_bytes_total, 20000)

    def test_09_ipython_display_sends_results(self):
        if importlib.util.find_spec("IPython") is None:
            self.skipTest("IPython not installed")
        code = ("from IPython.display import display, HTML, Markdown\n"
                "display(HTML('<p>hi</p>'), Markdown('*m*'))\n")
        out, _, error, _, results, _ = self.run_code(code)
        self.assertIsNone(error, error and error.traceback)
        self.assertEqual(out, "")    # not IPython's shell-less print()
        self.assertEqual(len(results), 2)
        self.assertEqual(self.reps(results[0])["text/html"], b"<p>hi</p>")
        self.assertEqual(self.reps(results[1])["text/markdown"], b"*m*")


if __name__ == "__main__":
    unittest.main(verbosity=2)
