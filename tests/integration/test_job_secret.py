"""The job secret (issue 12): every connection to gpudiag's store proves it knows
the job's secret with an HMAC challenge-response, so a local user of a shared node
(run here as user `nobody`) who knows the job token but not the secret cannot
join the store, forge a failure, or claim a rank; two jobs with different
secrets on one port refuse each other's ranks; a secret file others may read is
refused in one line; and ranks started by hand without a secret still meet, and
say that their store is unauthenticated.

Real processes on loopback; the attacker is `python3 -c` with the standard
library only (it speaks the handshake from docs/rendezvous.md), so `nobody`
needs no file of this checkout."""
import os
import re
import subprocess
import sys
import tempfile
import unittest

from harness import STORE_WIRE_PRELUDE, BIN, free_port, ok_lines, rank_env

ARGS = ["check", "--backend", "host", "--size", "1MiB", "--mem", "1MiB", "--iters", "1",
        "--timeout", "60"]
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
REFUSED = ("refused this rank's job secret: ranks of one job must share GPUDIAG_SECRET or "
           "--secret-file")

# forge TOKEN SECRET|- KEY VALUE: joins the store (with a proof of SECRET, or as
# a client of before the secret when "-") and, if it gets in, sets KEY.
ATTACKER = STORE_WIRE_PRELUDE + r'''
import hashlib, hmac, os
def read_frame(c):
    buf = b""
    while len(buf) < 4 or len(buf) < 4 + struct.unpack("<I", buf[:4])[0]:
        chunk = c.recv(65536)
        if not chunk: return None, b""
        buf += chunk
    return buf[4], buf[9:]
def proof(secret, label, sn, cn, token, rank):
    msg = b"".join(s(x) for x in (label, sn, cn, token)) + struct.pack("<I", rank)
    return hmac.new(secret, msg, hashlib.sha256).digest()
_, port, token, secret, key, value = sys.argv
until = time.monotonic() + 20
while True:
    try:
        c = socket.create_connection(("127.0.0.1", int(port)), timeout=10); break
    except OSError:
        if time.monotonic() > until: raise
        time.sleep(0.05)
token = token.encode()
if secret == "-":
    c.sendall(MAGIC + frame(1, 0, struct.pack("<H", 1) + s(token)))
    t, payload = read_frame(c)
else:
    # SECRET, or SECRET:empty / SECRET:trunc / SECRET:long: the right secret's
    # proof sent empty, cut to 16 bytes, or with a byte more.
    secret, _, how = secret.partition(":")
    cn, rank = os.urandom(32), 1
    c.sendall(MAGIC + frame(1, 0, struct.pack("<H", 1) + s(token) + struct.pack("<BI", 1, rank) + s(cn)))
    t, payload = read_frame(c)
    if t == 0x88:
        sn = payload[4:]
        p = proof(secret.encode(), b"gpudiag-store-v1 client", sn, cn, token, rank)
        p = {"": p, "empty": b"", "trunc": p[:16], "long": p + b"\0"}[how]
        c.sendall(frame(9, 0, s(p)))
        t, payload = read_frame(c)
if t == 0x81:
    c.sendall(frame(2, 1, s(key.encode()) + s(value.encode())))
    print("joined; set ->", read_frame(c)[0])
elif t == 0x87:
    print("refused code", payload[0], payload[5:].decode(errors="replace"))
else:
    print("other", t)
'''


