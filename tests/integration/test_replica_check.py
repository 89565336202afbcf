"""Replica divergence: libgpudiag_scan.so's replica checksums (every dtype
bit-exact against the algorithm of docs/formats.md written here in numpy),
ReplicaCheck's verdict (the same words as gpudiag scan's), and DDP jobs of 4
ranks on gloo under `gpudiag launch` and torch's torchrun: a bit flipped in
one replica's weight after a step is named with rank, step and tensor, live
(ReplicaDivergence on every rank, launch's root cause) and offline (`gpudiag
scan` over the files), and no healthy step is ever flagged. Beside them
(tests/fixtures/torch/replica_locate.py): a divergence in a 24 MiB tensor
located with no collective over 1 MiB, an optimizer that gathers after
step() checked through before_check, and MoE experts checked over their own
group, never flagged healthy."""

import ctypes
import json
import os
import re
import subprocess
import tempfile
import unittest

import numpy as np
import torch

from harness import BIN, SOURCE_DIR, TORCH_PYTHON, clean_env, free_port, have_torch, run
from scanlib import BUILD_DIR, scan
import gpudiag_scan  # scripts/, put on sys.path by scanlib
import replica_check

LIB = os.path.join(BUILD_DIR, "libgpudiag_scan.so")
FIXTURE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "fixtures", "torch",
                                       "replica_train.py"))
LOCATE = os.path.join(os.path.dirname(FIXTURE), "replica_locate.py")
MASK = (1 << 64) - 1


def reference_checksum(data):
    """docs/formats.md's algorithm, from its statement."""
    n = len(data)
    words = np.frombuffer(data + b"\0" * (-n % 4), dtype="<u4").astype(np.uint64)
    k = np.arange(1, len(words) + 1, dtype=np.uint64)
    m = ((k * np.uint64(0x9E3779B9)) & np.uint64(0xFFFFFFFF)) * np.uint64(2) + np.uint64(1)
    with np.errstate(over="ignore"):
        s = int(np.sum(words * m, dtype=np.uint64))
    x = s ^ ((n * 0x9E3779B97F4A7C15) & MASK)
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def raw(t):
    """The tensor's bytes as stored."""
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def env():
    e = clean_env()
    e.pop("OMP_NUM_THREADS", None)
    e["PYTHON_EXEC"] = TORCH_PYTHON
    e["GPUDIAG_SCAN_LIB"] = LIB
    return e


def launch(out, *args, n=4, timeout=300):
    return run([BIN, "launch", "--nproc-per-node", str(n), "--master-port", str(free_port()), FIXTURE,
                "--out", out, *map(str, args)], env=env(), timeout=timeout)


