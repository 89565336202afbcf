"""A model of what NCCL's RAS prints for `VERBOSE STATUS`, made from NCCL's source.

A Job (processes, communicators, ranks with their collective counts and states) is
rendered as RAS renders it: the text report of NCCL 2.24 to 2.30 and the JSON document
of 2.28.7 and later. Every rule cites where NCCL says so (paths in NVIDIA/nccl, tag
v2.28.9-1 unless named; "client_support.cc" is src/ras/client_support.cc). The model
covers what gpudiag reads: the job summary, the communicator table, the Errors section
(INCOMPLETE, DEAD, a communicator's INCOMPLETE and ERROR) and the Warnings section
(TIMEOUT, a communicator's MISMATCH: status and operation counts). It does not model
the RAS network itself: which processes answered is given, not found. Moving is a Job whose
ranks go on launching collectives between one STATUS and the next."""
import copy
import ipaddress
from dataclasses import dataclass, field

# src/include/nccl_common.h: NCCL_NUM_FUNCTIONS 5, in this order; src/init.cc ncclFuncStr.
FUNCS = ["Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"]
# client_support.cc rasClientRunComms: statusStr (by the index of the highest status bit)
# and errorStr (by the bitmask MISMATCH=1, ERROR=2, INCOMPLETE=4).
STATUS = ["NOCOMM", "INIT", "RUNNING", "FINALIZE", "ABORT"]
ERRORS = ["OK", "MISMATCH", "ERROR", "ERROR,MISMATCH", "INCOMPLETE", "INCOMPLETE,MISMATCH",
          "INCOMPLETE,ERROR", "INCOMPLETE,ERROR,MISMATCH"]
NOCOMM, INIT, RUNNING, FINALIZE, ABORT = 1, 2, 4, 8, 16  # client_support.cc rasACStatus
MISMATCH, ERROR, INCOMPLETE = 1, 2, 4                    # client_support.cc rasACError
IN_PROGRESS = 7  # ncclInProgress: neither success nor an error (rasClientRunComms)


def nccl_error_text(code):
    """client_support.cc ncclErrorToString."""
    return {1: "Unhandled CUDA error", 2: "System error", 3: "Internal error",
            4: "Invalid argument", 5: "Invalid usage", 6: "Remote process error",
            7: "NCCL operation in progress"}.get(code, "Unexpected error")


@dataclass
class Process:
    host: str                  # the IP of its RAS socket (ncclSocketToHost prints no name)
    pid: int
    gpus: list                 # CUDA devices it manages (rasPeerInfo.cudaDevs)
    nvml: list = None          # NVML devices (rasPeerInfo.nvmlDevs); None: the same
    port: int = 0              # its RAS port: rasPeers are sorted by address and port
    dead: bool = False         # in rasDeadPeers
    answers: bool = True       # answered the RAS_COLL_COMMS collective (in coll->peers)

    def key(self):  # ncclSocketsCompare: address, then port
        return (ipaddress.ip_address(self.host).packed, self.port)

    def responded(self):
        return self.answers and not self.dead


@dataclass
class Rank:
    rank: int                  # commRank
    proc: Process
    cuda_dev: int
    nvml_dev: int = None
    counts: list = field(default_factory=lambda: [0] * 5)  # collOpCounts (2.26+: seqNumber)
    init_state: int = 0
    async_error: int = 0
    finalize: bool = False
    destroy: bool = False
    abort: bool = False

    def nvml(self):
        return self.cuda_dev if self.nvml_dev is None else self.nvml_dev

    def status(self):
        """client_support.cc rasClientRunComms: abort, then finalize/destroy, then init."""
        if self.abort:
            return ABORT
        if self.finalize or self.destroy:
            return FINALIZE
        return RUNNING if self.init_state == 0 else INIT


@dataclass
class Comm:
    hash: int
    size: int                  # commNRanks
    ranks: list                # Rank of every member; those of processes that did not
    member_gone: set = field(default_factory=set)  # answer, or ranks in member_gone, are missing
    host_hash: int = 0x1111
    pid_hash: int = 0x2222


@dataclass
class Job:
    processes: list
    comms: list
    version: str = "2.28.9"
    cuda: str = "12.9"
    runtime: int = 12090
    driver: int = 12090
    timeouts: int = 0           # coll->nLegTimeouts
    seconds: float = 0.004      # collection time printed
    timestamp: str = "2026-01-02 03:04:05"

    def flavour(self):
        """(2, 24) ...: which text NCCL prints (client_support.cc differs at 2.26 and 2.28.7)."""
        return tuple(int(x) for x in self.version.split(".")[:2])


