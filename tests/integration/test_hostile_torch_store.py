"""Hostile clients against torchrun's agent store: real `torchrun --no_python`
jobs (Debian's torch 1.13) of two or three gpudiag ranks that join the agent's c10d
TCPStore, and a real attacker run as user `nobody` that writes gpudiag's keys
under the job's prefix (`gpudiag/<TORCHELASTIC_RUN_ID>/<TORCHELASTIC_RESTART_COUNT>/`)
while the ranks wait at their first checkpoint.

torch's store has no authentication, so nothing keeps the attacker out. What
these tests show is that the limits of docs/rendezvous.md ("Limits") hold on
it too: a forged `failures` counter is ignored with one warning and the job
stays OK, with no crash (exit 4) and no growth of the ranks' memory (their
peak RSS is read from /proc while they wait); a value over 1 MiB is one line
and exit 1; a forged failure record, which no rank can tell from a real one,
does change the verdict (one printable line), but every rank has said that its
store is unauthenticated because "torchrun's agent store cannot authenticate",
and the JSON report says so too.

The job is kept alive during an attack without sleeps: every rank starts
through a wrapper, and the last rank's wrapper blocks on a FIFO that the test
writes only after the attack, so the others wait at their first checkpoint,
polling the store, for as long as the attack takes. The attacker waits on the
store itself for the early ranks' checkpoint records before it writes. Where
the attack ends the job, rank 0 alone waits and the late rank is never let
go: torchrun stops it once rank 0 has failed. (With two ranks waiting, the
first to end broken makes torchrun stop the other, maybe before it printed.)

Not tried here, and why: torch's own `TCPStore` client as the attacker (it
puts every key under "/", so it cannot name gpudiag's keys; the attacker
speaks torch 1.x's wire with the standard library instead, which any local
user can); and attacks on the wire itself (huge frames, held connections,
clients that do not read): torch's server parses those, not gpudiag, and
test_hostile_store.py tries them against gpudiag's own store."""
import json
import os
import re
import signal
import subprocess
import tempfile
import time
import unittest

from harness import BIN, broken_lines, free_port, ok_lines

PYTHON = "/usr/bin/python3"
ARGS = ["check", "--backend", "host", "--size", "1MiB", "--mem", "1MiB", "--iters", "1",
        "--timeout", "60"]
MAX_VALUE = 1 << 20  # storelimits::kMaxValueBytes
UNAUTHENTICATED = "is unauthenticated (torchrun's agent store cannot authenticate)"
IGNORED = "ignoring the store's 'failures' counter"

# Run as `nobody`: python3 -c ATTACKER PORT PREFIX EARLY WRITES. The standard
# library speaking torch 1.x's TCPStore wire (types SET=0 WAIT=5 GETNUMKEYS=6,
# strings as u64 length + bytes; torch_store.h). WRITES is a JSON list of
# [key, value]; a value may be {"fill": "x", "bytes": N}, too large for a
# command line. It WAITs for the first checkpoint records of ranks 0..EARLY-1,
# then SETs each key, confirmed by a GETNUMKEYS; all within 30 s.
ATTACKER = r"""
import json, socket, struct, sys, time
SET, WAIT, GETNUMKEYS = 0, 5, 6
port, prefix, early, writes = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
until = time.monotonic() + 30
def string(b):
    return struct.pack("<Q", len(b)) + b
def recv(c, n):
    buf = b""
    while len(buf) < n:
        c.settimeout(max(0.1, until - time.monotonic()))
        chunk = c.recv(n - len(buf))
        if not chunk:
            sys.exit("the store closed the connection")
        buf += chunk
    return buf
while True:  # torchrun's agent may not serve its store yet
    try:
        c = socket.create_connection(("127.0.0.1", port), timeout=5)
        break
    except OSError:
        if time.monotonic() > until:
            raise
        time.sleep(0.05)
records = [(prefix + "cp/0/%d" % r).encode() for r in range(early)]
c.sendall(bytes([WAIT]) + struct.pack("<Q", len(records)) + b"".join(map(string, records)))
assert recv(c, 1) == b"\0", "WAIT did not answer STOP_WAITING"
for key, value in writes:
    if isinstance(value, dict):
        value = value["fill"] * value["bytes"]
    c.sendall(bytes([SET]) + string((prefix + key).encode()) + string(value.encode()) +
              bytes([GETNUMKEYS]))
    recv(c, 8)
print("wrote", len(writes), "keys", flush=True)
"""

# Every rank runs through this; the late one first waits for the test's go.
WRAPPER = """#!/bin/bash
echo $$ > "{dir}/pid.$RANK"
if [ "$RANK" = "{late}" ]; then
  read -r -t 90 _ < "{gate}" || exit 97
fi
exec "{bin}" "$@"
"""


