"""Shared helpers for gpudiag's integration tests: where the binary is, how to
run it (and mpirun) with a hard timeout, how to read its status lines, and how
to make a rank stop or die at an exact phase (GPUDIAG_TEST_RAISE, the test hook
of src/checks/test_hook.h) and wait for it, instead of guessing with a sleep."""
import os
import re
import shutil
import subprocess
import time
import unittest

SOURCE_DIR = os.environ.get("GPUDIAG_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
BUILD_DIR = os.environ.get("GPUDIAG_BUILD_DIR", os.path.join(SOURCE_DIR, "build"))
BIN = os.environ.get("GPUDIAG_BIN", os.path.join(BUILD_DIR, "gpudiag"))

OK_RE = re.compile(r"^\[(?P<host>[^\]]+)-(?P<local>\d+)\] is OK \(global rank: (?P<rank>\d+)/(?P<size>\d+)\)$")
BROKEN_RE = re.compile(r"^\[(?P<host>[^\]]+)-(?P<local>\d+)\] is broken: (?P<reason>.+)$")


def mpirun_env(extra=None):
    env = dict(os.environ)
    # mpirun refuses to run as root without both of these.
    env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    # Keep Open MPI off the network interfaces of the machine: loopback only.
    env.setdefault("OMPI_MCA_btl_tcp_if_include", "lo")
    env.setdefault("OMPI_MCA_oob_tcp_if_include", "lo")
    for k in [k for k in env if k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")]:
        del env[k]
    if extra:
        env.update(extra)
    return env


def descendants(pid):
    """`ps` lines (pid, state, wait channel, command) of pid and everything under it."""
    rows = subprocess.run(["ps", "-eo", "pid=,ppid=,stat=,wchan:24=,args="], capture_output=True,
                          text=True).stdout.splitlines()
    kids, lines = {}, {}
    for r in rows:
        f = r.split(None, 4)
        if len(f) >= 4:
            kids.setdefault(int(f[1]), []).append(int(f[0]))
            lines[int(f[0])] = r.strip()
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        if p in lines:
            out.append(lines[p])
        todo += kids.get(p, [])
    return out


def pipe_holders(fileobj):
    """`ps`-style lines of every process that still holds the pipe behind
    `fileobj` open (found through /proc/*/fd), e.g. an orphan that inherited a
    command's stdout and keeps it open after the command ended."""
    try:
        target = os.readlink(f"/proc/self/fd/{fileobj.fileno()}")
    except (OSError, ValueError):
        return []
    held = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") == target for fd in fds):
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    held.append(pid + " " + f.read().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue
    return held


def native_stacks(tree, most=4):
    """Every thread's native stack of the first few processes still running
    (eu-stack, else nothing): where a hang waits, for the failure's text."""
    if not shutil.which("eu-stack"):
        return ""
    out = ""
    for line in tree[:most]:
        pid = line.split()[0]
        try:
            r = subprocess.run(["eu-stack", "-p", pid], capture_output=True, text=True, timeout=20)
            out += f"\n--- eu-stack -p {pid} ---\n" + (r.stdout or r.stderr)[-6000:]
        except (OSError, subprocess.TimeoutExpired) as e:
            out += f"\n--- eu-stack -p {pid}: {e}"
    return out


def run(args, timeout=120, env=None, **kw):
    """Runs a command; a hang fails the test instead of blocking the suite, and
    says what was still running (with each process's wait channel) and the
    output so far, so a hang in CI can be read after the fact. The command
    starts a session of its own, so on a timeout everything it started is
    killed, also what was reparented away from it; and the output is waited
    for a bounded time after that: a process outside that still holds the
    command's stdout or stderr is named instead of waited for forever."""
    data = kw.pop("input", None)
    stdin = kw.pop("stdin", subprocess.PIPE if data is not None else subprocess.DEVNULL)
    kw.setdefault("start_new_session", True)
    p = subprocess.Popen(args, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env, **kw)
    try:
        out, err = p.communicate(input=data, timeout=timeout)
    except subprocess.TimeoutExpired:
        tree = descendants(p.pid)
        ended = p.poll() is not None
        holders = pipe_holders(p.stdout) + pipe_holders(p.stderr)
        stacks = "" if ended else native_stacks(tree)
        if kw["start_new_session"]:
            try:
                os.killpg(p.pid, 9)
            except OSError:
                pass
        for line in tree:
            try:
                os.kill(int(line.split()[0]), 9)
            except (OSError, ValueError):
                pass
        try:
            out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            out, err = "(still held open)", "(still held open)"
        what = (f"{args} ended with status {p.returncode}, but its output was still held open "
                f"after {timeout} s by:\n" + "\n".join(sorted(set(holders)))) if ended else \
               (f"{args} did not end within {timeout} s; still running:\n" + "\n".join(tree))
        raise AssertionError(what + f"\n--- stdout (tail) ---\n{out[-3000:]}" +
                             f"\n--- stderr (tail) ---\n{err[-3000:]}" + stacks) from None
    return subprocess.CompletedProcess(args, p.returncode, out, err)


def mpirun(np, *args, timeout=180, env=None, mpi_args=()):
    cmd = ["mpirun", "-np", str(np), "--oversubscribe", *mpi_args, BIN, *args]
    return run(cmd, timeout=timeout, env=mpirun_env(env))


def ok_lines(stdout):
    return [m for m in (OK_RE.match(l) for l in stdout.splitlines()) if m]


def broken_lines(stdout):
    return [m for m in (BROKEN_RE.match(l) for l in stdout.splitlines()) if m]


# Debian's python3 with its python3-torch (the PATH's python3 may be another).
TORCH_PYTHON = "/usr/bin/python3"


def have_torch():
    """Whether Debian's torch (torch.distributed.run) can be imported."""
    try:
        return subprocess.run([TORCH_PYTHON, "-c", "import torch.distributed.run"],
                              capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def require(program):
    if shutil.which(program) is None:
        raise unittest.SkipTest(f"{program} is not installed (scripts/install-deps.sh --test)")


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(rank, size, port, addr="127.0.0.1", extra=None):
    """The variables a user sets to start rank `rank` of `size` by hand on one host."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_", "PMIX", "SLURM_", "TORCHELASTIC_", "GPUDIAG_"))}
    env.update(RANK=str(rank), WORLD_SIZE=str(size), LOCAL_RANK=str(rank),
               LOCAL_WORLD_SIZE=str(size), MASTER_ADDR=addr, MASTER_PORT=str(port))
    if extra:
        env.update(extra)
    return env


class Ranks:
    """Processes started by hand, one per rank; collects each one's output."""

    def __init__(self, envs, args, binary=None):
        self.procs = [subprocess.Popen([binary or BIN, *args], env=e, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True) for e in envs]
        self.out = [None] * len(self.procs)
        self.err = [None] * len(self.procs)
        self.codes = [None] * len(self.procs)

    def wait(self, timeout, skip=()):
        """Waits for every process not in `skip`; returns the seconds it took."""
        start = time.monotonic()
        for i, p in enumerate(self.procs):
            if i in skip:
                continue
            left = max(0.1, timeout - (time.monotonic() - start))
            try:
                self.out[i], self.err[i] = p.communicate(timeout=left)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError(f"rank {i} still running after {timeout}s: a hang")
            self.codes[i] = p.returncode
        return time.monotonic() - start

    def kill(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            for pipe in (p.stdout, p.stderr):  # also those of ranks never waited for
                if pipe:
                    pipe.close()

    def stdout(self, skip=()):
        return "".join(o or "" for i, o in enumerate(self.out) if i not in skip)


def clean_env():
    """This environment without any launcher's or rendezvous variables."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("OMPI_", "PMIX", "SLURM_", "TORCHELASTIC_", "GPUDIAG_"))
            and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}


def launch_torch_python(*args, timeout=300, extra_env=None):
    """`gpudiag launch ARGS` with a clean environment and the Python that has torch."""
    env = clean_env()
    env["PYTHON_EXEC"] = TORCH_PYTHON
    env.update(extra_env or {})
    return run([BIN, "launch", *args], env=env, timeout=timeout)


def write_scripts(prefix, scripts):
    """A new temporary folder holding {name: text}; returns its path."""
    import tempfile
    d = tempfile.mkdtemp(prefix=prefix)
    for name, text in scripts.items():
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    return d


def strip_prefix(out):
    """Output relayed by gpudiag launch without its "[rankN]: " prefixes (only a
    line's leading one: rank 0's bench report goes out unprefixed, and its lines
    may hold "]: " themselves, as in "# wrong on rank 0 [host]: ...")."""
    return "\n".join(re.sub(r"^\[rank\d+\]: ", "", l) for l in out.splitlines())


def children_by_rank(launcher_pid):
    """{rank: pid} of a launcher's children, read from their environment."""
    out = {}
    try:
        with open(f"/proc/{launcher_pid}/task/{launcher_pid}/children") as f:
            pids = [int(p) for p in f.read().split()]
    except FileNotFoundError:
        return out
    for pid in pids:
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
            out[int(env[b"RANK"])] = pid
        except (FileNotFoundError, KeyError, ValueError):
            pass
    return out


def raise_at(spec):
    """The environment that makes a rank raise a signal on itself at a phase:
    raise_at("SIGSTOP@device"), raise_at("SIGKILL@all-reduce#2:1") (see
    src/checks/test_hook.h)."""
    return {"GPUDIAG_TEST_RAISE": spec}


def process_state(pid):
    """The state letter of /proc/PID/stat ('R', 'S', 'T', 'Z', ...); None once gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat[stat.rindex(")") + 2]  # the command may hold spaces and parentheses


def wait_stopped(pid, timeout=60):
    """Waits until process `pid` is stopped (state 'T'), e.g. by its own
    GPUDIAG_TEST_RAISE=SIGSTOP@...; fails the test if it ends or never stops."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = process_state(pid)
        if state == "T":
            return
        if state in (None, "Z", "X"):
            raise AssertionError(f"pid {pid} ended instead of stopping")
        time.sleep(0.02)
    raise AssertionError(f"pid {pid} did not stop within {timeout}s (state {process_state(pid)})")


def resume(pid):
    """SIGCONT for a stopped rank in a test's cleanup; quiet if it is gone."""
    import signal
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass


# The start of an attacker script run with `python3 -c` as another user: the
# store's wire framing, from the standard library alone (that user may not
# be able to read this checkout).
STORE_WIRE_PRELUDE = r'''
import socket, struct, sys, time
MAGIC = b"GPDSTORE"
def frame(t, i, payload=b""):
    body = struct.pack("<BI", t, i) + payload
    return struct.pack("<I", len(body)) + body
def s(b):
    return struct.pack("<I", len(b)) + b
'''
