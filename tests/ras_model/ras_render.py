"""RAS's reply to `VERBOSE STATUS` (or `STATUS`) for a model Job (ras_job.py), as NCCL
renders it: text() as client_support.cc rasClientRunInit and rasClientRunComms print it,
json() as its rasDumpCommsToJSON (2.28.7 and later). text() returns the two parts RAS
sends apart: what it knows at once (versions, job summary, "Communicators...") and what
follows the collective over the RAS network."""
import ras_misalign
from ras_job import (ABORT, ERROR, ERRORS, FUNCS, INCOMPLETE, MISMATCH, NOCOMM, STATUS,
                     Analysis, gpu_list, highest, is_outlier, nccl_error_text, rank_gpu)


def rank_where(r):
    return "GPU %s managed by process %d on node %s" % (rank_gpu(r), r.proc.pid, r.proc.host)


def proc_line(p):
    return "  Process %d on node %s managing GPU%s %s\n" % (
        p.pid, p.host, "s" if len(p.gpus) > 1 else "", gpu_list(p))


def job_summary(job):
    """client_support.cc rasClientRunInit: the job summary table (TEXT only)."""
    procs = sorted(job.processes, key=lambda p: p.key())
    nodes = []
    for p in procs:
        if not nodes or nodes[-1][0] != p.host:
            nodes.append((p.host, []))
        nodes[-1][1].append(p)
    gpus = [len(p.gpus) for p in procs]
    per_node = [len(n[1]) for n in nodes]
    gpus_node = all(len({len(p.gpus) for p in n[1]}) == 1 for n in nodes)
    total = sum(gpus)
    out = "Job summary\n===========\n\n"
    if gpus_node and len(set(gpus)) == 1 and len(set(per_node)) == 1:
        return out + ("  Nodes  Processes         GPUs  Processes     GPUs\n"
                      "(total)   per node  per process    (total)  (total)\n"
                      "%7d  %9d  %11d  %9d  %7d\n" % (len(nodes), per_node[0], gpus[0], len(procs), total))
    # Distributions, the most frequent first (rasValCountsCompareRev: count, then value, desc).
    def dist(values):
        counts = {}
        for v in values:
            counts[v] = counts.get(v, 0) + 1
        return sorted(counts.items(), key=lambda kv: (-kv[1], -kv[0]))
    if gpus_node and len(set(gpus)) == 1:
        out += "  Nodes  Processes         GPUs\n          per node  per process\n"
        for value, count in dist(per_node):
            out += "%7d  %9d  %11d\n" % (count, value, gpus[0])
    else:
        out += "  Nodes  Processes\n          per node\n"
        for value, count in dist(per_node):
            out += "%7d  %9d\n" % (count, value)
        out += "\n         Processes         GPUs\n                    per process\n"
        for value, count in dist(gpus):
            out += "         %9d  %11d\n" % (count, value)
    return out + ("\n  Nodes  Processes         GPUs\n(total)    (total)      (total)\n"
                  "%7d  %9d  %11d\n" % (len(nodes), len(procs), total))


def text(job, verbose=True):
    """(first part, rest): client_support.cc rasClientRunInit, then rasClientRunComms."""
    first = "NCCL version %s compiled with CUDA %s\n" % (job.version, job.cuda)
    first += "CUDA runtime version %d, driver version %d\n\n" % (job.runtime, job.driver)
    first += job_summary(job) + "\nCommunicators..."
    old = job.flavour() < (2, 26)  # 2.24/2.25: one collective count, "The missing ranks:"
    seconds = ("%.2f" if job.flavour() < (2, 28) or job.version.startswith("2.28.3") else "%.3f")
    out = (" (" + seconds + "s)\n=============\n\n") % job.seconds
    # 2.26 to 2.28.9 read the communicators after one with missing ranks from misaligned bytes.
    comms = ras_misalign.comms_as_read(job, [Analysis(job, c) for c in job.comms])
    aux = sorted((Analysis(job, c) for c in comms), key=lambda a: a.sort_key())
    groups = []
    for a in aux:
        if groups and groups[-1][-1].group_key() == a.group_key():
            groups[-1].append(a)
        else:
            groups.append([a])
    if aux:
        out += ("Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\n"
                "    #  in group  per comm  per node  per comm  in group\n")
    else:
        out += "No communicator data collected!\n"
    for g, members in enumerate(groups):
        lo = min(a.per_node[0] for a in members)
        hi = max(a.per_node[1] for a in members)
        per = str(lo) if lo == hi else "%d-%d" % (lo, hi)
        gpus = {(r.proc.pid, r.nvml()) for a in members for r in a.present}
        a = members[0]
        out += "%5d  %8d  %8d  %8s  %8d  %8d  %8s  %6s\n" % (
            g, len(members), a.nodes, per, a.comm.size, len(gpus), STATUS[highest(a.status)],
            ERRORS[a.errors])
    out += "\nErrors\n======\n\n"
    unanswered = sorted((p for p in job.processes if not p.dead and not p.answers),
                        key=lambda p: (p.key()[0], p.pid))
    if unanswered:
        n = len(unanswered)
        out += "INCOMPLETE\n  Missing communicator data from %d job process%s\n" % (n, "es" if n > 1 else "")
        if is_outlier(n, verbose):
            out += "".join(proc_line(p) for p in unanswered)
        out += "\n"
    dead = sorted((p for p in job.processes if p.dead), key=lambda p: (p.key()[0], p.pid))
    if dead:
        n = len(dead)
        out += "DEAD\n  %d job process%s considered dead (unreachable via the RAS network)\n" % (
            n, "es are" if n > 1 else " is")
        if is_outlier(n, verbose):
            out += "".join(proc_line(p) for p in dead)
        out += "\n"
    for g, members in enumerate(groups):
        for i, a in enumerate(members):
            out += comm_errors(a, "#%d-%d (%016x)" % (g, i, a.comm.hash), verbose, old)
    out += "Warnings\n========\n\n"
    if job.timeouts:
        out += ("TIMEOUT\n  Encountered %d communication timeout%s while gathering communicator "
                "data\n\n" % (job.timeouts, "s" if job.timeouts > 1 else ""))
    for g, members in enumerate(groups):
        for i, a in enumerate(members):
            if a.errors & MISMATCH:
                out += comm_mismatch(a, "#%d-%d (%016x)" % (g, i, a.comm.hash), verbose, old)
    return first, out


