// The rank's side of `gpudiag launch --stragglers`: a Python module
// (_gpudiag_stragglers.py, written beside the startup file and imported by it
// when GPUDIAG_STRAGGLERS names the launcher's socket) that timestamps, on the
// rank's own monotonic clock, when the rank arrives at each collective of each
// process group and when the collective ends for it, and sends those records
// to the launcher in datagrams (record.h says their text).
//
// It never imports torch: an import finder waits for the script's own import
// of torch.distributed and torch.nn.parallel.distributed, then wraps the
// module functions that issue collectives (the outermost call only, so a
// collective made of others counts once) and DDP: at a DDP model's first
// forward, unless the script registered a comm hook already, it takes DDP's
// one comm-hook slot with a hook that does what DDP's C++ default does
// (multiply the bucket by 1/size, all-reduce, the same bits), timed; a hook
// the script registers before that is wrapped, one registered after it takes
// the slot's place inside the timed hook, so the script never sees the slot
// taken. Nothing joins or adds to the job's groups: the records go over a
// Unix datagram socket, never blocking (a full socket drops them, counted).
//
// Where PyTorch's NCCL flight recorder times kernels (torch 2.x built with
// NCCL, TORCH_NCCL_ENABLE_TIMING, which the launcher sets), a thread reads it
// once a second (torch._C._distributed_c10d._dump_nccl_trace, without stack
// traces) and sends each completed collective's kernel time, in order, of
// the groups it knows by torch's names for them (c10d's pg_names: the
// recorder's pg_config keys): a rank whose GPU is late (judge.h). That part
// is rank_hook_kernels.cpp's, appended to the module.
#include "stragglers/rank_hook.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "store/socket.h"
#include "util/error.h"
#include "util/file_out.h"