def have_torch():
    try:
        return subprocess.run([PYTHON, "-c", "import torch.distributed.run"],
                              capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def peak_rss_mib(pid):
    """The peak resident memory of a running process (VmHWM), in MiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmHWM for pid {pid}")


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def is_rank(pid, wrapper):
    """Whether pid still runs a rank of ours (gpudiag, or the wrapper
    before its exec), not a process that reused the number."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except FileNotFoundError:
        return False
    return alive(pid) and any(a in (BIN.encode(), wrapper.encode()) for a in argv)


def rank_exits(text):
    """{rank: exit status} of the failed ranks in torchrun's error summary."""
    return {int(r): int(c) for r, c in
            re.findall(r"rank\s+: (\d+) \(local_rank: \d+\)\n\s+exitcode\s+: (-?\d+)", text)}


class TorchrunJob:
    """A torchrun job of n gpudiag ranks whose last rank starts on release(),
    with its output in files, so a test can read it while the job runs."""

    def __init__(self, n, json_report=False):
        self.n, self.late = n, n - 1
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.report = os.path.join(self.dir, "report.json")
        self.gate = os.path.join(self.dir, "gate")
        os.mkfifo(self.gate)
        # Held open for writing, so the late rank's read waits for release();
        # should this process die, the read ends at once with EOF.
        self.gate_fd = os.open(self.gate, os.O_RDWR)
        self.wrapper = wrapper = os.path.join(self.dir, "rank.sh")
        with open(wrapper, "w") as f:
            f.write(WRAPPER.format(dir=self.dir, late=self.late, gate=self.gate, bin=BIN))
        os.chmod(wrapper, 0o755)
        self.port = free_port()
        self.run_id = f"hostile-{self.port}"
        self.prefix = f"gpudiag/{self.run_id}/0/"
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("OMPI_", "PMIX", "SLURM_", "GPUDIAG_", "TORCHELASTIC_"))
               and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
        self.out = open(os.path.join(self.dir, "out"), "w")
        self.err = open(os.path.join(self.dir, "err"), "w")
        args = [*ARGS, "--json", self.report] if json_report else ARGS
        # --redirects 2 --tee 2: torch 1.13's default "0" does not parse under
        # Python 3.11 (test_torchrun.py). --monitor_interval 0.2: torchrun sees
        # its ranks end within 0.2 s instead of 5.
        self.proc = subprocess.Popen(
            [PYTHON, "-m", "torch.distributed.run", "--redirects", "2", "--tee", "2",
             "--monitor_interval", "0.2", "--nnodes", "1", "--nproc_per_node", str(n),
             "--master_addr", "127.0.0.1", "--master_port", str(self.port),
             "--rdzv_id", self.run_id, "--no_python", wrapper, *args],
            env=env, stdout=self.out, stderr=self.err, start_new_session=True)

    def stdout(self):
        with open(self.out.name) as o:
            return o.read()

    def text(self):
        with open(self.err.name) as e:
            return self.stdout() + e.read()

    def wait_for(self, needle, count=1, seconds=40):
        """Waits until the job's output holds `needle` `count` times."""
        deadline = time.monotonic() + seconds
        while self.text().count(needle) < count:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(f"the job never said {needle!r} x{count}:\n{self.text()[-4000:]}")
            time.sleep(0.05)

    def pids(self):
        """{rank: pid} of the ranks started so far (the wrapper execs gpudiag)."""
        out = {}
        for r in range(self.n):
            try:
                with open(os.path.join(self.dir, f"pid.{r}")) as f:
                    out[r] = int(f.read())
            except (FileNotFoundError, ValueError):
                pass
        return out

    def release(self):
        """Lets the late rank start."""
        os.write(self.gate_fd, b"go\n")

    def finish(self, seconds=90):
        """Waits for torchrun; returns its exit status. A hang fails."""
        try:
            return self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"torchrun still running after {seconds}s: a hang")

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)  # torchrun and its ranks
            self.proc.wait()
        for pid in self.pids().values():
            if is_rank(pid, self.wrapper):
                os.kill(pid, signal.SIGKILL)

    def close(self):
        self.kill()
        os.close(self.gate_fd)
        self.out.close()
        self.err.close()
        self.tmp.cleanup()