def comm_errors(a, name, verbose, old):
    """client_support.cc rasClientRunComms: a communicator's INCOMPLETE and ERROR blocks."""
    out = ""
    if a.errors & INCOMPLETE:
        n = a.incomplete if not old else a.comm.size - len(a.present)
        out += "%s INCOMPLETE\n  Missing communicator data from %d rank%s\n" % (name, n, "s" if n > 1 else "")
        if is_outlier(n, verbose):
            if old:  # 2.24/2.25: the rank numbers only
                ranks = ",".join(str(r.rank) for r in sorted(a.missing, key=lambda r: r.rank))
                out += "  The missing rank%s: %s\n" % ("s" if n > 1 else "", ranks)
            else:
                for r in a.missing:
                    if not r.proc.responded():
                        out += "  Rank %d -- %s\n" % (r.rank, rank_where(r) if getattr(r, "known", True)
                                                       else "[process information not found]")
        out += "\n"
    if a.errors & ERROR:
        out += "%s ERROR\n" % name
        for phase, attr in (("Initialization", "init_state"), ("Asynchronous", "async_error")):
            bad = [r for r in a.present if getattr(r, attr) not in (0, 7)]
            if bad:
                n = len(bad)
                out += "  %s error%s on %d rank%s\n" % (phase, "s" if n > 1 else "", n, "s" if n > 1 else "")
                out += break_down(bad, attr, verbose)
        out += "\n"
    return out


def break_down(bad, attr, verbose):
    """client_support.cc rasClientBreakDownErrors: the most frequent error first."""
    out, codes = "", {}
    for r in bad:
        codes[getattr(r, attr)] = codes.get(getattr(r, attr), 0) + 1
    for code, count in sorted(codes.items(), key=lambda kv: (-kv[1], kv[0])):
        if count > 1:
            out += "  %d ranks reported %s\n" % (count, nccl_error_text(code))
        if is_outlier(count, verbose):
            for r in bad:
                if getattr(r, attr) == code:
                    out += ("  Rank %d -- %s\n" % (r.rank, rank_where(r)) if count > 1 else
                            "  Rank %d reported %s -- %s\n" % (r.rank, nccl_error_text(code), rank_where(r)))
    return out


def value_groups(items, size):
    """Ranks grouped by a value, the most frequent first (rasValCountsCompareRev)."""
    groups = {}
    for value, r in items:
        groups.setdefault(value, []).append(r)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), -kv[0]))


