"""Named model jobs (ras_job.Job) with one fault each, for the tests and the fixtures:
what RAS would see in a job of 4 ranks (or 16) when all is well, when a rank is behind,
dead, silent, failed or aborted; and jobs whose counts move between one STATUS and the next
(MOVING: busy and skewed but healthy, or one rank stuck). Pids and hosts are made up unless
a test passes its own."""
from ras_job import Comm, Job, Moving, Process, Rank

WORLD = 0x5a1e4c0ffee12345
SUB = 0x00b0e5d00d00c0de


def procs(n, hosts=("127.0.0.1",), pid0=4000):
    per = n // len(hosts)
    return [Process(hosts[i // per], pid0 + i, [i % per], port=28100 + i) for i in range(n)]


def world(ps, all_reduces=120, comm_hash=WORLD):
    ranks = [Rank(i, p, p.gpus[0], counts=[2, 0, 0, 0, all_reduces]) for i, p in enumerate(ps)]
    return Comm(comm_hash, len(ranks), ranks)


def healthy(version="2.28.9"):
    ps = procs(4)
    return Job(ps, [world(ps)], version=version)


def behind(version="2.28.9"):
    """Rank 3 issued one all-reduce fewer than ranks 0-2."""
    ps = procs(4)
    c = world(ps)
    c.ranks[3].counts[4] = 119
    return Job(ps, [c], version=version)


def dead(version="2.28.9"):
    """Two nodes of two; rank 3's process (10.0.0.2) is dead to the RAS network."""
    ps = procs(4, ("10.0.0.1", "10.0.0.2"))
    ps[3].dead = True
    return Job(ps, [world(ps)], version=version)


def silent(version="2.28.9"):
    """Rank 2's process never answers the collective; rank 1 is behind."""
    ps = procs(4)
    ps[2].answers = False
    c = world(ps)
    c.ranks[1].counts[4] = 118
    return Job(ps, [c], version=version, timeouts=1)


def failed(version="2.28.9"):
    """Rank 1 reports an asynchronous error (a remote peer failed)."""
    ps = procs(4)
    c = world(ps)
    c.ranks[1].async_error = 6
    return Job(ps, [c], version=version)


def aborted(version="2.28.9"):
    """Rank 2 aborted its communicator; the others run."""
    ps = procs(4)
    c = world(ps)
    c.ranks[2].abort = True
    return Job(ps, [c], version=version)


def many(version="2.28.9"):
    """16 ranks on 2 nodes: 4 of them (a quarter: not outliers unless verbose) are behind, in
    a sub-communicator of ranks 0 and 8 rank 8 has not launched any broadcast."""
    ps = procs(16, ("10.0.0.1", "10.0.0.2"))
    c = world(ps)
    for r in (4, 5, 6, 7):
        c.ranks[r].counts[4] = 119
    sub = Comm(SUB, 2, [Rank(0, ps[0], 0, counts=[3, 0, 0, 0, 0]),
                        Rank(1, ps[8], 0, counts=[0, 0, 0, 0, 0])])
    return Job(ps, [c, sub], version=version)


def combo(version="2.28.9", pids=None, host="127.0.0.1", behind_rank=1):
    """The hang of a test: every rank on `host` with the given pids; `behind_rank` issued
    one all-reduce fewer than the others (it stopped before its next collective)."""
    ps = [Process(host, pid, [i], port=28100 + i) for i, pid in enumerate(pids or [4000, 4001])]
    c = world(ps, all_reduces=8)
    c.ranks[behind_rank].counts[4] = 7
    return Job(ps, [c], version=version)


PAIR = 0x7ac0ffee00000001  # sorts after WORLD: RAS gathers communicators by commId


def misaligned(version="2.28.9"):
    """Rank 3's process never answers; besides the world, a communicator of ranks 0 and 1
    whose rank 1 has launched no broadcast. In RAS's buffer the pair follows the world, so
    2.26 to 2.28.9 print, in its place, a communicator read from rank 3's missing-rank
    record (ras_misalign.py)."""
    ps = procs(4)
    ps[3].answers = False
    pair = Comm(PAIR, 2, [Rank(0, ps[0], 0, counts=[3, 0, 0, 0, 120]),
                          Rank(1, ps[1], 1, counts=[0, 0, 0, 0, 120])])
    return Job(ps, [world(ps), pair], version=version, timeouts=1)


def busy(version="2.28.9", launches=2):
    """A healthy busy job (a ras_job.Moving, for RasModel): at each STATUS every rank has
    launched `launches` more all-reduces, and ranks 1 and 3 are a launch behind the others
    at any instant (RAS read them a moment earlier)."""
    ps = procs(4)
    return Moving(Job(ps, [world(ps)], version=version),
                  lambda n, r: launches * n - (1 if r in (1, 3) else 0))


def skewed(version="2.28.9"):
    """A healthy job whose ranks are up to two launches apart at every STATUS, all moving."""
    ps = procs(4)
    skew = [0, 1, 2, 0]
    return Moving(Job(ps, [world(ps)], version=version), lambda n, r: n - skew[r])


def stuck_among_moving(version="2.28.9"):
    """Rank 3 stopped at 119 while the others, a launch ahead, go on launching (NCCL lets a
    rank enqueue collectives its peers have not reached)."""
    ps = procs(4)
    c = world(ps)
    c.ranks[3].counts[4] = 119
    return Moving(Job(ps, [c], version=version), lambda n, r: 0 if r == 3 else n)


SCENARIOS = {f.__name__: f for f in (healthy, behind, dead, silent, failed, aborted, many,
                                     misaligned)}
# Jobs that move between one STATUS and the next (ras_job.Moving): give one to RasModel.
MOVING = {f.__name__: f for f in (busy, skewed, stuck_among_moving)}
