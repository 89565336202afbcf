"""The conformance suite of NCCL's RAS client protocol, written from NCCL's source
(src/ras/client_support.cc rasClientEventLoop, src/ras/client.cc; tag v2.28.9-1 unless
named), run by test_ras_protocol.py against the model of RAS (tests/ras_model) here, and
against a real NCCL's RAS socket wherever one runs (scripts/ras-real-nccl.sh on a GPU
machine). Where the two disagree the model is wrong, and so are the tests built on it.

Each check takes an endpoint ("host", port) and the NCCL version that serves it."""
import json
import socket
import time


def vtuple(version):
    return tuple(int(x) for x in version.split(".")[:3])


class Conn:
    """One connection to a RAS socket, read line by line, every read bounded.

    Every process of a node listens on the same port (SO_REUSEPORT) and the kernel picks one
    per connection; a stopped process takes it and never answers. open() does as ncclras
    (client.cc connectToNCCL): a connection without a greeting within 1 s is dropped and
    another opened."""

    def __init__(self, host, port, timeout=10):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""

    @classmethod
    def open(cls, host, port, tries=30):
        for _ in range(tries):
            c = cls(host, port, timeout=1)
            try:
                greeting = c.ask("CLIENT PROTOCOL 2")
            except socket.timeout:
                c.close()
                continue
            c.sock.settimeout(30)
            return c, greeting
        raise AssertionError("no process on %s:%d answered in %d connections" % (host, port, tries))

    def send(self, data):
        self.sock.sendall(data if isinstance(data, bytes) else data.encode())

    def line(self):
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("closed before a whole line: %r" % self.buf)
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode("latin-1")

    def ask(self, command):
        self.send(command + "\n")
        return self.line()

    def rest(self, limit=64 << 20):
        """Everything until RAS closes the connection."""
        out = self.buf
        while len(out) < limit:
            chunk = self.sock.recv(65536)
            if not chunk:
                return out.decode("latin-1")
            out += chunk
        raise AssertionError("more than %d bytes" % limit)

    def closed(self, within=5):
        self.sock.settimeout(within)
        try:
            while True:
                if not self.sock.recv(65536):
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False

    def close(self):
        self.sock.close()


def check_protocol(t, host, port, version):
    """t: a unittest.TestCase. Each assertion names the rule it checks."""
    c, greeting = Conn.open(host, port)
    try:
        # client_support.cc: "client protocol " (any case) -> "SERVER PROTOCOL 2"
        # (NCCL_RAS_CLIENT_PROTOCOL, ras_internal.h; 2 in 2.24.3 to 2.30.7).
        t.assertEqual(greeting, "SERVER PROTOCOL 2")
        t.assertEqual(c.ask("client protocol 7"), "SERVER PROTOCOL 2")
        t.assertEqual(c.ask("CLIENT PROTOCOL 2\r"), "SERVER PROTOCOL 2", "a trailing \\r is dropped")
        # "timeout " + strtol: a negative number or trailing junk is refused.
        t.assertEqual(c.ask("TIMEOUT 1"), "OK")
        t.assertEqual(c.ask("TIMEOUT -1"), "ERROR: Invalid timeout value -1")
        t.assertEqual(c.ask("TIMEOUT 3s"), "ERROR: Invalid timeout value 3s")
        # Anything else: "ERROR: Unknown command <line>".
        t.assertEqual(c.ask("HELLO there"), "ERROR: Unknown command HELLO there")
        # "set format " from 2.28.7 (absent from 2.28.3's client_support.cc).
        if vtuple(version) >= (2, 28, 7):
            t.assertEqual(c.ask("SET FORMAT xml"), "ERROR: Invalid format xml")
            t.assertEqual(c.ask("set format JSON"), "OK")
            t.assertEqual(c.ask("SET FORMAT text"), "OK")
        else:
            t.assertEqual(c.ask("SET FORMAT json"), "ERROR: Unknown command SET FORMAT json")
        # "verbose status": the report, then RAS closes (RAS_CLIENT_FINISHED), which is how
        # ncclras (client.cc getNCCLStatus) knows it ended.
        c.send("verbose status\n")
        text = c.rest()
    finally:
        c.close()
    first = text.split("\n", 1)[0]
    # rasClientRunInit: "NCCL version <v> compiled with CUDA <m>.<n>".
    t.assertRegex(first, r"^NCCL version %s(\S*) compiled with CUDA \d+\.\d+$" % version.replace(".", r"\."))
    t.assertRegex(text, r"\nCUDA runtime version \d+, driver version \d+\n\nJob summary\n===========\n")
    t.assertIn("\nCommunicators...", text)
    t.assertRegex(text, r"\nErrors\n======\n")
    t.assertRegex(text, r"\nWarnings\n========\n")


def check_json(t, host, port, version):
    """2.28.7 and later: the JSON document, valid wherever no rank is missing."""
    if vtuple(version) < (2, 28, 7):
        t.skipTest("NCCL %s has no JSON report (SET FORMAT came in 2.28.7)" % version)
    c, greeting = Conn.open(host, port)
    try:
        t.assertEqual(greeting, "SERVER PROTOCOL 2")
        t.assertEqual(c.ask("SET FORMAT json"), "OK")
        c.send("VERBOSE STATUS\n")
        text = c.rest()
    finally:
        c.close()
    t.assertTrue(text.startswith('{\n  "nccl_version": "%s' % version), text[:80])
    if '"missing_ranks_count": 0' in text or vtuple(version) >= (2, 29, 2):
        doc = json.loads(text)
        for key in ("cuda_runtime_version", "cuda_driver_version", "timestamp",
                    "communicators_count", "communicators", "ras"):
            t.assertIn(key, doc)
        for comm in doc["communicators"]:
            t.assertRegex(comm["hash"], r"^0x[0-9a-f]+$")
            for r in comm["ranks"]:
                t.assertEqual(sorted(r["collective_counts"]),
                              sorted(["Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"]))
                t.assertEqual(sorted(r["status"]), sorted(["init_state", "async_error", "finalize_called",
                                                           "destroy_flag", "abort_flag"]))
    return text


def check_long_line(t, host, port):
    """A line that fills RAS's 1024-byte buffer without a newline ends the connection
    (struct rasClient's recvBuffer[1024]; "RAS excessively long input line")."""
    c, _ = Conn.open(host, port)
    try:
        c.send(b"x" * 1100)
        t.assertTrue(c.closed(5), "RAS kept a connection whose line passed 1024 bytes")
    finally:
        c.close()


def version_of(host, port):
    """The NCCL version a RAS socket serves, from its text report's first line."""
    c, _ = Conn.open(host, port)
    try:
        c.send("STATUS\n")
        first = c.line()
    finally:
        c.close()
    if not first.startswith("NCCL version "):
        raise AssertionError("not RAS's report: %r" % first)
    return first.split()[2].split("+")[0]


def wait_listening(host, port, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError("nothing listens at %s:%d after %d s" % (host, port, timeout))
