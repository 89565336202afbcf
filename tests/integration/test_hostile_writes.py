"""What gpudiag writes when another local user prepared the folder (issue on the
local attacker, items 1-2). gpudiag runs as root here; the folder is
world-writable WITHOUT the sticky bit, so the kernel's protected_symlinks
cannot hide a bug; the links are planted by user `nobody` (setpriv).

- --prometheus (replaced by a rename): links planted at the next 400 pids'
  old temporary names (PATH.tmp.<pid>) point at a victim file: the victim is
  untouched and the report is written; a link, a character device or a FIFO
  at PATH itself is refused in one line with exit 2 and left as it was.
- --json, --exclude-file (written in place): a link at PATH to the victim is
  refused; a character device and a FIFO with a reader are written through
  and stay what they are; /dev/stdout is written; a FIFO nobody reads is an
  error, not a hang.
- scan --json (issue 53): a link planted at PATH to a file that does not
  exist yet is refused and nothing is created (root followed it before); a
  FIFO whose reader holds it open and never reads is an error once its
  4 KiB buffer is full, not a hang; and a hard link to another user's file is
  refused and that file kept, for check --json too."""
import fcntl
import os
import shutil
import stat
import subprocess
import tempfile
import threading
import unittest

from harness import BIN, clean_env, mpirun, run


