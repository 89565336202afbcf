"""The command line's conventions, end to end with the real binary
(docs/json.md, issue 17): `--json -` of every subcommand that reports puts
one JSON document on stdout (the text goes to stderr) and `python3 -m
json.tool` reads it; under `gpudiag launch` the ranks' documents arrive as
JSON Lines, never prefixed or interleaved; each schema's documented fields
are there; `launch --json FILE` writes the job's summary; `--log-level`
works after the subcommand and reaches the ranks, with one prefix per line;
the help shows one readable word per option kind, Examples and Exit status;
a bare `gpudiag` prints the usage and exits 2; a mistyped option gets
"did you mean". Every job runs on the host backend, so no GPU is needed.
"""
import json
import os
import re
import subprocess
import tempfile
import unittest

from harness import BIN, SOURCE_DIR, run

PYTHON = "/usr/bin/python3"
HOST = ["--backend", "host", "--size", "1MiB", "--mem", "1MiB", "--iters", "1", "--timeout", "60"]
NCCL_LOG = os.path.join(SOURCE_DIR, "tests", "fixtures", "nccl_logs",
                        "nccl1814_roce_status12.log")


def clean_env(**extra):
    """The environment of a user's shell: no rank variables, no log level."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                        "MASTER_PORT", "SPDLOG_LEVEL", "GPUDIAG_LOG_LEVEL")}
    env.update(extra)
    return env


def gpudiag(*args, timeout=120, env=None):
    return run([BIN, *args], timeout=timeout, env=env or clean_env())


def json_tool(text):
    """What `... | python3 -m json.tool` says: (exit status, its output)."""
    p = subprocess.run([PYTHON, "-m", "json.tool"], input=text, capture_output=True, text=True,
                       timeout=30)
    return p.returncode, p.stdout + p.stderr


def documented_fields(schema):
    """The fields docs/json.md lists for `schema`: the `name` cells of its table."""
    with open(os.path.join(SOURCE_DIR, "docs", "json.md")) as f:
        text = f.read()
    section = text.split(f"`{schema}`", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([a-z_]+)` \|", section, re.M)


class JsonOnStdout(unittest.TestCase):
    def parse(self, r, schema, codes=(0,)):
        """stdout parses (json.tool agrees), holds `schema` and its documented fields."""
        self.assertIn(r.returncode, codes, r.stderr)
        code, out = json_tool(r.stdout)
        self.assertEqual(code, 0, f"json.tool: {out}\nstdout was: {r.stdout!r}")
        doc = json.loads(r.stdout)
        self.assertEqual(doc["schema"], schema)
        fields = documented_fields(schema)
        self.assertGreater(len(fields), 3, f"docs/json.md lists no fields for {schema}")
        for field in fields:
            self.assertIn(field, doc, f"{schema}: documented field {field} missing")
        return doc

    def test_check_text_goes_to_stderr(self):
        r = gpudiag("launch", "--nproc-per-node", "2", "--", "check", *HOST, "--json", "-")
        doc = self.parse(r, "gpudiag-check/1")
        self.assertEqual(doc["ranks_ok"], 2)
        self.assertIn("is OK (global rank: 0/2)", r.stderr)  # the status lines, on stderr

    def test_bench(self):
        r = gpudiag("launch", "--nproc-per-node", "2", "--", "bench", "--backend", "host",
                    "--min", "4KiB", "--max", "8KiB", "--iters", "2", "--json", "-")
        doc = self.parse(r, "gpudiag-bench/2")
        self.assertEqual([s["size"] for s in doc["results"]], [4096, 8192])

    def test_bench_links(self):
        r = gpudiag("launch", "--nproc-per-node", "2", "--", "bench", "--backend", "host",
                    "--links", "--link-size", "64KiB", "--json", "-")
        doc = self.parse(r, "gpudiag-links/1", codes=(0, 1))
        self.assertEqual(len(doc["links"]), 1)

    def test_info_alone(self):
        self.parse(gpudiag("info", "--json", "-"), "gpudiag-info/1")
        self.parse(gpudiag("info", "--json"), "gpudiag-info/1")  # the flag it used to be

    def test_scan(self):
        import numpy as np
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "act.npy")
            np.save(path, np.array([1.0, np.inf, 2.0], dtype=np.float32))
            r = gpudiag("scan", path, "--json", "-")
            doc = self.parse(r, "gpudiag-scan/1", codes=(1,))
            self.assertIn("has infs", r.stderr)  # the report, on stderr
            self.assertEqual(doc["mode"], "tensors")

    def test_nccl_log(self):
        r = gpudiag("nccl-log", NCCL_LOG, "--json", "-")
        self.parse(r, "gpudiag-nccl-log/1", codes=(1,))
        # The flag it used to be, before the paths, still reads them.
        old = gpudiag("nccl-log", "--json", NCCL_LOG)
        self.assertEqual(json.loads(old.stdout)["findings"], json.loads(r.stdout)["findings"])

    def test_json_file_keeps_the_text_on_stdout(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "info.json")
            r = gpudiag("info", "--json", path)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("launcher", r.stdout)
            with open(path) as f:
                self.assertEqual(json.load(f)["schema"], "gpudiag-info/1")
            self.assertFalse(os.path.exists(os.path.join(d, "-")))


class UnderLaunch(unittest.TestCase):
    def test_four_ranks_of_info_are_json_lines(self):
        r = gpudiag("launch", "--nproc-per-node", "4", "--", "info", "--json", "-")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 4, r.stdout)
        docs = [json.loads(line) for line in lines]  # JSON Lines: each line one document
        self.assertEqual(sorted(d["rank"] for d in docs), [0, 1, 2, 3])
        self.assertTrue(all(d["schema"] == "gpudiag-info/1" for d in docs))
        self.assertNotIn("[rank", r.stdout)

    def test_launch_json_file_is_the_job_summary(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "job.json")
            script = "import os,sys; sys.exit(3 if os.environ['RANK'] == '1' else 0)"
            r = gpudiag("launch", "--nproc-per-node", "3", "--json", path, "--no-gpudiag",
                        "--", PYTHON, "-c", script)
            self.assertEqual(r.returncode, 3, r.stderr)
            with open(path) as f:
                doc = json.load(f)
        for field in documented_fields("gpudiag-launch/1"):
            self.assertIn(field, doc)
        self.assertEqual(doc["schema"], "gpudiag-launch/1")
        self.assertEqual(doc["exit_status"], 3)
        self.assertEqual(doc["world_size"], 3)
        self.assertEqual(doc["first_failure"]["rank"], 1)
        self.assertEqual(doc["first_failure"]["exit"]["code"], 3)
        self.assertEqual([x["rank"] for x in doc["ranks"]], [0, 1, 2])
        # The same words as the launcher's last line.
        self.assertIn(doc["summary"].split(";")[1].strip(), r.stderr)

    def test_launch_json_dash_joins_the_stream(self):
        r = gpudiag("launch", "--nproc-per-node", "2", "--json", "-", "--", "info", "--json", "-")
        self.assertEqual(r.returncode, 0, r.stderr)
        schemas = sorted(json.loads(line)["schema"] for line in r.stdout.splitlines())
        self.assertEqual(schemas, ["gpudiag-info/1", "gpudiag-info/1", "gpudiag-launch/1"])


class Logs(unittest.TestCase):
    def test_log_level_after_the_subcommand_reaches_the_ranks(self):
        r = gpudiag("launch", "--nproc-per-node", "2", "--", "check", *HOST, "--log-level", "debug")
        self.assertEqual(r.returncode, 0, r.stderr)
        for rank in (0, 1):
            self.assertRegex(r.stderr, rf"(?m)^\[rank{rank}\]: gpudiag debug: ")

    def test_launchers_log_level_is_passed_on(self):
        r = gpudiag("launch", "--log-level", "debug", "--nproc-per-node", "2", "--", "check", *HOST)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stderr, r"(?m)^\[rank1\]: gpudiag debug: ")
        self.assertRegex(r.stderr, r"(?m)^gpudiag info: launch: ranks 0-1 of 2")

    def test_one_prefix_per_line(self):
        # The backend warning names no rank twice: "[rank0]: gpudiag warning: ...".
        r = gpudiag("launch", "--nproc-per-node", "2", "--", "check", *HOST, "--log-level", "info")
        self.assertEqual(r.returncode, 0, r.stderr)
        for line in r.stderr.splitlines():
            self.assertNotRegex(line, r"^\[rank\d+\]: gpudiag \[rank", line)
        self.assertRegex(r.stderr, r"(?m)^\[rank0\]: gpudiag info: ")

    def test_a_bad_level_is_one_line(self):
        r = gpudiag("info", env=clean_env(GPUDIAG_LOG_LEVEL="loud"))
        self.assertEqual(r.returncode, 2)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn("GPUDIAG_LOG_LEVEL=loud", r.stderr)


class Help(unittest.TestCase):
    def option_line(self, help_text, option):
        """The option's entry, its wrapped description joined back into one line."""
        lines = help_text.splitlines()
        at = [i for i, l in enumerate(lines) if l.strip().startswith(option + " ")
              or l.strip() == option]
        self.assertEqual(len(at), 1, f"{option} in:\n{help_text}")
        entry = lines[at[0]]
        for more in lines[at[0] + 1:]:
            if not more.startswith(" " * 36) or not more.strip():
                break
            entry += " " + more.strip()
        return entry

    def test_each_kind_of_option_reads_plainly(self):
        r = gpudiag("check", "--help")
        self.assertEqual(r.returncode, 0)
        out = r.stdout
        size = self.option_line(out, "--mem")
        self.assertRegex(size, r"--mem SIZE\s+memory")
        self.assertIn("(default: 256MiB on a GPU", size)
        self.assertIn("SIZE: bytes with an optional unit, e.g. 256MiB", out)
        self.assertRegex(self.option_line(out, "--backend"), r"--backend auto\|nccl\|host\s")
        self.assertIn("(default: auto)", self.option_line(out, "--backend"))
        self.assertRegex(self.option_line(out, "--iters"), r"--iters N\s.*\(default: 5\)")
        self.assertRegex(self.option_line(out, "--timeout"), r"--timeout SECONDS\s")
        self.assertRegex(self.option_line(out, "--json"), r"--json \[FILE\|-\]\s")
        self.assertRegex(self.option_line(out, "--nccl-lib"), r"--nccl-lib FILE\s")
        self.assertRegex(self.option_line(out, "--nccl-debug-subsys"),
                         r"--nccl-debug-subsys TEXT\[,\.\.\.\]\s")
        debug = self.option_line(out, "--nccl-debug")
        self.assertRegex(debug, r"--nccl-debug \[info\|trace\]\s")
        self.assertNotIn("=info", debug)  # no default that looks switched on
        self.assertIn("off unless given", debug)
        for noise in ("UINT", "1099511627776", "kb(=1024b)", ":SIZE"):
            self.assertNotIn(noise, out)
        self.assertIn("Examples:\n  gpudiag launch --nproc-per-node 8 -- check", out)
        self.assertIn("Exit status:\n  0 every rank OK", out)
        flag = self.option_line(gpudiag("bench", "--help").stdout, "--links")
        self.assertRegex(flag, r"--links\s+instead of the sweep")

    def test_every_subcommand_has_examples_and_exit_status(self):
        for sub in ("check", "bench", "launch", "scan", "nccl-log", "info"):
            r = gpudiag(sub, "--help")
            self.assertEqual(r.returncode, 0, sub)
            self.assertIn("Examples:\n  ", r.stdout, sub)
            self.assertIn("Exit status:\n  ", r.stdout, sub)
            self.assertIn("--log-level", r.stdout, sub)

    def test_numbers_out_of_range_are_one_plain_line_and_exit_2(self):
        corpus = os.path.join(SOURCE_DIR, "tests", "data", "numerics", "corpus", "valid", "v2.npy")
        cases = [(("check", "--expect-busbw", "nan"), "--expect-busbw: must be a number of GB/s"),
                 (("bench", "--expect-busbw", "inf"), "--expect-busbw: must be a number of GB/s"),
                 (("check", "--device", "-1"), "--device: must be a CUDA device ordinal from 0 to 1023"),
                 (("info", "--device", "99999"), "--device: must be a CUDA device ordinal"),
                 (("scan", corpus, "--trace-batches", "-1,2"), "must be a batch number (0 or more), not -1"),
                 (("scan", corpus, "--abort-after-batch", "-3"), "must be a batch number (0 or more), not -3")]
        for args, text in cases:
            r = gpudiag(*args)
            self.assertEqual(r.returncode, 2, args)
            lines = r.stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, r.stderr)
            self.assertIn(text, lines[0])
            self.assertLess(len(lines[0]), 160, lines[0])  # no 300-digit bound

    def test_a_json_path_that_cannot_be_written_ends_the_job_before_it_runs(self):
        for path, says in (("/nonexistent/x.json", "the folder /nonexistent does not exist"),
                           ("/", "is a folder")):
            for sub in ("check", "bench"):
                r = gpudiag(sub, "--backend", "host", "--json", path)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(says, r.stderr)
                self.assertNotIn("is OK", r.stdout)  # nothing ran
                self.assertNotIn("# Avg bus bandwidth", r.stdout)

    def test_no_help_line_is_wider_than_100_columns(self):
        for sub in ((), ("check",), ("bench",), ("launch",), ("scan",), ("nccl-log",), ("info",)):
            r = gpudiag(*sub, "--help")
            self.assertEqual(r.returncode, 0, sub)
            wide = [l for l in r.stdout.splitlines() if len(l) > 100]
            self.assertEqual(wide, [], sub)

    def test_bare_gpudiag_prints_the_usage_and_exits_2(self):
        r = gpudiag()
        self.assertEqual(r.returncode, 2)
        self.assertIn("Usage:", r.stderr)
        for sub in ("check", "launch", "bench", "scan", "nccl-log", "info"):
            self.assertIn(sub, r.stderr)

    def test_mistyped_option_gets_did_you_mean(self):
        r = gpudiag("check", "--bakend", "host")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr.strip(), "gpudiag: check: unknown option --bakend, did you mean "
                                           "--backend?; try: gpudiag check --help")
        r = gpudiag("launch", "--nproc-per-nod", "2", "--", "info")
        self.assertEqual(r.returncode, 2)
        self.assertIn("did you mean --nproc-per-node?", r.stderr)
        r = gpudiag("--log-levl", "debug", "info")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown option --log-levl, did you mean --log-level?", r.stderr)


if __name__ == "__main__":
    unittest.main()
