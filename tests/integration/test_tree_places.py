"""A judge's place cannot be taken by another local user (issue 53). Three
"nodes" made of network namespaces (scripts/netns-hosts.sh star), a
`gpudiag launch` on each with node leaders on (GPUDIAG_TREE=on), groups of 2
nodes and no job secret. Once node 1's launcher serves the root's store, its
group's and its node's, user `nobody`, on node 1's host, claims every place
of the layout (nodes 0-2, groups 0-1, the root) on all three stores before
the other launchers start, and, where it gets in, writes node 2's rank 3
dead, a failure and a part.
Every claim must be refused, and the job must end OK on both nodes with no
rank named: before, the claims were admitted and every healthy rank said
`rank 3 was killed`.

The outsider is `python3 -c` with the standard library only (it speaks the
handshake of docs/rendezvous.md), run by `runuser` in node 1's namespace."""
import os
import re
import subprocess
import sys
import unittest

from harness import BIN, SOURCE_DIR, STORE_WIRE_PRELUDE, clean_env, ok_lines, run, strip_prefix

NETNS = os.path.join(SOURCE_DIR, "scripts", "netns-hosts.sh")
PREFIX, PORT, TOKEN = "gtp", 29840, "a-token-anyone-can-compute"
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
NODE_CLAIM, GROUP_CLAIM, ROOT_CLAIM = 0xF1000000, 0xF2000000, 0xF3000000

# claim TOKEN HOST PORT CLAIM...: for each claim, on HOST:PORT, a handshake
# claiming it; if admitted, SET dead/3, ADD 1 to failures, SET failure/1 and a
# node's part. Prints "refused" or "admitted" a claim.
OUTSIDER = STORE_WIRE_PRELUDE + r'''
pending = b""
def read_frame(c):
    global pending
    while len(pending) < 4 or len(pending) < 4 + struct.unpack("<I", pending[:4])[0]:
        chunk = c.recv(65536)
        if not chunk: return None
        pending += chunk
    t, pending = pending[4], pending[4 + struct.unpack("<I", pending[:4])[0]:]
    return t
def connect(port):
    until = time.monotonic() + 30
    while True:  # the store may not listen yet
        try:
            return socket.create_connection((host, port), timeout=10)
        except ConnectionRefusedError:
            if time.monotonic() > until: raise
            time.sleep(0.05)
token, host, port = sys.argv[1].encode(), sys.argv[2], int(sys.argv[3])
for claim in map(int, sys.argv[4:]):
    pending = b""
    c = connect(port)
    c.sendall(MAGIC + frame(1, 0, struct.pack("<H", 1) + s(token) + struct.pack("<BI", 0, claim) + s(b"n" * 32)))
    if read_frame(c) != 0x81:
        print(hex(claim), "refused", flush=True)
        continue
    c.sendall(frame(2, 1, s(b"dead/3") + s(b"1")))
    c.sendall(frame(5, 2, s(b"failures") + struct.pack("<q", 1)))
    c.sendall(frame(2, 3, s(b"failure/1") + s(b"died\trank 3 was killed (FORGED by nobody)")))
    c.sendall(frame(2, 4, s(b"tree/cp/1/node/1") + s(b"FORGED")))
    print(hex(claim), "admitted", [read_frame(c) for _ in range(4)], flush=True)
'''


@unittest.skipUnless(os.geteuid() == 0, "network namespaces and runuser need root")
class PlacesAgainstAnOutsider(unittest.TestCase):
    def setUp(self):
        p = run([NETNS, "star", PREFIX, "3"], timeout=60)
        if p.returncode != 0:
            self.skipTest("cannot create network namespaces here: " + p.stderr.strip())
        self.addCleanup(run, [NETNS, "star-down", PREFIX, "3"], timeout=60)
        self.procs = []
        self.addCleanup(self.stop_all)

    def stop_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.communicate()

    def node(self, i):
        env = dict(clean_env(), GPUDIAG_TREE="on", GPUDIAG_TREE_GROUP_NODES="2",
                   GPUDIAG_TOKEN=TOKEN, GPUDIAG_LOG_LEVEL="info")
        p = subprocess.Popen(
            ["ip", "netns", "exec", f"{PREFIX}-{i + 1}", "unshare", "--uts", "sh", "-c",
             f"hostname node{i + 1}; exec {BIN} launch --nnodes 3 --node-rank {i} "
             f"--nproc-per-node 2 --master-addr 10.78.0.1 --master-port {PORT} -- "
             "check --backend host --timeout 30"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        return p

    def outsider(self, host, port, claims):
        p = subprocess.run(["ip", "netns", "exec", f"{PREFIX}-1", "runuser", "-u", "nobody", "--",
                            PYTHON, "-c", OUTSIDER, TOKEN, host, str(port), *map(str, claims)],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, (port, p.stderr[-2000:]))
        return p.stdout

    def test_no_place_is_admitted_from_another_users_process(self):
        n0 = self.node(0)
        # Node 1's launcher says where its node's store listens (127.0.0.1)
        # once it leads; its group's is on the next port, the root's on PORT.
        err0 = []
        for line in n0.stderr:
            err0.append(line)
            m = re.search(r"launch: leading node 0 .*its store at 127\.0\.0\.1:(\d+)", line)
            if m:
                node_port = int(m.group(1))
                break
        else:
            self.fail("node 1 never led: " + "".join(err0)[-3000:])
        places = [NODE_CLAIM, NODE_CLAIM | 1, NODE_CLAIM | 2, GROUP_CLAIM, GROUP_CLAIM | 1,
                  ROOT_CLAIM]
        for host, port in (("10.78.0.1", PORT), ("10.78.0.1", node_port + 1),
                           ("127.0.0.1", node_port)):
            out = self.outsider(host, port, places)
            self.assertEqual(out.count("refused"), len(places), (port, out))
            self.assertNotIn("admitted", out)
        others = [self.node(1), self.node(2)]
        outs = [p.communicate(timeout=180) for p in others]
        out0, rest = n0.communicate(timeout=180)
        err0 = "".join(err0) + rest
        text = out0 + err0 + "".join(o + e for o, e in outs)
        self.assertEqual([n0.returncode] + [p.returncode for p in others], [0, 0, 0], text[-6000:])
        self.assertEqual(len(ok_lines(strip_prefix(out0 + outs[0][0] + outs[1][0]))), 6, text)
        self.assertNotIn("FORGED", text)
        self.assertIn("claims a judge's place from a process of uid", err0)


if __name__ == "__main__":
    unittest.main()
