"""`gpudiag fr` on dumps built to exhaust it, each run under a 1 GiB address-space limit.

What each file does, and what it cost before the reader bounded it:
- a pickle of 16 M MEMOIZE opcodes: every one a memo slot (16 MB of file, 1.4 GB of memo);
- one 1 MiB group name, memoized, that 4,000 entries and pg_config name (1.3 MB of file,
  4 GB of copies);
- one ranks str of a million ranks, memoized, that 1,000 groups of pg_config share (8 MB of
  file, 4 GB of ints);
- 2,000 groups of 8 ranks, 5 entries each (every member's track once read every entry).
Each ends in a refusal of the file (one line, exit 2: no readable dump) or a correct report,
never "out of memory" or a timeout. docs/fr.md, "Limits", says what bounds each.
"""
import json
import os
import pickle
import resource
import shutil
import subprocess
import tempfile
import unittest

from harness import BIN


def limited_memory(limit=1 << 30):
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


def fr(*args, timeout=120):
    return subprocess.run([BIN, "fr", *args], capture_output=True, text=True, timeout=timeout,
                          preexec_fn=limited_memory())


def entry(i, group, seq=1):
    return {"record_id": i, "pg_id": 0, "process_group": (group, "x"), "collective_seq_id": seq,
            "p2p_seq_id": 0, "profiling_name": "nccl:all_reduce", "state": "completed",
            "is_p2p": False, "time_discovered_started_ns": 1, "input_sizes": [[4]],
            "input_dtypes": ["Float"]}


def dump(entries, pg_config):
    return pickle.dumps({"version": "2.10", "pg_config": pg_config, "pg_status": {},
                         "entries": entries}, 2)


class HostileDumps(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="fr_hostile.")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def write(self, name, data):
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def refused(self, path, why):
        r = fr(path)
        self.assertEqual(r.returncode, 2, r.stderr[-2000:])
        self.assertEqual(r.stdout, "")
        lines = r.stderr.splitlines()
        self.assertEqual(lines[0], f"gpudiag: fr: {path}: not-a-dump: {why}")
        self.assertTrue(lines[-1].startswith("gpudiag: no readable flight-recorder dump"))

    def test_every_memo_slot_counts(self):
        path = self.write("nccl_trace_rank_0", b"\x80\x04N" + b"\x94" * (16 << 20) + b".")
        self.refused(path, "more than 4194304 values (counting each reference to a shared one): "
                           "the limit of one dump")

    def test_a_huge_shared_group_name_is_cut(self):
        name = "g" * (1 << 20)
        pg = (name, name)  # one tuple: pickle shares it, and the name, by reference
        entries = [dict(entry(i, name, seq=i + 1), process_group=pg) for i in range(4000)]
        path = self.write("nccl_trace_rank_0",
                          dump(entries, {name: {"name": name, "desc": name, "ranks": "[0]"}}))
        self.assertLess(os.path.getsize(path), 2 << 20)
        r = fr("--json", "-", path)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        rep = json.loads(r.stdout)
        self.assertEqual([len(g["name"]) for g in rep["groups"]], [256])
        self.assertEqual(rep["groups"][0]["ranks"], [0])
        self.assertEqual(rep["suspect_ranks"], [])

    def test_huge_rank_lists_are_refused(self):
        ranks = str(list(range(1 << 20)))
        config = {str(g): {"name": str(g), "desc": "x", "ranks": ranks} for g in range(1000)}
        path = self.write("nccl_trace_rank_0", dump([entry(0, "0")], config))
        self.refused(path, "pg_config lists more than 4194304 ranks in all its groups: the "
                           "limit of one dump")

    def test_many_groups_of_many_entries(self):
        members = str(list(range(8)))
        config = {str(g): {"name": str(g), "desc": "x", "ranks": members} for g in range(2000)}
        entries = [entry(k * 2000 + g, str(g), seq=k + 1) for k in range(5) for g in range(2000)]
        last = 4 * 2000 + 1234  # seq 5 of group 1234
        for r in range(8):
            rank_entries = list(entries)
            if r == 5:  # stops there: queued, never started
                rank_entries[last] = dict(entries[last], state="scheduled",
                                          time_discovered_started_ns=0)
            self.write(f"nccl_trace_rank_{r}", dump(rank_entries, config))
        r = fr("--json", "-", self.dir)
        self.assertEqual(r.returncode, 1, r.stderr[-2000:])
        rep = json.loads(r.stdout)
        self.assertEqual(len(rep["groups"]), 2000)
        self.assertEqual(rep["suspect_ranks"], [5])
        self.assertEqual([(f["kind"], f["group"], f["seq"]) for f in rep["findings"]],
                         [("gpu-stopped", "1234", 5)])


if __name__ == "__main__":
    unittest.main()
