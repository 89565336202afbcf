"""gpudiag launch's restart policy for hangs under --max-restarts and
--hang-timeout: a rank that hangs in its own code at the same line in two
attempts in a row (the others waiting for it in their all-reduce) is a workload
hang, and the launcher stops after 2 attempts instead of N + 1, with the last
attempt's exit status (3, the hang's) and the decision in --json; a hang that
does not come back is restarted, and the job completes. Real torch (Debian's
1.13, DDP over gloo) running tests/fixtures/torch/train.py; every order here
comes from the launcher's own hang verdict or a process's exit, none from a
sleep."""
import json
import os
import re
import tempfile
import unittest

from harness import have_torch, launch_torch_python

TRAIN = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "fixtures", "torch",
                                     "train.py"))
STOPPED = re.compile(r"gpudiag launch: the job stopped at the same point in attempts (\d+) and "
                     r"(\d+) \(rank (\d+) waited for by the others, in its own code at (\S+)\): "
                     r"a workload hang; not restarting \(--restart-policy always would\)\n")


def restarts(err):
    return len(re.findall(r"gpudiag launch: restarting the whole local group", err))


@unittest.skipUnless(have_torch(), "Debian's python3-torch is not installed (install-deps.sh --test)")
class HangsUnderRestarts(unittest.TestCase):
    def test_a_hang_at_the_same_line_stops_after_two_attempts(self):
        with tempfile.NamedTemporaryFile(suffix=".json") as js:
            p = launch_torch_python("--nproc-per-node", "2", "--max-restarts", "3",
                                    "--hang-timeout", "3", "--json", js.name, TRAIN, "--steps",
                                    "4", "--hang-rank", "1", "--hang-step", "1")
            self.assertEqual(p.returncode, 3, p.stderr[-4000:])
            m = STOPPED.search(p.stderr)
            self.assertIsNotNone(m, p.stderr[-4000:])
            self.assertEqual(m.group(1, 2, 3), ("0", "1", "1"))
            self.assertRegex(m.group(4), r"^train\.py:\d+$")
            self.assertEqual(restarts(p.stderr), 1, p.stderr[-4000:])
            self.assertIn("after the job hung (--hang-timeout 3 s)", p.stderr)
            with open(js.name) as f:
                doc = json.load(f)
        self.assertEqual([a["then"] for a in doc["attempts"]], ["restart", "repeated_hang"])
        last = doc["attempts"][-1]
        self.assertEqual(last["exit_status"], 3)
        self.assertEqual((last["error"]["rank"], last["error"]["hang"], last["error"]["message"]),
                         (1, True, ""))
        self.assertEqual("train.py:%d" % last["error"]["line"], m.group(4))
        self.assertEqual("gpudiag launch: " + doc["restarts_stopped"] + "\n", m.group(0))

    def test_a_hang_only_in_the_first_attempt_is_restarted_and_completes(self):
        p = launch_torch_python("--nproc-per-node", "2", "--max-restarts", "3", "--hang-timeout",
                                "3", TRAIN, "--steps", "4", "--hang-rank", "1", "--hang-step", "1",
                                "--hang-attempts", "1")
        self.assertEqual(p.returncode, 0, p.stderr[-4000:])
        self.assertIn("the job hung (--hang-timeout 3 s)", p.stderr)
        self.assertEqual(restarts(p.stderr), 1, p.stderr[-4000:])
        self.assertNotIn("the same point", p.stderr)
        self.assertEqual(len(re.findall(r"step 3 loss", p.stdout)), 1, p.stdout)


if __name__ == "__main__":
    unittest.main()
