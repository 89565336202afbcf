"""Jobs on "nodes" made of network namespaces on one bridge
(scripts/netns-hosts.sh star): a shell line a node, run in its namespace as
a host of its own (`unshare --uts`), all at once (on_nodes); and a check's
ranks started by hand as a launcher would start them, every rank `gpudiag
check --backend host` in the background with its own variables, its output
and exit status in files (run_nodes); star() makes the nodes for a test
and removes them after it. Used by the tests of the tree of judges and of
the sweep on real processes."""
import os
import subprocess

from harness import BIN, SOURCE_DIR, clean_env, run

NETNS = os.path.join(SOURCE_DIR, "scripts", "netns-hosts.sh")


def star(test, prefix, n, timeout=60):
    """Makes nodes <prefix>-1..n on one bridge (scripts/netns-hosts.sh star)
    for `test`, removed in its cleanup; skips it where namespaces cannot be
    made here."""
    p = run([NETNS, "star", prefix, str(n)], timeout=timeout)
    if p.returncode != 0:
        test.skipTest("cannot create network namespaces here: " + p.stderr.strip())
    test.addCleanup(run, [NETNS, "star-down", prefix, str(n)], timeout=timeout)


def on_nodes(prefix, commands, env, timeout=300):
    """Runs commands[i], a shell line, in namespace <prefix>-<i>, in the
    order given, with `env` on top of a clean environment; waits for all
    (killing one past `timeout` s). Returns {i: (returncode, stdout, stderr)}."""
    procs = {i: subprocess.Popen(
        ["ip", "netns", "exec", f"{prefix}-{i}", "unshare", "--uts", "sh", "-c", line],
        env=dict(clean_env(), **env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i, line in commands.items()}
    outs = {}
    for i, p in procs.items():
        try:
            o, e = p.communicate(timeout=timeout)
            outs[i] = (p.returncode, o, e)
        finally:
            p.kill()
    return outs


def run_nodes(prefix, nodes, per_node, out_dir, rank_env, job_env, node_env=None, timeout=240):
    """Starts `nodes` nodes of `per_node` ranks in namespaces <prefix>-1...;
    rank r's variables are rank_env(r) plus node_env[node] when given, every
    node's `job_env` on top of a clean environment. Waits for every node
    (killing a node's shell past `timeout` s); returns {rank: (rc, output)}."""
    commands = {}
    for i in range(nodes):
        lines = [f"hostname node{i + 1}"]
        for local in range(per_node):
            r = i * per_node + local
            env = " ".join(f"{k}={v}" for k, v in
                           dict(rank_env(r), **(node_env or {}).get(i, {})).items())
            out = os.path.join(out_dir, f"rank{r}")
            lines.append(f"(env {env} {BIN} check --backend host --timeout 10 > {out}.out "
                         f"2>&1; echo $? > {out}.rc) &")
        lines.append("wait")
        commands[i + 1] = "\n".join(lines)
    on_nodes(prefix, commands, job_env, timeout=timeout)
    result = {}
    for r in range(nodes * per_node):
        with open(os.path.join(out_dir, f"rank{r}.out")) as f:
            out = f.read()
        with open(os.path.join(out_dir, f"rank{r}.rc")) as f:
            result[r] = (int(f.read().strip()), out)
    return result
