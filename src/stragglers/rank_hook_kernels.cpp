// The flight-recorder reader of the rank's --stragglers module (rank_hook.cpp
// writes it after its own text): where PyTorch's NCCL flight recorder times
// kernels (torch 2.x built with NCCL, TORCH_NCCL_ENABLE_TIMING), a thread
// reads it once a second (torch._C._distributed_c10d._dump_nccl_trace,
// without stack traces) and sends each completed, retired collective's kernel
// time as a `d` record (record.h), in order, for the groups the module knows
// by torch's names for them (c10d's pg_names, the recorder's pg_config keys).
// An entry not timed yet holds its group's later ones for the next read.
#include "stragglers/rank_hook.h"

namespace gpudiag::stragglers {

const char* kernel_reader_source() {
  return R"PY(
_OK = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")

def _fr_names(c10d):
    # torch's name of each group this rank counts (the recorder's key) -> its number
    w = getattr(c10d, "_world", None)
    names = getattr(w, "pg_names", None) if w is not None else getattr(c10d, "_pg_names", None)
    out = {}
    for pg, name in list(names.items()) if isinstance(names, dict) else ():
        k = 0 if pg is c10d.GroupMember.WORLD else _gid.get(id(pg))
        if k is not None and isinstance(name, str):
            out[name] = k
    return out

def _fr_read(last):
    c = _sys.modules.get("torch._C._distributed_c10d")
    fn = getattr(c, "_dump_nccl_trace", None)
    c10d = _state.get("c10d")
    if fn is None or c10d is None:
        return
    import pickle
    dump = pickle.loads(fn(includeCollectives=True, includeStackTraces=False, onlyActive=False))
    names, held, sent = _fr_names(c10d), set(), 0
    for e in dump.get("entries", ()) if isinstance(dump, dict) else ():
        pg = e.get("process_group")
        k = names.get(pg[0]) if isinstance(pg, (tuple, list)) and pg else None
        s, d, t = e.get("collective_seq_id"), e.get("duration_ms"), e.get("time_created_ns")
        if k is None or k in held or e.get("is_p2p") or not isinstance(s, int) or s <= last.get(k, -1):
            continue
        if e.get("state") != "completed" or not isinstance(d, (int, float)) or not isinstance(t, int):
            held.add(k)  # not timed yet: the next read sends it and those after, in order
            continue
        op = "".join(ch for ch in str(e.get("profiling_name", "")).split(":")[-1].lower()
                     if ch in _OK)[:32] or "collective"
        _put("d %d %d %s %d %d\n" % (k, s, op, max(t + _SKEW, 1), max(int(d * 1e6), 1)))
        last[k] = s
        sent += 1
        if sent >= 4096:
            return

def _fr_loop():
    last = {}
    while True:
        _time.sleep(1.0)
        try:
            _fr_read(last)
        except Exception:
            pass

def _fr_start():
    if _os.environ.get("TORCH_NCCL_ENABLE_TIMING", "").lower() in ("1", "true", "yes", "y", "on"):
        import threading
        threading.Thread(target=_fr_loop, name="gpudiag-stragglers-fr", daemon=True).start()

)PY";
}

}  // namespace gpudiag::stragglers
