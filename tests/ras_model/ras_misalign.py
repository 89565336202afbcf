"""The communicators NCCL 2.26.2 to 2.28.9 print in the text report, read from misaligned
bytes when one of them has missing ranks and the report has two or more.

RAS gathers every communicator into one buffer (src/ras/ras_internal.h struct rasCollComms,
tag v2.28.9-1): per communicator a header (rasCommId: commHash, hostHash, pidHash; then
commNRanks, nRanks, nMissingRanks: 40 bytes with the padding before the 8-byte-aligned
ranks), nRanks `rank` records of 56 bytes, then nMissingRanks rasCollCommsMissingRank
records (commRank, a union ncclSocketAddress of 28 bytes, cudaDev, nvmlDev; alignas 8: 40
bytes), the communicators sorted by commId (collectives.cc rasCommIdCompare). The text's
rasClientRunComms (client_support.cc) steps from one header to the next over the ranks but
not over the missing-rank records (`comm + 1 + nRanks * sizeof(*comm->ranks)`), so the
header after a communicator with missing ranks is read from its first missing-rank record.
2.29.2 adds `nMissingRanks * sizeof(struct rasCollCommsMissingRank)`; the JSON
(rasDumpCommsToJSON) steps right in every version that has it.

Read as a header (little-endian x86-64, IPv4), a missing-rank record gives commHash =
commRank | AF_INET << 32 | the port's two bytes in network order << 48, hostHash = the
address's four bytes, pidHash 0, commNRanks 0, nRanks 0, and nMissingRanks = cudaDev |
nvmlDev << 8: a communicator of no ranks whose "missing ranks" are the 40-byte records that
follow. Its step is one header (nRanks 0), onto the next record: every missing record is read
as a communicator and the last communicators of the buffer are never read (the loop runs
nComms times). The model assumes the padding bytes, and any bytes read past the buffer, are
zero; NCCL reads past its buffer there. A fake communicator has no ranks and so no status
bit: NCCL indexes statusStr with __builtin_clz(0), which is undefined; the model prints its
first entry, NOCOMM."""
import ipaddress
import struct

from ras_job import Process

HEADER = 40
RANK = 56
MISSING = 40
AF_INET = 2


def buggy(version):
    v = tuple(int(x) for x in version.split(".")[:3])
    return (2, 26, 0) <= v < (2, 29, 2)


class FakeRank:
    """A missing-rank record as rasClientRunComms reads it; `proc` the process whose address it
    holds, or a stand-in that answered nothing (rasPeerFind finds no peer)."""

    def __init__(self, rank, proc, cuda_dev, nvml_dev, known):
        self.rank, self.proc, self.cuda_dev, self.nvml_dev = rank, proc, cuda_dev, nvml_dev
        self.known = known

    def nvml(self):
        return self.nvml_dev


class FakeComm:
    """A header read from a missing-rank record: no ranks, `records` read as its missing ranks."""

    def __init__(self, hash_, records):
        self.hash, self.size, self.ranks, self.records = hash_, 0, [], records
        self.member_gone = set()


def _missing_record(rank, job):
    addr = rank.proc
    sa = struct.pack("<H", AF_INET) + struct.pack(">H", addr.port) + \
        ipaddress.ip_address(addr.host).packed + bytes(8 + 12)
    return struct.pack("<i", rank.rank) + sa + struct.pack("<BB", rank.cuda_dev & 0xff,
                                                          rank.nvml() & 0xff) + bytes(6)


def _rank_record(r, peers):
    """struct rasCollComms::comm::rank: commRank, peerIdx (in the collective's peers), the
    five counts, the status bit fields in one int (initState:4, asyncError:4, then
    finalizeCalled, destroyFlag, abortFlag), cudaDev, nvmlDev, padding to 56."""
    status = (r.init_state & 15) | (r.async_error & 15) << 4 | r.finalize << 8 | \
        r.destroy << 9 | r.abort << 10
    return struct.pack("<ii5QIBB2x", r.rank, peers.index(r.proc), *r.counts, status,
                       r.cuda_dev & 0xff, r.nvml() & 0xff)


def _buffer(job, analyses):
    """The rasCollComms bytes after nComms, and the offset of each real header."""
    data, heads = b"", {}
    peers = sorted((p for p in job.processes if p.responded()), key=lambda p: p.key())
    order = sorted(analyses, key=lambda a: (a.comm.hash, a.comm.host_hash, a.comm.pid_hash))
    for a in order:
        heads[len(data)] = a.comm
        data += struct.pack("<QQQiii4x", a.comm.hash, a.comm.host_hash, a.comm.pid_hash,
                            a.comm.size, len(a.present), len(a.missing))
        for r in sorted(a.present, key=lambda r: r.rank):
            data += _rank_record(r, peers)
        for r in sorted(a.missing, key=lambda r: r.rank):
            data += _missing_record(r, job)
    return data, heads, len(order)


def _process_at(job, family, port, ip):
    for p in job.processes:
        if family == AF_INET and p.port == port and ipaddress.ip_address(p.host).packed == ip:
            return p
    return None


def _record(job, data, at):
    raw = data[at:at + MISSING].ljust(MISSING, b"\0")
    rank, = struct.unpack_from("<i", raw, 0)
    family, = struct.unpack_from("<H", raw, 4)
    port, = struct.unpack_from(">H", raw, 6)
    ip = raw[8:12]
    cuda, nvml = raw[32], raw[33]
    proc = _process_at(job, family, port, ip)
    if proc is None:
        proc = Process("0.0.0.0", -1, [], answers=False)
    return FakeRank(rank, proc, cuda, nvml, proc.pid >= 0)


def comms_as_read(job, analyses):
    """The communicators rasClientRunComms prints: job.comms where it steps right, else the
    real ones and FakeComm in the order its first loop reaches them."""
    if not buggy(job.version) or len(job.comms) < 2 or not any(a.missing for a in analyses):
        return list(job.comms)
    data, heads, n = _buffer(job, analyses)
    out, at = [], 0
    for _ in range(n):
        if at in heads:
            comm = heads[at]
            out.append(comm)
            present = len([r for r in comm.ranks if r.proc.responded()
                           and r.rank not in comm.member_gone])
            at += HEADER + RANK * present
            continue
        raw = data[at:at + HEADER].ljust(HEADER, b"\0")
        hash_, = struct.unpack_from("<Q", raw, 0)
        n_ranks, n_missing = struct.unpack_from("<ii", raw, 28)
        records = [_record(job, data, at + HEADER + RANK * n_ranks + MISSING * i)
                   for i in range(max(0, n_missing))]
        out.append(FakeComm(hash_, records))
        at += HEADER + RANK * n_ranks
    return out