def gpu_list(proc):
    """client_support.cc rasGpuDevsToString: "0,1", and " (NVML 2,3)" when they differ."""
    text = ",".join(str(g) for g in sorted(proc.gpus))
    if proc.nvml is not None and sorted(proc.nvml) != sorted(proc.gpus):
        text += " (NVML " + ",".join(str(g) for g in sorted(proc.nvml)) + ")"
    return text


def rank_gpu(r):
    """client_support.cc rasGpuToString: "3", or "3 (NVML 5)"."""
    return str(r.cuda_dev) + ("" if r.nvml() == r.cuda_dev else " (NVML %d)" % r.nvml())


def is_outlier(count, verbose, total=-1):
    """client_support.cc rasCountIsOutlier (RAS_CLIENT_DETAIL_THRESHOLD 10, fractions .25/.5)."""
    if count == 1:
        return True
    if verbose:
        return count < total * 0.5 if total != -1 else True
    return count <= 10 and (total == -1 or count <= total * 0.25)


def highest(bits):
    """The index of the highest bit (32 - 1 - __builtin_clz). NCCL calls it with 0 only for a
    communicator of no ranks (ras_misalign.py), where clz is undefined: the model says 0."""
    return max(bits.bit_length() - 1, 0)


class Analysis:
    """The aux data rasClientRunComms derives per communicator (rasAuxComm)."""

    def __init__(self, job, comm):
        self.comm = comm
        self.present = [r for r in comm.ranks
                        if r.proc.responded() and r.rank not in comm.member_gone]
        self.missing = [r for r in comm.ranks if r not in self.present]
        if hasattr(comm, "records"):  # read from misaligned bytes (ras_misalign.FakeComm)
            self.missing = list(comm.records)
        self.status = self.errors = self.incomplete = 0
        peers_missing = sum(1 for p in job.processes if not p.dead and not p.answers)
        dead = sum(1 for p in job.processes if p.dead)
        for r in self.missing:  # client_support.cc rasClientRunComms: nMissingRanks > 0
            if (peers_missing == 0 and dead == 0) or r.proc.responded():
                self.errors |= MISMATCH
                self.status |= NOCOMM
            else:
                self.errors |= INCOMPLETE
                self.incomplete += 1
        order = sorted(self.present, key=lambda r: (r.proc.key(), r.rank))
        procs = []
        for r in order:
            self.status |= r.status()
            if r.counts != order[0].counts:
                self.errors |= MISMATCH
            if r.init_state not in (0, IN_PROGRESS) or r.async_error not in (0, IN_PROGRESS):
                self.errors |= ERROR
            if not procs or procs[-1] is not r.proc:
                procs.append(r.proc)
        if bin(self.status).count("1") > 1:
            self.errors |= MISMATCH
        nodes = {}
        for r in order:
            nodes.setdefault(r.proc.host, []).append(r)
        self.nodes = len(nodes)
        per_node = [len(v) for v in nodes.values()] or [0]
        self.per_node = (min(per_node), max(per_node))

    def sort_key(self):
        """client_support.cc rasAuxCommsCompareRev: size, nodes, status, errors (all largest
        first), then the fewest ranks present first."""
        return (-self.comm.size, -self.nodes, -highest(self.status), -self.errors, len(self.present))

    def group_key(self):
        return (self.comm.size, self.nodes, highest(self.status), self.errors)


class Moving:
    """A busy job: RasModel calls it at each STATUS (it takes a function) and gets the job as
    RAS reads it then. At the n-th call (from 0), rank r of every communicator has launched
    `step(n, r)` more all-reduces than `job` says. NCCL counts a collective when the host
    launches it (2.26+: collectives.cc rasCollCommsInit copies comm->seqNumber, which
    src/plugin/profiler.cc bumps as each collective is launched; before, collOpCount), so
    counts only grow, and RAS reads each process at its own moment: on a busy job they
    differ by a launch or two at any instant."""

    def __init__(self, job, step):
        self.job, self.step, self.calls = job, step, 0
        self.version = job.version

    def __call__(self):
        n, self.calls = self.calls, self.calls + 1
        now = copy.deepcopy(self.job)
        for c in now.comms:
            for r in c.ranks:
                r.counts = r.counts[:4] + [r.counts[4] + self.step(n, r.rank)]
        return now