class Checksums(unittest.TestCase):
    def setUp(self):
        self.lib = gpudiag_scan.load(LIB)

    def test_every_dtype_is_bit_exact_against_the_algorithm(self):
        torch.manual_seed(0)
        self.assertEqual(reference_checksum(bytes(range(16))), 0x38a1af35fbf38734)  # formats.md's vector
        tensors = [torch.randn(1001, dtype=d) for d in (torch.float64, torch.float32, torch.float16, torch.bfloat16)]
        tensors += [torch.randint(-100, 100, (777,), dtype=d) for d in (torch.int64, torch.int32, torch.int16, torch.int8)]
        tensors += [torch.randint(0, 255, (13,), dtype=torch.uint8), torch.rand(9) > 0.5, torch.zeros(0),
                    torch.tensor(-0.0), torch.tensor([float("nan"), float("inf")], dtype=torch.bfloat16),
                    torch.randn(3 << 20)]  # several of the scanner's ranges, split over threads
        sums = self.lib.checksums(tensors)
        for t, s in zip(tensors, sums):
            self.assertEqual(s, reference_checksum(raw(t)), t.dtype)
        # -0 and +0 differ; a non-contiguous view is checksummed as its values.
        self.assertNotEqual(self.lib.checksums([torch.tensor(0.0)])[0], sums[13])
        m = torch.randn(64, 48)
        self.assertEqual(self.lib.checksums([m.t()]), self.lib.checksums([m.t().contiguous()]))

    def test_every_single_bit_flip_changes_it(self):
        for dtype, ints in ((torch.float16, torch.int16), (torch.bfloat16, torch.int16), (torch.float32, torch.int32)):
            t = torch.randn(24, dtype=dtype)
            clean = self.lib.checksums([t])[0]
            bits = t.element_size() * 8
            for e in range(t.numel()):
                for b in range(bits):
                    flipped = t.clone()
                    flipped.view(ints)[e] ^= (1 << b) if b < bits - 1 else -(1 << b)
                    self.assertNotEqual(self.lib.checksums([flipped])[0], clean, (dtype, e, b))

    def test_statistics_in_the_same_call_are_the_scanners(self):
        ts = [torch.tensor([1.0, -3.0, float("inf"), 0.0], dtype=torch.bfloat16), torch.randn(5000)]
        table = (gpudiag_scan.Tensor * 2)(*[gpudiag_scan.Tensor(t.data_ptr(), t.numel(), gpudiag_scan.Library.code(t.dtype), 0)
                                            for t in ts])
        sums, stats = (ctypes.c_uint64 * 2)(), (gpudiag_scan.Stats * 2)()
        self.assertEqual(self.lib.lib.gpudiag_scan_checksums(table, 2, -1, None, sums, stats), 0)
        for i, t in enumerate(ts):
            self.assertEqual(sums[i], self.lib.checksums([t])[0])
            self.assertEqual({f: getattr(stats[i], f) for f in gpudiag_scan.FIELDS}, self.lib.scan(t))
        self.assertEqual(self.lib.lib.gpudiag_scan_checksums(table, 2, -1, None, None, None), -1)
        self.assertIn("checksums is NULL", self.lib.lib.gpudiag_scan_last_error().decode())

    @unittest.skipUnless(torch.cuda.is_available(), "no usable GPU: torch.cuda.is_available() is False")
    def test_a_gpu_checksums_as_the_cpu(self):
        ts = [torch.randn(n, dtype=d) for n in (1, 3, 4097, 1 << 20) for d in (torch.float32, torch.bfloat16, torch.int8)]
        ts.append(torch.randn(1001, dtype=torch.float16)[1:])  # not 4-byte aligned
        self.assertEqual(self.lib.checksums([t.cuda() for t in ts]), self.lib.checksums(ts))


class Verdict(unittest.TestCase):
    """The live check's words; src/numerics/detector/replica_verdict_test.cpp holds the same cases."""

    NAMES = ["a.weight", "a.bias", "b.weight", "b.bias", "c.weight"]

    def test_majority_and_no_majority(self):
        ok = [1, 2, 3, 4, 5]
        self.assertIsNone(replica_check.verdict(3, [0, 1, 2], self.NAMES, [ok, ok, ok]))
        msg, rank, differ = replica_check.verdict(20, [0, 1, 2, 3], self.NAMES, [ok, ok, [1, 9, 3, 4, 5], ok])
        self.assertEqual(msg, "replicas diverged at step 20: rank 2 differs from ranks 0-1,3 in 1 of 5 tensors: a.bias")
        self.assertEqual((rank, differ), (2, [1]))
        msg, rank, _ = replica_check.verdict(4, [0, 1, 2, 3, 4], self.NAMES, [ok, [0] * 5, ok, ok, [7, 2, 3, 4, 5]])
        self.assertEqual(msg, "replicas diverged at step 4: rank 1 differs from ranks 0,2-3 (so does rank 4) in 5 of 5 "
                              "tensors: a.weight, a.bias, b.weight and 2 more")
        msg, rank, _ = replica_check.verdict(3, [0, 1], self.NAMES, [ok, [1, 2, 3, 4, 6]])
        self.assertEqual(msg, "replicas diverged at step 3: rank 0 vs rank 1, no majority says which is wrong "
                              "(2 replicas: a third would decide), in 1 of 5 tensors: c.weight")
        self.assertIsNone(rank)
        msg, rank, _ = replica_check.verdict(3, [0, 1, 2, 3], self.NAMES, [ok, [0] * 5, [0] * 5, ok])
        self.assertIsNone(rank)
        self.assertNotIn("a third would decide", msg)


