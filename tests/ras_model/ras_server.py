"""A model of NCCL's RAS client socket (src/ras/client_support.cc rasClientEventLoop and
rasClientRun, tag v2.28.9-1 unless named), serving a model Job (ras_job.py) rendered by
ras_render.py, with faults a test can inject. What it does, rule by rule:

- listens on TCP (NCCL: NCCL_RAS_ADDR, default localhost:28028; rasClientInitSocket);
- reads commands of one line each, "\\n" ended, a trailing "\\r" dropped, case-insensitive;
  a line that fills its 1024-byte buffer without a newline ends the connection
  (struct rasClient's recvBuffer[1024]; "RAS excessively long input line");
- "CLIENT PROTOCOL <n>" -> "SERVER PROTOCOL 2\\n", whatever n (NCCL_RAS_CLIENT_PROTOCOL 2 in
  ras_internal.h, the same from 2.24.3 to 2.30.7);
- "TIMEOUT <s>" -> "OK\\n", or "ERROR: Invalid timeout value <s>\\n" for a negative number or
  trailing junk (strtol); the seconds bound the collective over the RAS network;
- "SET FORMAT text|json" -> "OK\\n" or "ERROR: Invalid format <f>\\n", from 2.28.7 on; before,
  like any other line: "ERROR: Unknown command <line>\\n";
- "STATUS" / "VERBOSE STATUS": in text, the versions and job summary at once, the rest after
  the collective (rasClientRunInit sends its part before RAS_COLL_COMMS completes); in JSON,
  one document at the end; then RAS closes the connection (RAS_CLIENT_FINISHED), which is how
  a client knows the reply ended (client.cc getNCCLStatus reads to EOF). Later lines are
  not read. A process that did not answer makes the collective wait its timeout.

Faults: "silent" (accepts, never answers), "garbage" (binary bytes for any line), "garbage-
reply" (handshake fine, binary reply), "bad-protocol" ("SERVER PROTOCOL 3"), "slow" (the reply
one byte every `drip_s`), "oversized" (an endless reply), "close-early" (half the reply)."""
import os
import socket
import threading
import time

import ras_render
from ras_job import Job

FAULTS = ("silent", "garbage", "garbage-reply", "bad-protocol", "slow", "oversized", "close-early")


def version_at_least(version, want):
    return tuple(int(x) for x in version.split(".")[:3]) >= want


class RasModel:
    """A RAS socket on host:port (port 0: a free one) serving `job`: a Job, or a function
    returning one, called at each STATUS (so a test can describe processes that exist then,
    or counts that moved: ras_job.Moving)."""

    def __init__(self, job, host="127.0.0.1", port=0, fault=None, drip_s=0.05, collect_s=0.0,
                 version=None):
        assert fault in (None,) + FAULTS, fault
        # The NCCL version decides the commands (SET FORMAT from 2.28.7); a function's jobs
        # should carry the same one.
        self.version = version or getattr(job, "version", None) or "2.28.9"
        self.job, self.fault, self.drip_s, self.collect_s = job, fault, drip_s, collect_s
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.sock.listen(64)
        self.host, self.port = host, self.sock.getsockname()[1]
        self.commands = []      # every line received, in order
        self.connections = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def address(self):
        return ("[%s]:%d" if ":" in self.host else "%s:%d") % (self.host, self.port)

    def close(self):
        self.stopping.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.thread.join(5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _accept(self):
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _job(self):
        return self.job() if callable(self.job) else self.job

    def _serve(self, conn):
        with conn:
            try:
                self._talk(conn)
            except OSError:
                pass  # the client went away

    def _talk(self, conn):
        buf, fmt, timeout = b"", "text", 5
        while not self.stopping.is_set():
            if b"\n" not in buf:
                if len(buf) >= 1024:
                    return  # client_support.cc: "RAS excessively long input line"
                data = conn.recv(1024 - len(buf))
                if not data:
                    return
                buf += data
                continue
            line, buf = buf.split(b"\n", 1)
            line = line[:-1] if line.endswith(b"\r") else line
            cmd = line.decode("latin-1")
            self.commands.append(cmd)
            low = cmd.lower()
            if self.fault == "silent":
                continue
            if self.fault == "garbage":
                conn.sendall(os.urandom(300) + b"\x00\xff")
                return
            if low.startswith("client protocol "):
                conn.sendall(b"SERVER PROTOCOL 3\n" if self.fault == "bad-protocol" else b"SERVER PROTOCOL 2\n")
            elif low.startswith("timeout "):
                arg = cmd[len("timeout "):]
                try:
                    value = int(arg)  # strtol with nothing after the number
                    ok = value >= 0 and arg.strip() == arg
                except ValueError:
                    ok = False
                if ok:
                    timeout = value
                conn.sendall(b"OK\n" if ok else ("ERROR: Invalid timeout value %s\n" % arg).encode("latin-1"))
            elif low.startswith("set format ") and version_at_least(self.version, (2, 28, 7)):
                arg = cmd[len("set format "):]
                if arg.lower() in ("text", "json"):
                    fmt = arg.lower()
                    conn.sendall(b"OK\n")
                else:
                    conn.sendall(("ERROR: Invalid format %s\n" % arg).encode("latin-1"))
            elif low in ("status", "verbose status"):
                self._status(conn, fmt, low == "verbose status", timeout)
                return  # RAS_CLIENT_FINISHED: the connection ends with the reply
            else:
                conn.sendall(("ERROR: Unknown command %s\n" % cmd).encode("latin-1"))

    def _status(self, conn, fmt, verbose, timeout):
        job = self._job()
        if self.fault == "garbage-reply":
            conn.sendall(os.urandom(2000))
            return
        if self.fault == "oversized":
            line = b"  Rank 1 -- GPU 1 managed by process 4242 on node 10.0.0.1\n"
            while not self.stopping.is_set():
                conn.sendall(line * 1000)
            return
        # A process that does not answer makes the collective wait out its leg timeout
        # (collectives.cc; each leg waits client->timeout, set by TIMEOUT).
        wait = self.collect_s + (min(timeout, 3) if any(not p.answers and not p.dead for p in job.processes) else 0)
        if fmt == "json":
            time.sleep(wait)
            self._send(conn, ras_render.json(job).encode())
            return
        first, rest = ras_render.text(job, verbose)
        self._send(conn, first.encode())
        time.sleep(wait)
        self._send(conn, rest.encode())

    def _send(self, conn, data):
        if self.fault == "close-early":
            conn.sendall(data[: len(data) // 2])
            conn.close()
            raise OSError("closed early on purpose")
        if self.fault == "slow":
            for i in range(len(data)):
                if self.stopping.is_set():
                    return
                conn.sendall(data[i:i + 1])
                time.sleep(self.drip_s)
            return
        conn.sendall(data)


def main():
    import argparse
    import ras_scenarios
    ap = argparse.ArgumentParser(description="serve a model NCCL RAS socket")
    ap.add_argument("--scenario", default="healthy",
                    choices=sorted(ras_scenarios.SCENARIOS) + sorted(ras_scenarios.MOVING))
    ap.add_argument("--version", default="2.28.9")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--fault", choices=FAULTS)
    args = ap.parse_args()
    make = ras_scenarios.SCENARIOS.get(args.scenario) or ras_scenarios.MOVING[args.scenario]
    server = RasModel(make(args.version), args.host, args.port, args.fault)
    print("listening on %s" % server.address(), flush=True)
    try:
        server.thread.join()
    except KeyboardInterrupt:
        server.close()


if __name__ == "__main__":
    main()
