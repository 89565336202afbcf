"""Shared helpers for gpudiag's integration tests: where the binary is, how to
run it (and mpirun) with a hard timeout, and how to read its status lines."""
import os
import re
import shutil
import subprocess
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


def run(args, timeout=120, env=None, **kw):
    """Runs a command; a hang fails the test instead of blocking the suite."""
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env, **kw)


def mpirun(np, *args, timeout=180, env=None, mpi_args=()):
    cmd = ["mpirun", "-np", str(np), "--oversubscribe", *mpi_args, BIN, *args]
    return run(cmd, timeout=timeout, env=mpirun_env(env))


def ok_lines(stdout):
    return [m for m in (OK_RE.match(l) for l in stdout.splitlines()) if m]


def broken_lines(stdout):
    return [m for m in (BROKEN_RE.match(l) for l in stdout.splitlines()) if m]


def require(program):
    if shutil.which(program) is None:
        raise unittest.SkipTest(f"{program} is not installed (scripts/install-deps.sh --test)")
