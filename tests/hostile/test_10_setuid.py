"""Row 10: exec a setuid-root binary copied into /work (and reached as /mnt/data, its other
name); su, sudo -> no gain (no_new_privs, nosuid, unmapped owner); uid stays 1000."""
from conftest import run, run_py


def test_setuid_binaries_give_nothing():
    res = run_py(r'''
        import shutil, stat, subprocess
        def ids(argv):
            try:
                p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                                   timeout=10, text=True)
                return [p.returncode, p.stdout.strip(), p.stderr.strip()[-200:]]
            except FileNotFoundError:
                return "ENOENT"
            except subprocess.TimeoutExpired:
                return "TIMEOUT"
        st = os.stat("/usr/bin/su")
        R["su owner uid"] = st.st_uid
        R["su setuid bit"] = bool(st.st_mode & stat.S_ISUID)
        R["su -c id -u"] = ids(["/usr/bin/su", "-c", "id -u", "root"])
        R["sudo"] = ids(["sudo", "-n", "id", "-u"])
        R["mount (setuid)"] = ids(["/usr/bin/mount", "-t", "tmpfs", "none", "/tmp"])
        # a setuid copy in /work: owned by the sandbox user, on a nosuid mount
        shutil.copy("/usr/bin/id", "/work/id")
        os.chmod("/work/id", 0o4755)
        shutil.copy("/usr/bin/su", "/work/su")
        R["chmod su 4755"] = attempt(os.chmod, "/work/su", 0o4755)
        R["chown su root"] = attempt(os.chown, "/work/su", 0, 0)
        R["/work/id -u"] = ids(["/work/id", "-u"])
        R["/work/su"] = ids(["/work/su", "-c", "id -u", "root"])
        R["setuid(0)"] = attempt(os.setuid, 0)
        R["setresuid(0)"] = attempt(os.setresuid, 0, 0, 0)
        R["setgid(0)"] = attempt(os.setgid, 0)
        R["setgroups([0])"] = attempt(os.setgroups, [0])
        R["resuid"] = list(os.getresuid())
        R["resgid"] = list(os.getresgid())
        R["nosuid"] = {m: bool(os.statvfs(m).f_flag & os.ST_NOSUID)
                       for m in ("/work", "/mnt/data", "/tmp", "/dev/shm", "/usr")}
        R["nodev"] = {m: bool(os.statvfs(m).f_flag & os.ST_NODEV)
                      for m in ("/work", "/mnt/data", "/tmp", "/dev/shm", "/usr")}
        # the same setuid copy reached through /mnt/data, the other name of /work
        R["/mnt/data/id -u"] = ids(["/mnt/data/id", "-u"])
    ''')
    r = res.R
    assert r["su owner uid"] != 0 and r["su owner uid"] != 1000, (
        f"host root should be unmapped inside (overflow uid), got {r['su owner uid']}")
    assert r["su -c id -u"] not in ("ENOENT",), "su expected to be present (host has it)"
    rc, out, _ = r["su -c id -u"]
    assert rc != 0 and out != "0", r["su -c id -u"]
    assert r["sudo"] == "ENOENT" or (r["sudo"][0] != 0 and r["sudo"][1] != "0"), r["sudo"]
    assert r["mount (setuid)"][0] != 0, r["mount (setuid)"]
    assert r["/work/id -u"][:2] == [0, "1000"], r["/work/id -u"]
    assert r["/work/su"][0] != 0 and r["/work/su"][1] != "0", r["/work/su"]
    assert r["chown su root"] == "EPERM", r
    for k in ("setuid(0)", "setresuid(0)", "setgid(0)", "setgroups([0])"):
        assert r[k] == "EPERM", (k, r[k])
    assert r["resuid"] == [1000, 1000, 1000], r
    assert r["resgid"] == [1000, 1000, 1000], r
    assert all(r["nosuid"].values()), f"mounts without nosuid: {r['nosuid']}"
    assert all(r["nodev"].values()), f"mounts without nodev: {r['nodev']}"
    assert r["/mnt/data/id -u"][:2] == [0, "1000"], r["/mnt/data/id -u"]


def test_uid_from_bash():
    res = run("id -u; id -g; id -G; whoami 2>/dev/null || true", language="bash")
    assert res.status == "ok", res.describe()
    lines = res.out.split()
    assert lines[:3] == ["1000", "1000", "1000"], res.describe()
