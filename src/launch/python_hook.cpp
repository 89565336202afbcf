// See python_hook.h: the file's text and its writing.
#include "launch/python_hook.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "store/socket.h"
#include "util/error.h"
#include "util/file_out.h"

namespace gpudiag::launch {

namespace {

/// The startup file that lets the launcher ask a Python rank for its stack:
/// faulthandler dumps every thread to GPUDIAG_STACK_FILE on SIGUSR2; the
/// user's own sitecustomize (the next one on sys.path) still runs; then an
/// uncaught exception is recorded in the rank's error file (below).
constexpr const char* kPythonHook =
    R"PY(# gpudiag launch's startup file (docs/launch.md, --no-stack-hook turns it off):
# on SIGUSR2 this rank writes every thread's Python stack to GPUDIAG_STACK_FILE;
# an uncaught exception is written to TORCHELASTIC_ERROR_FILE as torch's @record does.
import os as _os, sys as _sys
try:
    import faulthandler as _fh, signal as _sig
    _path = _os.environ.get("GPUDIAG_STACK_FILE")
    if _path:
        _fh.register(_sig.SIGUSR2, file=open(_path, "a"), all_threads=True, chain=False)
        # At exit SIGUSR2 is ignored, not left to its default action (the end of
        # the process) when finalization takes faulthandler's handler away: a
        # stack asked for then costs nothing.
        import atexit as _ae
        def _gpudiag_usr2_quiet():
            try:
                _fh.unregister(_sig.SIGUSR2)
                _sig.signal(_sig.SIGUSR2, _sig.SIG_IGN)
            except Exception:
                pass
        _ae.register(_gpudiag_usr2_quiet)
except Exception:
    pass
def _gpudiag_progress(path, every):
    # --hang-timeout's progress (progress_watch.h): the default process group's
    # sequence number and the main thread's stack by (file, function), written
    # when they change, sampled twice a second. Never imports torch itself.
    # It ends with the main thread and is joined at shutdown: as a daemon it
    # could be inside torch's call (which releases the GIL) when the
    # interpreter finalizes, and a daemon thread taking the GIL back then is
    # ended by pthread_exit, which aborts the rank ("terminate called without
    # an active exception") after the user's program finished.
    import threading as _th, time as _time
    main, last, waited = _th.main_thread(), None, 0.0
    while main.is_alive():
        if every > 0:
            _time.sleep(0.05)
            waited += 0.05
            if waited < every:
                continue
        waited = 0.0
        seq = -1
        try:
            dist = _sys.modules.get("torch.distributed")
            if dist is not None and dist.is_initialized():
                seq = dist.distributed_c10d._get_default_group()._get_sequence_number_for_group()
        except Exception:
            pass
        frame, where, n = _sys._current_frames().get(main.ident), [], 0
        while frame is not None and n < 256:
            where.append((frame.f_code.co_filename, frame.f_code.co_name))
            frame, n = frame.f_back, n + 1
        now = "%d %d\n" % (seq, hash(tuple(where)))
        if now != last:
            last = now
            try:
                with open(path, "w") as out:
                    out.write(now)
            except OSError:
                return
try:
    if _os.environ.get("GPUDIAG_PROGRESS_FILE"):
        import threading as _threading
        try:  # how often it samples (tests sample without a pause)
            _every = min(max(float(_os.environ.get("GPUDIAG_PROGRESS_EVERY_S", "0.5")), 0.0), 60.0)
        except ValueError:
            _every = 0.5
        _threading.Thread(target=_gpudiag_progress,
                          args=(_os.environ["GPUDIAG_PROGRESS_FILE"], _every),
                          name="gpudiag-progress", daemon=False).start()
except Exception:
    pass
_here = _os.path.dirname(_os.path.abspath(__file__))
_saved = list(_sys.path)
_me = _sys.modules.get("sitecustomize")
try:
    _sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or ".") != _here]
    _sys.modules.pop("sitecustomize", None)
    import sitecustomize  # noqa: F401  the user's own, if any
except ImportError:
    # None of its own (pyenv, conda, python.org builds): this file stays the
    # module, or the import that is running it fails with KeyError.
    if _me is not None:
        _sys.modules["sitecustomize"] = _me
finally:
    _sys.path[:] = _saved
def _gpudiag_error_hooks(path):
    # An uncaught exception of the rank's own process (the main thread's, or a
    # thread's) is written to its error file in torch's @record format, so the
    # launcher knows it without @record; a file @record wrote first is kept
    # (O_EXCL). The hooks installed before (the user's sitecustomize's, the
    # interpreter's) still run after; a hook the script installs replaces these.
    # GPUDIAG_ERROR_HOOK_PID names the rank's process: a Python process it
    # starts inherits it and records nothing, nor does a forked child.
    claimed = _os.environ.get("GPUDIAG_ERROR_HOOK_PID")
    if claimed and claimed != str(_os.getpid()):
        return
    me = _os.getpid()
    _os.environ["GPUDIAG_ERROR_HOOK_PID"] = str(me)
    def record(tp, value, tb):
        try:
            if _os.getpid() != me or not isinstance(tp, type) or not issubclass(tp, Exception):
                return
            import json, time, traceback
            data = {"message": {"message": "%s: %s" % (tp.__name__, value), "extraInfo": {
                "py_callstack": "".join(traceback.format_exception(tp, value, tb)),
                "timestamp": str(int(time.time()))}}}
            text = json.dumps(data)
            fd = _os.open(path, _os.O_WRONLY | _os.O_CREAT | _os.O_EXCL | _os.O_CLOEXEC |
                          getattr(_os, "O_NOFOLLOW", 0), 0o644)
            try:
                _os.write(fd, text.encode("utf-8", "backslashreplace"))
            finally:
                _os.close(fd)
        except Exception:
            pass
    before = _sys.excepthook
    def excepthook(tp, value, tb):
        record(tp, value, tb)
        before(tp, value, tb)
    _sys.excepthook = excepthook
    import threading
    thread_before = getattr(threading, "excepthook", None)
    if thread_before is not None:
        def thread_excepthook(args):
            record(args.exc_type, args.exc_value, args.exc_traceback)
            thread_before(args)
        threading.excepthook = thread_excepthook
try:
    if _os.environ.get("TORCHELASTIC_ERROR_FILE"):
        _gpudiag_error_hooks(_os.environ["TORCHELASTIC_ERROR_FILE"])
except Exception:
    pass
try:  # --stragglers: arrivals at collectives (stragglers/rank_hook.cpp)
    if _os.environ.get("GPUDIAG_STRAGGLERS"):
        import _gpudiag_stragglers  # noqa: F401
except Exception:
    pass
)PY";

}  // namespace

void write_python_hook(const std::string& dir) {
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/sitecustomize.py";
  net::Fd fd(open_own_file(path));
  if (!fd || ::write(fd.get(), kPythonHook, std::strlen(kPythonHook)) < 0)
    throw UsageError("launch: cannot write " + path + ": " + std::strerror(errno),
                     "give --log-dir a folder this user may write, or pass --no-stack-hook");
}

}  // namespace gpudiag::launch