def comm_mismatch(a, name, verbose, old):
    """client_support.cc rasClientRunComms: a communicator's MISMATCH block."""
    out = "%s MISMATCH\n" % name
    size = a.comm.size
    if bin(a.status).count("1") > 1:
        out += "  Communicator ranks have different status\n"
        items = [(highest(r.status()), r) for r in a.present]
        items += [(0, r) for r in a.missing if r.proc.responded()]  # the NOCOMM ones
        for value, ranks in value_groups(items, size):
            ranks.sort(key=lambda r: r.rank)
            if len(ranks) > 1:
                out += "  %d ranks have status %s\n" % (len(ranks), STATUS[value])
            if is_outlier(len(ranks), verbose, size):
                for r in ranks:
                    out += ("  Rank %d -- %s\n" % (r.rank, rank_where(r)) if len(ranks) > 1 else
                            "  Rank %d has status %s -- %s\n" % (r.rank, STATUS[value], rank_where(r)))
    ops = [("collective", lambda r: sum(r.counts))] if old else [
        (f, (lambda i: lambda r: r.counts[i])(i)) for i, f in enumerate(FUNCS)]
    for op, count_of in ops:
        if len({count_of(r) for r in a.present}) < 2:
            continue
        out += "  Communicator ranks have different %s operation counts\n" % op
        for value, ranks in value_groups([(count_of(r), r) for r in a.present], size):
            ranks.sort(key=lambda r: r.rank)
            n = len(ranks)
            if n > 1:
                out += ("  %d ranks have launched up to operation %d\n" % (n, value) if value > 0 or old
                        else "  %d ranks have not launched any operations\n" % n)
            if is_outlier(n, verbose, size):
                for r in ranks:
                    if n > 1:
                        out += "  Rank %d -- %s\n" % (r.rank, rank_where(r))
                    elif value > 0 or old:
                        out += "  Rank %d has launched up to operation %d -- %s\n" % (r.rank, value, rank_where(r))
                    else:
                        out += "  Rank %d has not launched any operations -- %s\n" % (r.rank, rank_where(r))
        out += "\n"
    return out


def json(job):
    """client_support.cc rasDumpCommsToJSON with its jsonWrite* helpers, byte for byte."""
    out = "{\n"
    out += '  "nccl_version": "%s",\n' % job.version
    out += '  "cuda_runtime_version": %d,\n' % job.runtime
    out += '  "cuda_driver_version": %d,\n' % job.driver
    out += '  "timestamp": "%s",\n' % job.timestamp
    out += '  "communicators_count": %d,\n' % len(job.comms)
    out += '  "communicators": [\n'
    for ci, c in enumerate(job.comms):
        a = Analysis(job, c)
        if ci:
            out += ",\n"
        out += "    {\n"
        out += '      "hash": "0x%x",\n' % c.hash
        out += '      "secondary_hash": "0x%x:0x%x",\n' % (c.host_hash, c.pid_hash)
        out += '      "size": %d,\n' % c.size
        out += '      "ranks_count": %d,\n' % len(a.present)
        out += '      "missing_ranks_count": %d,\n' % len(a.missing)
        out += '      "ranks": [\n'
        for ri, r in enumerate(a.present):
            if ri:
                out += ",\n"
            out += "        {\n"
            out += '          "rank": %d,\n          "host": "%s",\n          "pid": %d,\n' % (r.rank, r.proc.host, r.proc.pid)
            out += '          "cuda_dev": %d,\n          "nvml_dev": %d,\n' % (r.cuda_dev, r.nvml())
            out += '          "status": {\n'
            out += '            "init_state": %d,\n            "async_error": %d,\n' % (r.init_state, r.async_error)
            out += '            "finalize_called": %s,\n' % str(r.finalize).lower()
            out += '            "destroy_flag": %s,\n' % str(r.destroy).lower()
            out += '            "abort_flag": %s\n' % str(r.abort).lower()
            out += "          },\n"
            out += '          "collective_counts": {\n'
            out += ",\n".join('            "%s": %d' % (f, r.counts[i]) for i, f in enumerate(FUNCS)) + "\n"
            out += "          }\n"
            out += "        }"
        out += "\n      ],\n"
        out += '      "missing_ranks": [\n'
        for mi, r in enumerate(a.missing):
            if mi:
                out += ",\n"
            out += "        {\n"
            out += '          "rank": %d,\n          "host": "%s",\n          "pid": %d,\n' % (r.rank, r.proc.host, r.proc.pid)
            # 2.28.7 and 2.28.9 leave out the comma after nvml_dev here (jsonWriteMissingRank),
            # so their document is not valid JSON whenever a rank is missing; 2.29.2 adds it.
            comma = "" if job.flavour() == (2, 28) else ","
            out += '          "cuda_dev": %d,\n          "nvml_dev": %d%s\n' % (r.cuda_dev, r.nvml(), comma)
            out += '          "status": {\n'
            out += '            "unresponsive": %s,\n' % str(not r.proc.responded()).lower()
            out += '            "considered_dead": %s\n' % str(r.proc.dead).lower()
            out += "          }\n"
            out += "        }"
        out += "\n      ]\n"
        out += "    }"
    out += "\n  ],\n"
    out += '  "ras": {\n'
    out += '    "collection_time_sec": %.3f,\n' % job.seconds
    out += '    "timeouts_count": %d\n' % job.timeouts
    out += "  }\n"
    out += "}\n"
    return out