@unittest.skipUnless(have_torch(), "Debian's python3-torch is not installed (install-deps.sh --test)")
class HostileTorchStore(unittest.TestCase):
    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to run the attacker as user nobody (runuser)")

    def start(self, n, json_report=False):
        job = TorchrunJob(n, json_report)
        self.addCleanup(job.close)
        return job

    def attack(self, job, writes):
        """Runs the attacker as `nobody` until it has written `writes`."""
        cmd = ["runuser", "-u", "nobody", "--", PYTHON, "-c", ATTACKER, str(job.port), job.prefix,
               str(job.late), json.dumps(writes)]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
        try:
            out, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)  # runuser and the attacker under it
            p.communicate()
            raise AssertionError(f"the attacker hung:\n{job.text()[-3000:]}")
        self.assertEqual(p.returncode, 0, f"attacker failed: {err[-2000:]}\n{job.text()[-3000:]}")
        self.assertIn(f"wrote {len(writes)} keys", out)

    def finish(self, job):
        """Ends the job; returns torchrun's status and the output, once sure
        that no rank reported an internal error and that none is left running."""
        code = job.finish()
        text = job.text()
        self.assertNotIn("internal error", text)
        self.assertEqual(len(job.pids()), job.n, text[-3000:])
        self.assertFalse([r for r, pid in job.pids().items() if is_rank(pid, job.wrapper)],
                         "ranks left behind")
        return code, text

    def assert_rank_0_broken(self, job, text, why):
        """Rank 0 printed one status line that says `why` and exited 1."""
        self.assertEqual(rank_exits(text), {0: 1}, text[-3000:])
        lines = [m["reason"] for m in broken_lines(job.stdout())]
        self.assertEqual(len(lines), 1, text[-3000:])
        self.assertIn(why, lines[0])
        self.assertEqual(ok_lines(job.stdout()), [])

    # --- a forged counter is ignored: the job stays OK --------------------------------

    def forged_counter(self, value):
        job = self.start(3)
        self.attack(job, [["failures", value]])
        for r in range(job.late):
            job.wait_for(f"rank {r}: {IGNORED} '{value}'")
        rss = {r: peak_rss_mib(pid) for r, pid in job.pids().items()}
        job.release()
        code, text = self.finish(job)
        self.assertEqual(code, 0, text[-3000:])
        self.assertEqual(sorted(int(m["rank"]) for m in ok_lines(job.stdout())), [0, 1, 2], text)
        self.assertIn("summary: 3/3 ranks OK", job.stdout())
        for r in range(job.late):  # once each, however often it looked
            self.assertEqual(text.count(f"rank {r}: {IGNORED}"), 1, text)
        # About 11 MiB a rank here; a rank that built keys for the forged
        # count, or read it as a size, would be far past this (or dead).
        self.assertTrue(all(m < 100 for m in rss.values()), f"peak RSS in MiB: {rss}")
        self.assertEqual(text.count(UNAUTHENTICATED), 1, text)  # once per job, by rank 0
        self.assertNotIn("set GPUDIAG_SECRET", text)  # which cannot help on this store

    def test_a_failure_counter_that_is_not_a_number(self):
        self.forged_counter("abc")

    def test_a_failure_counter_of_int64_max(self):
        self.forged_counter("9223372036854775807")

    # --- attacks that end the job: rank 0 alone waits (see the top) ------------------

    def test_a_value_over_one_mib_is_one_line_and_exit_1(self):
        job = self.start(2)
        big = {"fill": "x", "bytes": MAX_VALUE + 1}
        self.attack(job, [["failure/1", big], ["failures", "1"]])
        code, text = self.finish(job)  # the late rank is never let go
        self.assertEqual(code, 1, text[-3000:])
        self.assert_rank_0_broken(
            job, text, f"answered GET 'failure/1' with a {MAX_VALUE + 1}-byte value, more than "
                       f"gpudiag ever stores ({MAX_VALUE})")
        self.assertEqual(text.count(UNAUTHENTICATED), 1, text)

    def test_a_forged_failure_record_changes_the_verdict_of_an_unauthenticated_store(self):
        job = self.start(2, json_report=True)
        forged = "failed\tforged by nobody\nsecond line\x1b[31m"
        self.attack(job, [["failure/1", forged], ["failures", "1"]])
        code, text = self.finish(job)  # the late rank is never let go
        self.assertEqual(code, 1, text[-3000:])
        # Cut to one printable line; no rank can tell it from a real failure,
        # but each has said that its store could be forged, and why.
        self.assert_rank_0_broken(job, text, "forged by nobody?second line?[31m")
        self.assertEqual(text.count(f"rank 0: the store at 127.0.0.1:{job.port} "
                                    f"{UNAUTHENTICATED}"), 1, text)
        self.assertIn("store unauthenticated (torchrun's agent store cannot authenticate)",
                      job.stdout())
        with open(job.report) as f:
            report = json.load(f)
        self.assertFalse(report["ok"])
        self.assertFalse(report["store_authenticated"])
        self.assertEqual(report["store_unauthenticated_why"],
                         "torchrun's agent store cannot authenticate")
        self.assertIn("forged by nobody?second line", report["ranks"][0]["reason"])


if __name__ == "__main__":
    unittest.main()