namespace gpudiag::stragglers {

namespace {

constexpr const char* kRankHook = R"PY(# gpudiag launch --stragglers (docs/launch.md, "Stragglers"): when this rank
# arrives at each collective, and when it ends for it, sent to the launcher.
import os as _os, sys as _sys, time as _time, socket as _socket, weakref as _weakref
import _thread
_now = _time.monotonic_ns
_ADDR = _os.environ.get("GPUDIAG_STRAGGLERS", "")
if _ADDR.startswith("@"):
    _ADDR = "\0" + _ADDR[1:]  # an abstract name (watch.h)
_LOCAL = int(_os.environ.get("LOCAL_RANK", "0") or 0)
_SKEW = int(_os.environ.get("GPUDIAG_STRAGGLERS_TEST_SKEW_NS", "0") or 0)
_sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_DGRAM)
_sock.setblocking(False)
_lock = _thread.allocate_lock()  # the records come from the rank's threads and the reader's

def _fresh_lock():
    global _lock  # a forked child's copy may be held by a thread it does not have
    _lock = _thread.allocate_lock()

_os.register_at_fork(after_in_child=_fresh_lock)
_buf, _state = [], {"last": _now(), "dropped": 0, "depth": 0, "fwd": 0, "groups": 0}
_live = set()  # weak references to the bucket callbacks a gloo worker still holds
_seq, _gid = {}, {}

def _flush():
    with _lock:
        _flush_held()

def _flush_held():
    global _buf
    lines, _buf = _buf, []
    _state["last"] = _now()
    if not lines:
        return
    data = ("r %d %d\n" % (_LOCAL, _state["dropped"]) + "".join(lines)).encode()
    try:
        _sock.sendto(data, _ADDR)
    except OSError:
        _state["dropped"] += len(lines)

def _put(line):
    with _lock:
        _buf.append(line)
        if len(_buf) >= 16 or _now() - _state["last"] > 100000000:
            _flush_held()

def _group(g, c10d):
    # 0: the default group; k: the k-th new_group() (every rank creates groups
    # in the same order); None: this rank is not in it.
    if g is None or g is c10d.GroupMember.WORLD:
        return 0
    k = _gid.get(id(g))
    if k is None and c10d._rank_not_in_group(g):
        return None
    return k if k is not None else -1

_rq_fd, _rq_last = {}, {}

def _runq(k):
    # How long this thread waited for a CPU (schedstat's run_delay) since its
    # last arrival in group k: a busy machine's share of its lateness. 0 when
    # not known (no schedstat, the first arrival, a thread's file gone).
    t = _thread.get_ident()
    fd = _rq_fd.get(t)
    if fd is None:
        if len(_rq_fd) >= 64:
            return 0
        try:
            fd = _os.open("/proc/thread-self/schedstat", _os.O_RDONLY | _os.O_CLOEXEC)
        except OSError:
            fd = -1
        _rq_fd[t] = fd
    if fd < 0:
        return 0
    try:
        d = int(_os.pread(fd, 96, 0).split()[1])
    except (OSError, ValueError, IndexError):
        _rq_fd.pop(t, None)  # a dead thread's file, its id since reused
        _os.close(fd)
        return 0
    prev = _rq_last.get((t, k))
    if prev is None and len(_rq_last) >= 4096:
        _rq_last.clear()
    _rq_last[(t, k)] = d
    return d - prev if prev is not None and d >= prev else 0

def _arrive(k):
    # The collective's number in its group, taken on arrival (ends may come in
    # another order), the last forward's start then, and the CPU wait since
    # the last arrival.
    if k is None or k < 0:
        return None
    n = _seq.get(k, 0)
    _seq[k] = n + 1
    return (k, n, _state["fwd"], _runq(k))

def _record(at, op, a, e):
    if at is not None:
        k, n, f, q = at
        _put("c %d %d %s %d %d %d %d\n" % (k, n, op, a + _SKEW, e + _SKEW if e else 0,
                                           f + _SKEW if f else 0, q))

def _wrap(c10d, fn, op):
    import inspect
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return fn
    gi = names.index("group") if "group" in names else -1
    ai = names.index("async_op") if "async_op" in names else -1
    def timed(*args, **kw):
        if _state["depth"]:
            return fn(*args, **kw)
        g = kw["group"] if "group" in kw else (args[gi] if 0 <= gi < len(args) else None)
        asy = kw["async_op"] if "async_op" in kw else (args[ai] if 0 <= ai < len(args) else False)
        try:
            at = _arrive(_group(g, c10d))
        except Exception:
            at = None
        a = _now()
        _state["depth"] += 1
        try:
            out = fn(*args, **kw)
        finally:
            _state["depth"] -= 1
        _record(at, op, a, 0 if asy else _now())
        return out
    timed.__wrapped__ = fn
    timed.__name__, timed.__qualname__, timed.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    return timed

_OPS = ("all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor",
        "_all_gather_base", "reduce_scatter", "reduce_scatter_tensor", "_reduce_scatter_base",
        "all_to_all", "all_to_all_single", "barrier", "gather", "scatter", "all_gather_object",
        "gather_object", "broadcast_object_list", "scatter_object_list", "all_reduce_coalesced",
        "all_gather_coalesced")

def _patch_dist(dist):
    c10d = _sys.modules.get("torch.distributed.distributed_c10d")
    if c10d is None or getattr(c10d, "_gpudiag_timed", False):
        return
    c10d._gpudiag_timed = True
    _state["c10d"] = c10d
    _state["all_reduce"] = c10d.all_reduce
    for op in _OPS:
        fn = getattr(c10d, op, None)
        if fn is None:
            continue
        timed = _wrap(c10d, fn, op)
        setattr(c10d, op, timed)
        if getattr(dist, op, None) is fn:
            setattr(dist, op, timed)
    made = c10d.new_group
    def new_group(*args, **kw):
        pg = made(*args, **kw)
        _state["groups"] += 1
        k = _state["groups"]
        try:
            ranks = kw.get("ranks", args[0] if args else None)
            if pg is not None and pg is not c10d.GroupMember.NON_GROUP_MEMBER:
                _gid[id(pg)] = k
                if ranks is not None:
                    _put("g %d %s\n" % (k, ",".join(str(int(r)) for r in sorted(ranks))))
        except Exception:
            pass
        return pg
    new_group.__wrapped__ = made
    # torch 1.13's gloo worker runs a bucket's callback, then drops it, taking
    # the GIL; before the group's workers are joined (or the interpreter
    # ends) they get the GIL to finish (a worker that takes it during
    # finalization aborts the process, one waiting while the join holds it hangs).
    # The callback of a hook the script gave is dropped just after ours: that
    # one the script must wait for itself (tests/fixtures/torch/train.py does).
    destroy = c10d.destroy_process_group
    def destroy_process_group(*args, **kw):
        _settle()
        return destroy(*args, **kw)
    destroy_process_group.__wrapped__ = destroy
    c10d.destroy_process_group = destroy_process_group
    if getattr(dist, "destroy_process_group", None) is destroy:
        dist.destroy_process_group = destroy_process_group
    c10d.new_group = new_group
    if getattr(dist, "new_group", None) is made:
        dist.new_group = new_group
    _fr_start()

class _Slot:
    # DDP's comm-hook slot as the script sees it: its hook (None: DDP's default).
    def __init__(self, pg):
        self.pg, self.state, self.hook = pg, None, None

def _timed_hook(slot, c10d):
    def hook(state, bucket):
        a = _now()
        at = _arrive(_group(slot.pg, c10d))
        _state["depth"] += 1
        try:
            if slot.hook is not None:
                fut = slot.hook(slot.state, bucket)
            else:
                pg = slot.pg if slot.pg is not None else c10d.GroupMember.WORLD
                t = bucket.buffer()
                t.mul_(1.0 / pg.size())  # as DDP's C++ default: the same bits
                fut = _state["all_reduce"](t, group=pg, async_op=True).get_future()
        finally:
            _state["depth"] -= 1
        def done(f):
            _record(at, "ddp_bucket", a, _now())
            v = f.value()
            return v[0] if slot.hook is None else v
        _live.add(_weakref.ref(done, _live.discard))
        return fut.then(done)
    return hook

def _patch_ddp(mod):
    DDP = getattr(mod, "DistributedDataParallel", None)
    if DDP is None or getattr(DDP, "_gpudiag_timed", False):
        return
    DDP._gpudiag_timed = True
    forward, register, builtin = DDP.forward, DDP.register_comm_hook, DDP._register_builtin_comm_hook
    def timed_forward(self, *args, **kw):
        _state["fwd"] = _now()
        if "_gpudiag_slot" not in self.__dict__:
            slot = None
            try:
                c10d = _state.get("c10d")
                if c10d is not None:
                    slot = _Slot(self.process_group)
                    register(self, None, _timed_hook(slot, c10d))
            except Exception:
                slot = None
            self.__dict__["_gpudiag_slot"] = slot
        return forward(self, *args, **kw)
    def timed_register(self, state, hook):
        slot = self.__dict__.get("_gpudiag_slot")
        if "_gpudiag_slot" not in self.__dict__:
            self._check_comm_hook(hook)
            slot = _Slot(self.process_group)
            slot.state, slot.hook = state, hook
            register(self, None, _timed_hook(slot, _state["c10d"]))
            self.__dict__["_gpudiag_slot"] = slot
            return
        if slot is None or slot.hook is not None or slot.state is not None:
            return register(self, state, hook)  # DDP says why it cannot
        self._check_comm_hook(hook)
        slot.state, slot.hook = state, hook
    def timed_builtin(self, kind):
        slot = self.__dict__.get("_gpudiag_slot")
        if "_gpudiag_slot" not in self.__dict__:
            self.__dict__["_gpudiag_slot"] = None  # C++'s own hook: not timed
            return builtin(self, kind)
        if slot is None or slot.hook is not None or slot.state is not None:
            return builtin(self, kind)
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        import torch.distributed as dist
        if kind == dist.BuiltinCommHookType.FP16_COMPRESS:
            slot.state, slot.hook = slot.pg, default_hooks.fp16_compress_hook
        elif kind != dist.BuiltinCommHookType.ALLREDUCE:
            return builtin(self, kind)
        slot.state = "builtin"
    DDP.forward = timed_forward
    DDP.register_comm_hook = timed_register
    DDP._register_builtin_comm_hook = timed_builtin

def _settle():
    # Until the workers dropped every callback (a weak reference's death is the
    # event), the GIL left free for them; 10 s at most, never a hang at exit.
    end = _now() + 10000000000
    while _live and _now() < end:
        _time.sleep(0.001)

_AFTER = {"torch.distributed": _patch_dist, "torch.nn.parallel.distributed": _patch_ddp}

class _Loader:
    def __init__(self, real, after):
        self.real, self.after = real, after
    def create_module(self, spec):
        return self.real.create_module(spec)
    def exec_module(self, module):
        self.real.exec_module(module)
        try:
            self.after(module)
        except Exception:
            pass
    def __getattr__(self, name):
        return getattr(self.real, name)

class _Finder:
    # Lets the script import torch as always, and wraps the two modules after.
    def find_spec(self, name, path=None, target=None):
        after = _AFTER.get(name)
        if after is None:
            return None
        for finder in _sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader, after)
                return spec
        return None

if _ADDR:
    _sys.meta_path.insert(0, _Finder())
    import atexit as _ae
    def _at_exit():
        _settle()
        _flush()
    _ae.register(_at_exit)
)PY";

}  // namespace

void write_rank_hook(const std::string& dir) {
  const std::string path = dir + "/_gpudiag_stragglers.py";
  const std::string text = std::string(kRankHook) + kernel_reader_source();
  net::Fd fd(open_own_file(path));
  if (!fd || ::write(fd.get(), text.data(), text.size()) < 0)
    throw UsageError("launch: cannot write " + path + ": " + std::strerror(errno),
                     "give --log-dir a folder this user may write, or leave out --stragglers");
}

}  // namespace gpudiag::stragglers
