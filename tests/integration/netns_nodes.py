"""Jobs on "nodes" made of network namespaces on one bridge
(scripts/netns-hosts.sh star), each node's ranks started by hand as a
launcher would start them: one `sh` a node in its namespace (with its own
hostname, node1, node2, ...), every rank `gpudiag check --backend host` in
the background with its own variables, its output and exit status in files.
Used by the tests of the tree of judges on real processes
(test_tree_nodes.py, test_tree_levels.py)."""
import os
import subprocess

from harness import BIN, clean_env


def run_nodes(prefix, nodes, per_node, out_dir, rank_env, job_env, node_env=None, timeout=240):
    """Starts `nodes` nodes of `per_node` ranks in namespaces <prefix>-1...;
    rank r's variables are rank_env(r) plus node_env[node] when given, every
    node's `job_env` on top of a clean environment. Waits for every node
    (killing a node's shell past `timeout` s); returns {rank: (rc, output)}."""
    procs = []
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
        procs.append(subprocess.Popen(
            ["ip", "netns", "exec", f"{prefix}-{i + 1}", "unshare", "--uts", "sh", "-c",
             "\n".join(lines)],
            env=dict(clean_env(), **job_env)))
    for p in procs:
        try:
            p.wait(timeout=timeout)
        finally:
            p.kill()
    result = {}
    for r in range(nodes * per_node):
        with open(os.path.join(out_dir, f"rank{r}.out")) as f:
            out = f.read()
        with open(os.path.join(out_dir, f"rank{r}.rc")) as f:
            result[r] = (int(f.read().strip()), out)
    return result