class WhatIsCompared(unittest.TestCase):
    """One process in a gloo group of one: which tensors a check covers."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        torch.distributed.init_process_group("gloo", init_method="file://" + os.path.join(self.tmp.name, "store"),
                                             rank=0, world_size=1)

    def tearDown(self):
        torch.distributed.destroy_process_group()
        self.tmp.cleanup()

    def test_buffers_and_ignored_parameters_are_not_compared_and_shards_need_a_group(self):
        net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2))
        torch.nn.parallel.DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(net, ["2.bias"])
        ddp = torch.nn.parallel.DistributedDataParallel(net)
        check = replica_check.ReplicaCheck(ddp, self.tmp.name, lib=LIB)
        self.assertEqual(check.names, ["0.weight", "0.bias", "1.weight", "1.bias", "2.weight"])
        check.step(0)
        check.close()
        with open(os.path.join(self.tmp.name, "rank00000.replica.jsonl")) as f:
            header, line = f.read().splitlines()
        self.assertIn('"group":[0]', header)
        self.assertTrue(line.startswith('{"step":0,"sums":["'), line)
        del ddp, check  # DDP's reducer before the process group (see replica_train.py)
        sharded = torch.nn.Linear(4, 4)
        sharded.weight.tensor_model_parallel = True  # as Megatron marks its tensor-parallel weights
        with self.assertRaises(ValueError) as e:
            replica_check.ReplicaCheck(sharded, self.tmp.name, lib=LIB)
        self.assertIn("weight is tensor parallel", str(e.exception))
        self.assertIn("pass group=", str(e.exception))
        replica_check.ReplicaCheck(sharded, self.tmp.name, group=torch.distributed.group.WORLD, lib=LIB).close()


@unittest.skipUnless(have_torch(), "Debian's python3-torch is not installed (install-deps.sh --test)")
class DataParallel(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def offline(self, out=None):
        return scan(os.path.join(out or self.out, "replicas"))

    def test_healthy_steps_are_never_flagged(self):
        for model, dtype, steps in (("mlp", "fp32", 150), ("mlp", "bf16", 150), ("conv", "fp32", 60),
                                    ("lm", "fp32", 40), ("lm", "bf16", 40), ("mlp", "fp16", 5)):
            with self.subTest(model=model, dtype=dtype):
                out = os.path.join(self.out, model + dtype)
                p = launch(out, "--model", model, "--dtype", dtype, "--steps", steps)
                self.assertEqual(p.returncode, 0, p.stderr[-3000:])
                self.assertIn("healthy steps %d" % steps, p.stdout)
                r = scan(os.path.join(out, "replicas"))
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertIn("gpudiag scan: replicas agree: ranks 0-3, %d steps compared" % steps, r.stderr)

    def flip(self, model, dtype, tensor, bit, step=3, rank=2, n=4, out=None):
        p = launch(out or self.out, "--model", model, "--dtype", dtype, "--steps", 8, "--flip-rank", rank,
                   "--flip-step", step, "--flip-tensor", tensor, "--flip-bit", bit, n=n)
        self.assertEqual(p.returncode, 1, p.stderr[-3000:])
        return p

    def test_a_flipped_bit_is_named_with_rank_step_and_tensor(self):
        for model, dtype, tensor, bit, n_tensors in (("mlp", "fp32", "0.weight", 3, 4),
                                                      ("lm", "bf16", "block.linear1.weight", 14, 15),
                                                      ("mlp", "fp16", "3.bias", 0, 4)):
            with self.subTest(model=model, dtype=dtype):
                out = os.path.join(self.out, model + dtype)
                p = self.flip(model, dtype, tensor, bit, out=out)
                head = f"replicas diverged at step 3: rank 2 differs from ranks 0-1,3 in 1 of {n_tensors} tensors: {tensor}"
                m = re.search(r"gpudiag launch: root cause: rank (\d+) \[[^\]]+-(\d)\] holds parameters that differ "
                              r"from the other replicas' \(silent data corruption\?\): ReplicaDivergence: (.*)", p.stderr)
                self.assertIsNotNone(m, p.stderr[-3000:])
                self.assertEqual((m.group(1), m.group(2)), ("2", "2"))
                self.assertTrue(m.group(3).startswith(head + " (1 bit in 1 of "), m.group(3))
                self.assertIn("largest |difference|", m.group(3))
                r = self.offline(out)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertEqual(r.stdout, head + "\n")

    def test_two_replicas_that_disagree_are_said_to(self):
        p = self.flip("mlp", "fp32", "0.bias", 30, rank=1, n=2)
        self.assertIn("root cause: the replicas diverged, and no majority names one: ReplicaDivergence: replicas "
                      "diverged at step 3: rank 0 vs rank 1, no majority says which is wrong (2 replicas: a third "
                      "would decide), in 1 of 4 tensors: 0.bias", p.stderr)
        self.assertEqual(self.offline().stdout, "replicas diverged at step 3: rank 0 vs rank 1, no majority says "
                                                "which is wrong (2 replicas: a third would decide), in 1 of 4 "
                                                "tensors: 0.bias\n")

    def test_ranks_with_different_numbers_of_parameters_raise_the_documented_error(self):
        # Rank 1's model has one layer more: its row of sums is longer. Every
        # rank must raise ValueError, not die in the backend (SIGABRT in gloo).
        script = os.path.join(self.out, "uneven.py")
        with open(script, "w") as f:
            f.write("import os, sys, torch, torch.distributed as dist\n"
                    "sys.path.insert(0, %r)\n"
                    "from replica_check import ReplicaCheck\n"
                    "dist.init_process_group('gloo')\n"
                    "layers = [torch.nn.Linear(4, 4)] * (2 + dist.get_rank())\n"
                    "model = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in layers])\n"
                    "check = ReplicaCheck(model, sys.argv[1])\n"
                    "try:\n"
                    "    check.step(0)\n"
                    "except ValueError as e:\n"
                    "    print('ValueError:', e, flush=True)\n"
                    "    sys.exit(5)\n" % os.path.join(SOURCE_DIR, "scripts"))
        p = run([BIN, "launch", "--nproc-per-node", "2", "--master-port", str(free_port()), script,
                 os.path.join(self.out, "replicas")], env=env(), timeout=300)
        self.assertEqual(p.returncode, 5, p.stderr[-3000:])
        self.assertEqual(p.stdout.count("ValueError: ReplicaCheck: ranks 0-1 hold different parameter "
                                        "lists"), 2, p.stdout + p.stderr[-3000:])
        self.assertNotIn("SIGABRT", p.stderr)

    def test_under_torchs_own_torchrun_every_rank_raises_it(self):
        # torch 1.13's default --redirects/--tee "0" does not parse under Python 3.11.
        p = run([TORCH_PYTHON, "-m", "torch.distributed.run", "--redirects", "2", "--tee", "2",
                 "--nproc_per_node", "4", "--master_port", str(free_port()), FIXTURE, "--out", self.out,
                 "--steps", "6", "--flip-rank", "3", "--flip-step", "4", "--flip-tensor", "3.weight",
                 "--flip-bit", "20"], env=env(), timeout=300)
        self.assertNotEqual(p.returncode, 0)
        raised = re.findall(r"ReplicaDivergence: replicas diverged at step 4: rank 3 differs from ranks 0-2", p.stderr)
        self.assertGreaterEqual(len(raised), 4, p.stderr[-4000:])


if __name__ == "__main__":
    unittest.main()


@unittest.skipUnless(have_torch(), "Debian's python3-torch is not installed (install-deps.sh --test)")
class LocatedInBoundedMemory(unittest.TestCase):
    """A divergence in a large tensor is found by chunk checksums: no rank
    sends or receives more than one chunk (1 MiB) in any collective."""

    def run_case(self, *args, n=3):
        with tempfile.TemporaryDirectory() as out:
            p = run([BIN, "launch", "--nproc-per-node", str(n), "--master-port", str(free_port()), LOCATE,
                     "--out", out, *map(str, args)], env=env(), timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        line = p.stdout.strip().splitlines()[-1]  # after launch's rank prefix
        return json.loads(line[line.index("{"):])

    def test_a_bit_in_a_large_tensor_is_located_without_gathering_it(self):
        element = 5_000_001
        for per_round in (0, 4):  # the default, and narrowing in several rounds
            with self.subTest(chunks_per_round=per_round):
                seen = self.run_case("--case", "flip", "--size-mib", 24, "--element", element,
                                     "--chunks-per-round", per_round)
                m = re.search(r"rank 1 differs from ranks 0,2 in 1 of 2 tensors: weight \(1 bit in 1 of "
                              r"(\d+) elements, largest \|difference\| \S+; 1 of \d+ chunks of \S+ \S+ differ, "
                              r"the first at elements (\d+)-(\d+)\)", seen["message"] or "")
                self.assertIsNotNone(m, seen)
                first, last = int(m.group(2)), int(m.group(3))
                self.assertLessEqual(first, element)
                self.assertLessEqual(element, last)
                self.assertEqual(int(m.group(1)), last - first + 1)
                self.assertLessEqual(int(m.group(1)) * 4, replica_check.CHUNK_BYTES)
                self.assertLessEqual(seen["largest_bytes"], replica_check.CHUNK_BYTES)

    def test_a_small_tensor_reads_as_before(self):
        seen = self.run_case("--case", "flip", "--size-mib", 1, "--element", 7, n=2)
        self.assertRegex(seen["message"], r"weight \(1 bit in 1 of 262144 elements, largest \|difference\| "
                                          r"[^;]*\)$")


@unittest.skipUnless(have_torch(), "Debian's python3-torch is not installed (install-deps.sh --test)")
class DeferredGather(unittest.TestCase):
    """An optimizer that gathers its parameters after step(): replicas
    differ until the gather, which before_check runs first."""

    def run_case(self, *args):
        with tempfile.TemporaryDirectory() as out:
            p = run([BIN, "launch", "--nproc-per-node", "4", "--master-port", str(free_port()), LOCATE,
                     "--out", out, "--case", "deferred", *args], env=env(), timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        line = p.stdout.strip().splitlines()[-1]  # after launch's rank prefix
        return json.loads(line[line.index("{"):])

    def test_with_before_check_a_healthy_job_is_never_flagged(self):
        self.assertEqual(self.run_case("--before-check", "--steps", "20"), {"healthy": 20})

    def test_without_it_the_check_sees_the_ungathered_halves(self):
        self.assertIn("replicas diverged at step 0", self.run_case()["message"])


@unittest.skipUnless(have_torch(), "Debian's python3-torch is not installed (install-deps.sh --test)")
class ExpertParameters(unittest.TestCase):
    """Expert (MoE) parameters are replicated over the expert-data-parallel
    group only: here pairs {0,1} and {2,3} of 4 ranks hold different experts."""

    def run_case(self, *args):
        self.out = tempfile.mkdtemp()
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", self.out]))
        p = run([BIN, "launch", "--nproc-per-node", "4", "--master-port", str(free_port()), LOCATE,
                 "--out", self.out, "--case", "experts", *args], env=env(), timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        line = p.stdout.strip().splitlines()[-1]
        return json.loads(line[line.index("{"):]), p.stderr

    def test_a_healthy_moe_job_is_never_flagged_with_or_without_a_group(self):
        for args in ((), ("--group",), ("--expert-group",), ("--group", "--expert-group")):
            with self.subTest(args=args):
                seen, stderr = self.run_case(*args)
                self.assertEqual(seen, {"healthy": 5})
                if "--expert-group" not in args:
                    self.assertIn("expert parameters (allreduce=False, e.g. expert.weight) are not checked", stderr)
                r = scan(self.out)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertIn("replicas agree: ranks 0-3", r.stderr)
                if "--expert-group" in args:
                    self.assertIn("replicas agree: ranks 2-3", r.stderr)

    def test_a_flipped_expert_is_found_over_its_group(self):
        seen, _ = self.run_case("--expert-group", "--flip-rank", "3")
        self.assertEqual(seen["message"].split(" (")[0], "replicas diverged at step 1: rank 2 vs rank 3, no majority "
                                                        "says which is wrong")
        self.assertIn("in 1 of 2 tensors: expert.weight", seen["message"])


class SumsFormatVersions(unittest.TestCase):
    """gpudiag-replica-sums/2 (the multiplier 2a + 1) and /1 (a | 1): each
    read, never compared with the other."""

    def write(self, d, rank, fmt, sums):
        header = {"format": fmt, "rank": rank, "group": [0, 1], "every": 1,
                  "tensors": [{"name": "w", "dtype": "float32", "shape": [4]}]}
        with open(os.path.join(d, f"rank{rank:05d}.replica.jsonl"), "w") as f:
            f.write(json.dumps(header) + "\n")
            for step, value in enumerate(sums):
                f.write(json.dumps({"step": step, "sums": [value]}) + "\n")

    def test_files_of_two_versions_are_refused_and_of_one_compared(self):
        same = ["00000000000000aa", "00000000000000bb"]
        self.assertEqual(replica_check.FORMAT, "gpudiag-replica-sums/2")
        for versions in (("1", "1"), ("2", "2")):
            with self.subTest(versions=versions), tempfile.TemporaryDirectory() as d:
                for rank, v in enumerate(versions):
                    self.write(d, rank, "gpudiag-replica-sums/" + v, same)
                r = scan(d)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertIn("replicas agree: ranks 0-1, 2 steps compared", r.stderr)
        with tempfile.TemporaryDirectory() as d:
            self.write(d, 0, "gpudiag-replica-sums/1", same)
            self.write(d, 1, "gpudiag-replica-sums/2", same)
            r = scan(d)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn("is gpudiag-replica-sums/2 and", r.stderr)
            self.assertIn("checksums of two versions are not comparable", r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