def as_nobody(*cmd):
    return subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *cmd],
                          capture_output=True, text=True, timeout=60)


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"), "needs root and setpriv")
class HostileFolder(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="gpudiag-hostile-")
        os.chmod(self.dir, 0o777)  # world-writable, no sticky bit
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.victim = os.path.join(tempfile.mkdtemp(prefix="gpudiag-victim-"), "precious")
        self.addCleanup(shutil.rmtree, os.path.dirname(self.victim), True)
        with open(self.victim, "w") as f:
            f.write("precious\n")

    def victim_intact(self):
        with open(self.victim) as f:
            self.assertEqual(f.read(), "precious\n")

    def check(self, *args):
        return run([BIN, "check", "--backend", "host", "--size", "1MiB", "--iters", "1", *args],
                   env=clean_env(), timeout=120)

    def one_line_refusal(self, p, option, path):
        self.assertEqual(p.returncode, 2, p.stdout[-2000:] + p.stderr[-2000:])
        lines = [l for l in p.stderr.splitlines() if option in l]
        self.assertTrue(lines, p.stderr)
        self.assertIn(path, lines[0])

    def test_links_at_the_old_temporary_names_are_never_written_through(self):
        prom = os.path.join(self.dir, "gpudiag.prom")
        with open("/proc/sys/kernel/ns_last_pid") as f:
            last = int(f.read())
        script = ("import os,sys\n"
                  "for pid in range(%d, %d):\n"
                  "    os.symlink(sys.argv[1], sys.argv[2] + '.tmp.%%d' %% pid)\n" % (last + 1, last + 401))
        r = as_nobody("/usr/bin/python3", "-c", script, self.victim, prom)
        self.assertEqual(r.returncode, 0, r.stderr)
        p = self.check("--prometheus", prom)
        self.assertEqual(p.returncode, 0, p.stdout[-2000:] + p.stderr[-2000:])
        self.victim_intact()
        st = os.lstat(prom)
        self.assertTrue(stat.S_ISREG(st.st_mode))
        self.assertEqual(st.st_uid, 0)
        with open(prom) as f:
            self.assertIn("gpudiag_info", f.read())
        leftovers = [n for n in os.listdir(self.dir) if not n.startswith("gpudiag.prom")]
        self.assertEqual(leftovers, [], "a temporary file was left behind")

    def test_what_is_at_the_prometheus_path_itself_is_refused_and_kept(self):
        link = os.path.join(self.dir, "link.prom")
        self.assertEqual(as_nobody("ln", "-s", self.victim, link).returncode, 0)
        dev = os.path.join(self.dir, "null.prom")
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a /dev/null
        fifo = os.path.join(self.dir, "fifo.prom")
        os.mkfifo(fifo)
        for path in (link, dev, fifo):
            with self.subTest(path=path):
                p = self.check("--prometheus", path)
                self.one_line_refusal(p, "--prometheus", path)
        self.victim_intact()
        self.assertTrue(os.path.islink(link))
        self.assertTrue(stat.S_ISCHR(os.lstat(dev).st_mode))
        self.assertTrue(stat.S_ISFIFO(os.lstat(fifo).st_mode))

    def test_json_refuses_a_planted_link_and_writes_through_devices_and_fifos(self):
        link = os.path.join(self.dir, "report.json")
        self.assertEqual(as_nobody("ln", "-s", self.victim, link).returncode, 0)
        p = self.check("--json", link)
        self.one_line_refusal(p, "--json", link)
        self.victim_intact()
        dev = os.path.join(self.dir, "null.json")
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        p = self.check("--json", dev)
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        self.assertTrue(stat.S_ISCHR(os.lstat(dev).st_mode))
        fifo = os.path.join(self.dir, "report.fifo")
        os.mkfifo(fifo)
        got = {}

        def read():
            with open(fifo) as f:
                got["text"] = f.read()
        reader = threading.Thread(target=read)
        reader.start()
        p = self.check("--json", fifo)
        reader.join(60)
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        self.assertIn('"schema"', got.get("text", ""))
        p = self.check("--json", "/dev/stdout")
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        self.assertIn('"schema"', p.stdout)

    def test_a_fifo_nobody_reads_is_an_error_not_a_hang(self):
        fifo = os.path.join(self.dir, "nobody-reads.json")
        os.mkfifo(fifo)
        p = self.check("--json", fifo)
        self.assertEqual(p.returncode, 2, p.stderr[-2000:])
        self.assertIn("a FIFO no process reads", p.stderr)

    def scan_inputs(self):
        """60 small .npy files: a scan report of about 24 KB."""
        d = tempfile.mkdtemp(prefix="gpudiag-scan-in-")
        self.addCleanup(shutil.rmtree, d, True)
        r = subprocess.run(["/usr/bin/python3", "-c",
                            "import numpy as np, sys\n"
                            "for i in range(60): np.save(f'{sys.argv[1]}/t{i}.npy', np.ones(4, 'f4'))",
                            d], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            self.skipTest("no numpy at /usr/bin/python3: " + r.stderr[-300:])
        return d

    def test_scan_json_refuses_a_link_to_a_file_that_does_not_exist_yet(self):
        target = os.path.join(os.path.dirname(self.victim), "created-by-root")
        link = os.path.join(self.dir, "scan.json")
        self.assertEqual(as_nobody("ln", "-s", target, link).returncode, 0)
        p = run([BIN, "scan", "--json", link, self.scan_inputs()], env=clean_env(), timeout=120)
        self.one_line_refusal(p, "--json", link)
        self.assertFalse(os.path.exists(target), "the link was followed")

    def test_scan_json_into_a_fifo_held_open_and_never_read_is_an_error(self):
        fifo = os.path.join(self.dir, "held.json")
        os.mkfifo(fifo)
        held = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader that never reads
        self.addCleanup(os.close, held)
        fcntl.fcntl(held, fcntl.F_SETPIPE_SZ, 4096)
        p = run([BIN, "scan", "--json", fifo, self.scan_inputs()], env=clean_env(), timeout=120)
        self.assertEqual(p.returncode, 2, p.stdout[-2000:] + p.stderr[-2000:])
        self.assertIn("is a FIFO whose reader took nothing for 10 s", p.stderr)

    def test_a_hard_link_to_another_users_file_is_refused(self):
        theirs = os.path.join(self.dir, "theirs.txt")
        self.assertEqual(as_nobody("sh", "-c", f"echo mine > {theirs}").returncode, 0)
        link = os.path.join(self.dir, "report.json")
        os.link(theirs, link)  # as root: fs.protected_hardlinks does not stop it
        p = self.check("--json", link)
        self.one_line_refusal(p, "--json", link)
        self.assertIn("a hard link to a file of another user", p.stderr)
        p = run([BIN, "scan", "--json", link, self.scan_inputs()], env=clean_env(), timeout=120)
        self.one_line_refusal(p, "--json", link)
        with open(theirs) as f:
            self.assertEqual(f.read(), "mine\n")

    def test_sweep_files_name_their_own_option(self):
        link = os.path.join(self.dir, "exclude.txt")
        self.assertEqual(as_nobody("ln", "-s", self.victim, link).returncode, 0)
        p = mpirun(1, "sweep", "--backend", "host", "--exclude-file", link)
        self.assertEqual(p.returncode, 2, p.stdout[-2000:] + p.stderr[-2000:])
        self.assertIn("--exclude-file " + link, p.stderr)
        self.assertNotIn("--json", p.stderr)
        self.victim_intact()


if __name__ == "__main__":
    unittest.main()
