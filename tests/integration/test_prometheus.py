"""--prometheus for check, bench, bench --links, sweep and info, read by the real
node_exporter (Debian's prometheus-node-exporter) through its textfile
collector, as a cluster's monitoring reads it: every file in one directory,
scraped over HTTP, without a collector error."""
import os
import re
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request

from harness import BIN, clean_env, free_port, require, run

EXPORTER = "prometheus-node-exporter"


def samples(text):
    """{(name, frozenset(labels)): value} of the exposition text."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$', line)
        if not m:
            continue
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


class NodeExporterReadsEveryReport(unittest.TestCase):
    def setUp(self):
        require(EXPORTER)
        self.dir = tempfile.mkdtemp()
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", self.dir]))

    def launch(self, *args):
        p = run([BIN, "launch", "--nproc-per-node", "2", "--", *args], env=clean_env(), timeout=180)
        return p

    def scrape(self):
        port = free_port()
        exporter = subprocess.Popen(
            [EXPORTER, f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
             "--collector.textfile", f"--collector.textfile.directory={self.dir}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.addCleanup(exporter.kill)
        # Wait for the event (the port answers), bounded, not for a guessed time.
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                    return r.status, r.read().decode()
            except (urllib.error.URLError, ConnectionError) as e:
                if exporter.poll() is not None or time.monotonic() > deadline:
                    self.fail(f"node_exporter did not answer: {e}; {exporter.stderr.read()}")
                time.sleep(0.05)

    def test_every_report_scrapes_cleanly(self):
        for name, args in [("check", ["check", "--backend", "host"]),
                           ("bench", ["bench", "--backend", "host", "-b", "1M", "-e", "2M"]),
                           ("links", ["bench", "--backend", "host", "--links", "--link-size", "1M"]),
                           ("sweep", ["sweep", "--backend", "host"])]:
            path = os.path.join(self.dir, name + ".prom")
            p = self.launch(*args, "--prometheus", path)
            self.assertEqual(p.returncode, 0, (name, p.stdout, p.stderr))
            self.assertTrue(os.path.exists(path), name)
        p = run([BIN, "info", "--prometheus", os.path.join(self.dir, "info.prom")], env=clean_env())
        self.assertEqual(p.returncode, 0, p.stderr)
        # The atomic write leaves no temporary file behind.
        self.assertEqual(sorted(os.listdir(self.dir)),
                         ["bench.prom", "check.prom", "info.prom", "links.prom", "sweep.prom"])
        status, text = self.scrape()
        self.assertEqual(status, 200)
        s = samples(text)
        for name in ("bench", "check", "info", "links", "sweep"):
            f = os.path.join(self.dir, name + ".prom")
            self.assertEqual(s.get(("node_textfile_scrape_error", frozenset())), 0.0, text[-2000:])
            self.assertIn(("node_textfile_mtime_seconds", frozenset({("file", f)})), s, name)
            info = [k for k in s if k[0] == "gpudiag_info" and ("report", name) in k[1]]
            self.assertEqual(len(info), 1, (name, [k for k in s if k[0] == "gpudiag_info"]))
        self.assertEqual(s[("gpudiag_check_ok", frozenset())], 1.0)
        host = frozenset({("host", os.uname().nodename.split(".")[0])})
        self.assertEqual(s[("gpudiag_hw_node_unfit", host)], 0.0)  # this machine's own kernel log
        unfit = [k for k in s if k[0] == "gpudiag_hw_findings" and ("class", "node") in k[1]]
        self.assertFalse([k for k in unfit if s[k] > 0 and dict(k[1])["action"] != "check_cable"], unfit)
        self.assertEqual(s[("gpudiag_check_ranks_ok", frozenset())], 2.0)
        for rank in ("0", "1"):
            bw = s[("gpudiag_check_allreduce_busbw_gbps", frozenset({("host", os.uname().nodename.split(".")[0]), ("rank", rank)}))]
            self.assertGreater(bw, 0)
        rows = [k for k in s if k[0] == "gpudiag_bench_busbw_gbps"]
        self.assertEqual(sorted(dict(k[1])["bytes"] for k in rows),
                         ["1048576", "1048576", "2097152", "2097152"])
        self.assertTrue(all(s[k] > 0 for k in rows))
        links = [k for k in s if k[0] == "gpudiag_link_gbps"]
        self.assertEqual(len(links), 1)
        self.assertEqual(s[("gpudiag_links_slow", frozenset())], 0.0)
        self.assertEqual(s[("gpudiag_sweep_nodes_excluded", frozenset())], 0.0)
        self.assertEqual(s[("gpudiag_sweep_nodes", frozenset())], 1.0)

    def test_an_unwritable_target_is_refused_before_the_job(self):
        p = self.launch("check", "--backend", "host", "--prometheus",
                        os.path.join(self.dir, "no-such-dir", "x.prom"))
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("no-such-dir", p.stdout + p.stderr)


if __name__ == "__main__":
    unittest.main()