def attack(port, token, secret, key="failures", value="1"):
    if os.geteuid() != 0:
        raise unittest.SkipTest("needs root to run the attacker as user nobody (runuser)")
    p = subprocess.run(["runuser", "-u", "nobody", "--", PYTHON, "-c", ATTACKER, str(port), token,
                        secret, key, value], capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise AssertionError(f"attacker failed: {p.stderr[-2000:]}")
    return p.stdout


def gpudiag_lines(err):
    return [l for l in err.splitlines() if l.startswith("gpudiag:")]


class JobSecret(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.communicate()
        self.tmp.cleanup()

    def start(self, cmd, env):
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        self.procs.append(p)
        return p

    def finish(self, p, timeout=120):
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            raise AssertionError("a hang")
        return p.returncode, out, err

    def secret_file(self, content, mode):
        path = os.path.join(self.tmp.name, "secret")
        with open(path, "w") as f:
            f.write(content + "\n")
        os.chmod(path, mode)
        return path

    def test_an_outsider_who_knows_the_token_cannot_forge_under_gpudiag_launch(self):
        # Two nodes sharing one secret: node 0 through --secret-file, node 1 through
        # GPUDIAG_SECRET. Node 1 starts after the attacks, so node 0's ranks wait.
        port, token, secret = free_port(), "a-token-everyone-can-compute", "the-job-secret-1234"
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPUDIAG_")}
        env["GPUDIAG_TOKEN"] = token
        node = ["launch", "--nproc-per-node", "2", "--nnodes", "2", "--master-addr", "127.0.0.1",
                "--master-port", str(port)]
        n0 = self.start([BIN, *node, "--node-rank", "0", "--secret-file",
                         self.secret_file(secret, 0o600), "--", *ARGS], env)
        out = attack(port, token, "-", "failures", "1")  # a client of before the secret
        self.assertIn("refused code 7", out)
        out = attack(port, token, "a-guess", "failure/1", "rank 1 failed: NVLink error")
        self.assertIn("refused code 7", out)
        self.assertIn("proof of the job secret is wrong", out)
        n1 = self.start([BIN, *node, "--node-rank", "1", "--", *ARGS],
                        dict(env, GPUDIAG_SECRET=secret))
        c0, out0, err0 = self.finish(n0)
        c1, out1, err1 = self.finish(n1)
        self.assertEqual((c0, c1), (0, 0), err0[-3000:] + err1[-3000:])
        self.assertEqual((out0 + out1).count(" is OK (global rank: "), 4, out0 + out1)
        self.assertIn("does not know the job's secret", err0)  # the store's warning
        self.assertNotIn("unauthenticated", err0 + err1)

    def test_a_single_node_launch_draws_its_own_secret(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPUDIAG_")}
        code, out, err = self.finish(self.start(
            [BIN, "launch", "--nproc-per-node", "2", "--", *ARGS], env))
        self.assertEqual(code, 0, err[-3000:])
        self.assertEqual(len(ok_lines("\n".join(l.split("]: ", 1)[-1] for l in out.splitlines()))), 2, out)
        self.assertNotIn("unauthenticated", err)
        self.assertNotIn("unauthenticated", out)

    def test_no_output_shows_the_secret(self):
        # `info` in text and JSON, by hand and as every rank of a launch given the
        # secret by --secret-file (which hands it to the ranks as GPUDIAG_SECRET).
        secret = "do-not-print-me-42"
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPUDIAG_")}
        for args in (["info"], ["info", "--json"]):
            code, out, err = self.finish(self.start([BIN, *args], dict(env, GPUDIAG_SECRET=secret)))
            self.assertEqual(code, 0, err)
            self.assertNotIn(secret, out + err)
            self.assertIn("GPUDIAG_SECRET", out)
            self.assertIn("not shown", out)
        code, out, err = self.finish(self.start(
            [BIN, "launch", "--nproc-per-node", "2", "--secret-file",
             self.secret_file(secret, 0o600), "--", "info"], env))
        self.assertEqual(code, 0, err[-3000:])
        self.assertNotIn(secret, out + err)
        self.assertEqual(out.count("GPUDIAG_SECRET=(set, 18 bytes, not shown)"), 2, out)
        # The secret a launch draws for itself is not shown either.
        code, out, err = self.finish(self.start([BIN, "launch", "--nproc-per-node", "2", "--", "info"], env))
        self.assertEqual(code, 0, err[-3000:])
        self.assertEqual(len(re.findall(r"GPUDIAG_SECRET=", out)), 2, out)
        self.assertEqual(len(re.findall(r"GPUDIAG_SECRET=\(set, \d+ bytes, not shown\)", out)), 2, out)

    def test_two_jobs_by_hand_with_different_secrets_refuse_each_others_ranks(self):
        port = free_port()
        a = lambda r: rank_env(r, 2, port, extra={"GPUDIAG_SECRET": "secret-of-job-a"})
        b = lambda r: rank_env(r, 2, port, extra={"GPUDIAG_SECRET": "secret-of-job-b"})
        a0 = self.start([BIN, *ARGS], a(0))
        # Job b's rank 1 reaches job a's store (same port, same by-hand token): refused.
        code, _, err = self.finish(self.start([BIN, *ARGS], b(1)))
        self.assertEqual(code, 2, err)
        lines = gpudiag_lines(err)
        self.assertEqual(len(lines), 1, err)
        self.assertIn(f"the store at 127.0.0.1:{port} {REFUSED}", lines[0])
        code, _, err = self.finish(self.start([BIN, *ARGS], b(0)))  # its rank 0: port in use
        self.assertEqual(code, 2, err)
        a1 = self.start([BIN, *ARGS], a(1))
        results = [self.finish(p) for p in (a0, a1)]
        self.assertEqual([r[0] for r in results], [0, 0], [r[2][-2000:] for r in results])
        self.assertIn("does not know the job's secret", results[0][2])

    def test_the_right_secrets_proof_empty_cut_or_padded_is_refused(self):
        # A handshake that took an empty proof, or compared a prefix, would let
        # anyone in: the proof must be exactly the HMAC of the right secret.
        port, secret = free_port(), "s-right-secret"
        r0 = self.start([BIN, *ARGS], rank_env(0, 2, port, extra={"GPUDIAG_SECRET": secret}))
        for how in ("empty", "trunc", "long"):
            out = attack(port, "gpudiag-by-hand", secret + ":" + how)
            self.assertIn("refused code 7", out, how)
        r1 = self.start([BIN, *ARGS], rank_env(1, 2, port, extra={"GPUDIAG_SECRET": secret}))
        results = [self.finish(p) for p in (r0, r1)]
        self.assertEqual([r[0] for r in results], [0, 0], [r[2][-2000:] for r in results])

    def test_a_rank_without_the_secret_is_refused_by_a_store_with_one(self):
        port = free_port()
        r0 = self.start([BIN, *ARGS], rank_env(0, 2, port, extra={"GPUDIAG_SECRET": "s-1234"}))
        code, _, err = self.finish(self.start([BIN, *ARGS], rank_env(1, 2, port)))
        self.assertEqual(code, 2, err)
        self.assertIn(REFUSED, err)
        self.assertIn("this rank has none", err)
        r0.kill()

    def test_a_secret_file_others_may_read_is_refused_in_one_line(self):
        path = self.secret_file("s3cret", 0o644)
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPUDIAG_")}
        code, out, err = self.finish(self.start(
            [BIN, "launch", "--nproc-per-node", "2", "--secret-file", path, "--", *ARGS], env))
        self.assertEqual(code, 2, err)
        lines = gpudiag_lines(err)
        self.assertEqual(len(lines), 1, err)
        self.assertIn(f"--secret-file {path} has mode 0644", lines[0])
        self.assertIn("chmod 600", lines[0])
        self.assertNotIn("is OK", out)
        # The same file named by GPUDIAG_SECRET_FILE on a rank started by hand.
        code, _, err = self.finish(self.start(
            [BIN, *ARGS], rank_env(0, 2, free_port(), extra={"GPUDIAG_SECRET_FILE": path})))
        self.assertEqual(code, 2, err)
        self.assertIn("GPUDIAG_SECRET_FILE " + path + " has mode 0644", err)

    def test_by_hand_without_a_secret_still_works_and_says_unauthenticated(self):
        port = free_port()
        procs = [self.start([BIN, *ARGS], rank_env(r, 2, port)) for r in range(2)]
        results = [self.finish(p) for p in procs]
        self.assertEqual([r[0] for r in results], [0, 0], [r[2][-2000:] for r in results])
        self.assertEqual(len(ok_lines("".join(r[1] for r in results))), 2)
        # Once per job: rank 0 says it, with what to do; the others do not repeat it.
        for r, (_, _, err) in enumerate(results):
            said = [l for l in err.splitlines() if "is unauthenticated" in l]
            self.assertEqual(len(said), 1 if r == 0 else 0, err)
        self.assertIn(f"rank 0: the store at 127.0.0.1:{port} is unauthenticated", results[0][2])
        self.assertIn("set GPUDIAG_SECRET or GPUDIAG_SECRET_FILE", results[0][2])
        # The report says so too, where the verdict is read.
        self.assertIn("store unauthenticated (no GPUDIAG_SECRET or GPUDIAG_SECRET_FILE)",
                      results[0][1])


if __name__ == "__main__":
    unittest.main()
