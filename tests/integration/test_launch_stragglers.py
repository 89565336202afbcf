"""gpudiag launch --stragglers on the real torch (Debian's 1.13, DDP over gloo,
4 ranks): a healthy job names nobody, over several runs, and its losses are
those of the same job without the flag; a rank made slow in its data loading,
in its backward (a hook on the layer's output), or in one collective's input
only is named while the job runs, within 20 collectives of the onset, with
where its delay is, and no other rank is; the verdict is in --json and in
the Prometheus textfile; a script's own DDP comm hook still runs; a stranger's
datagrams on the launcher's socket are refused and the job goes on."""
import json
import os
import re
import tempfile
import unittest

from harness import have_torch, launch_torch_python, strip_prefix, write_scripts

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "torch")
TRAIN = os.path.abspath(os.path.join(FIXTURES, "train.py"))
NAMED = re.compile(r"^straggler: rank (\d+) \[[^\]]+-(\d+)\] arrives ([\d.]+) ms late at (\d+)% "
                   r"of collectives in group 0 ", re.M)


def losses(out):
    return re.findall(r"step (\d+) loss ([\d.]+)", strip_prefix(out))


@unittest.skipUnless(have_torch(), "Debian's python3-torch is not installed (install-deps.sh --test)")
class Stragglers(unittest.TestCase):
    def launch(self, *args, steps=60):
        d = tempfile.mkdtemp(prefix="gpudiag-stragglers-test-")
        doc, prom = os.path.join(d, "launch.json"), os.path.join(d, "stragglers.prom")
        p = launch_torch_python("--nproc-per-node", "4", "--stragglers", "--json", doc,
                                "--prometheus", prom, TRAIN, "--steps", str(steps), *args)
        self.assertEqual(p.returncode, 0, p.stdout[-2000:] + p.stderr[-3000:])
        with open(doc) as f:
            report = json.load(f)["stragglers"]
        with open(prom) as f:
            return p, report, f.read()

    def test_a_healthy_job_names_nobody_and_keeps_its_results(self):
        for run in range(3):
            p, report, prom = self.launch("--steps", "150")
            self.assertNotIn("straggler: rank", p.stderr, run)
            self.assertIn("gpudiag launch: stragglers: none (300 collectives judged in 1 group", p.stderr)
            self.assertEqual(report["named"], [], run)
            self.assertEqual(report["collectives"], 300)
            self.assertIn('gpudiag_stragglers_named{host=', prom)
            self.assertNotIn("gpudiag_straggler{", prom)
        plain = launch_torch_python("--nproc-per-node", "4", TRAIN, "--steps", "150")
        self.assertEqual(plain.returncode, 0, plain.stderr[-3000:])
        self.assertEqual(losses(p.stdout), losses(plain.stdout))
        self.assertEqual(len(losses(p.stdout)), 150)

    def slowed(self, where):
        # Rank 2 is 100 ms slower at every step from step 5 (collective 10).
        p, report, prom = self.launch("--slow-rank", "2", "--slow-in", where, "--slow-ms", "100",
                                      "--slow-from", "5", "--quiet")
        named = NAMED.findall(p.stderr)
        self.assertTrue(named, p.stderr[-3000:])
        self.assertEqual({r for r, *_ in named}, {"2"}, p.stderr[-3000:])
        self.assertEqual(named[0][1], "2")  # [host-local]
        self.assertEqual(len(report["named"]), 1, report)
        ep = report["named"][0]
        self.assertEqual((ep["rank"], ep["group"], ep["recovered"]), (2, 0, False))
        self.assertLessEqual(ep["named_at_collective"], 10 + 20)  # while the job ran, soon
        self.assertIn('gpudiag_straggler{host="', prom)
        self.assertRegex(prom, r'gpudiag_straggler\{[^}]*rank="2"[^}]*\} 1')
        self.assertRegex(p.stderr, r"gpudiag launch: stragglers: 1 named \(120 collectives")
        return ep

    def test_slow_data_loading_is_named(self):
        self.assertEqual(self.slowed("data")["where"], "data loading")

    def test_slow_backward_is_named(self):
        self.assertEqual(self.slowed("backward")["where"], "compute")

    def test_one_collectives_slow_input_is_named(self):
        ep = self.slowed("collective")
        self.assertEqual((ep["where"], ep["op"]), ("compute", "all_reduce"))

    def test_a_scripts_own_comm_hook_still_runs_and_is_timed(self):
        for when in ("before", "after"):
            p, report, _ = self.launch("--comm-hook", when, "--steps", "20")
            self.assertEqual(report["collectives"], 40, when)
            plain = launch_torch_python("--nproc-per-node", "4", TRAIN, "--steps", "20",
                                        "--comm-hook", when)
            self.assertEqual(losses(p.stdout), losses(plain.stdout), when)

    def test_a_strangers_datagrams_are_refused(self):
        d = write_scripts("gpudiag-stragglers-hostile-", {"hostile.py": HOSTILE})
        p = launch_torch_python("--nproc-per-node", "2", "--stragglers", "--json", "-",
                                os.path.join(d, "hostile.py"))
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assertIn("hostile sent", p.stdout)
        doc = json.loads([l for l in p.stdout.splitlines() if l.startswith('{"schema":"gpudiag-launch')][0])
        self.assertGreaterEqual(doc["stragglers"]["refused"], 5)
        self.assertEqual(doc["stragglers"]["named"], [])


HOSTILE = r'''
import os, socket
addr = os.environ["GPUDIAG_STRAGGLERS"]
addr = "\0" + addr[1:] if addr.startswith("@") else addr
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
for data in [b"", b"r 9 0\nc 0 0 x 1 2 0\n", b"\xff" * 70000, b"r 0 0\n" + b"c 0 0 all_reduce 5 1 0\n",
             b"r 0 0\ng 1 3,2\n", b"r 0 0\nc 0 999999999999999999999 x 1 2 0\n",
             b"r 1 0\nc 0 1 all_reduce 1 2 0\n" * 3, b"nonsense"]:
    try:
        s.sendto(data, addr)
    except OSError:
        pass
print("hostile sent", flush=True)
'''

if __name__ == "__main__":
    unittest.main()
