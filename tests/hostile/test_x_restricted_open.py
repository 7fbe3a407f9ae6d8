"""Extra: the restricted profiles let plain open() be (issue 14: the kernel is the boundary for
files, docs/SECURITY.md "Files the code can open"). Whatever open() is pointed at -- /work and
/tmp, the host's files by their host paths, /etc, /usr, /proc, symlinks planted in /work that
point out -- it reaches only what Landlock and the mount plan let the sandbox reach: it reads
and writes /work and /tmp, writes nothing else, and finds no host secret. The escape dunders stay
refused next to it."""
import json
import os

from conftest import CANARY, CANARY_CONTENT, run

# Plain code only: the restricted profiles refuse the ctypes prelude of run_py().
PAYLOAD = r'''
import json
NAMES = {1: "EPERM", 2: "ENOENT", 6: "ENXIO", 13: "EACCES", 20: "ENOTDIR", 21: "EISDIR",
         30: "EROFS", 40: "ELOOP"}
R = {}
def attempt(fn):
    try:
        v = fn()
        return "OK:" + (v if isinstance(v, str) else repr(v))[:300]
    except OSError as e:
        return NAMES.get(e.errno, "E%s" % e.errno)
    except Exception as e:
        return type(e).__name__
def write(path, data="x"):
    with open(path, "w") as f:
        f.write(data)
    return "written"
def read(path):
    with open(path, "rb") as f:
        return f.read(4096).decode("utf-8", "replace")
R["write /work"] = attempt(lambda: write("/work/a.txt", "in work"))
R["read /work"] = attempt(lambda: read("/work/a.txt"))
R["write relative"] = attempt(lambda: write("sub.txt", "relative"))
R["read /mnt/data"] = attempt(lambda: read("/mnt/data/sub.txt"))
R["write /tmp"] = attempt(lambda: write("/tmp/b.txt", "in tmp"))
R["read /tmp"] = attempt(lambda: read("/tmp/b.txt"))
for path in ("/etc/passwd", "/etc/hostname", "/usr/airlock-planted", "/airlock-planted",
             "/proc/self/oom_score_adj", "/mnt/airlock-planted", "/.airlock/planted",
             "/dev/airlock-planted"):
    R["write " + path] = attempt(lambda: write(path, "-1000\n"))
for path in ("/etc/shadow", "/root/.ssh/id_rsa", "/home/cloudsdk", "/sys/kernel/notes", CANARY):
    R["read " + path] = attempt(lambda: read(path))
R["read /proc/1/mem"] = attempt(lambda: open("/proc/1/mem", "r+b").read(1))
R["passwd"] = attempt(lambda: read("/etc/passwd"))
R["environ"] = attempt(lambda: read("/proc/self/environ"))
print("@@R@@" + json.dumps(R))
'''

# The same through links planted in /work (pathlib is allowed in data-science).
LINKS = r'''
import json, pathlib
R = {}
for name, target in (("canary", CANARY), ("shadow", "/etc/shadow"), ("root", "/proc/1/root"),
                     ("self-root", "/proc/self/root"), ("cwd", "/proc/self/cwd"),
                     ("up", "../../../../..")):
    link = pathlib.Path("/work") / name
    link.symlink_to(target)
for name, rel in (("canary", ""), ("shadow", ""), ("root", "etc/shadow"),
                  ("self-root", "etc/shadow"), ("self-root", str(CANARY).lstrip("/")),
                  ("up", "etc/shadow"), ("up", str(CANARY).lstrip("/"))):
    path = "/work/" + name + ("/" + rel if rel else "")
    try:
        with open(path, "rb") as f:
            R[path] = "OK:" + f.read(200).decode("utf-8", "replace")
    except OSError as e:
        R[path] = "errno %s" % e.errno
try:
    with open("/work/cwd/written-through-link", "w") as f:
        f.write("x")
    R["write through cwd link"] = sorted(p.name for p in pathlib.Path("/work").iterdir())
except OSError as e:
    R["write through cwd link"] = "errno %s" % e.errno
print("@@R@@" + json.dumps(R))
'''


def _report(res):
    for line in reversed(res.out.splitlines()):
        if line.startswith("@@R@@"):
            return json.loads(line[5:])
    raise AssertionError("the payload printed no report\n" + res.describe())


def test_restricted_open_reaches_only_the_sandbox():
    for profile in ("minimal", "data-science"):
        res = run(PAYLOAD.replace("CANARY", repr(str(CANARY))), profile=profile)
        assert res.status == "ok", res.describe()
        R = _report(res)
        assert R["write /work"] == "OK:written" and R["read /work"] == "OK:in work", R
        assert R["write relative"] == "OK:written" and R["read /mnt/data"] == "OK:relative", R
        assert R["write /tmp"] == "OK:written" and R["read /tmp"] == "OK:in tmp", R
        for key, value in R.items():
            if key.startswith("write /") and key not in ("write /work", "write /tmp"):
                assert value in ("EROFS", "EACCES", "EPERM", "ENOENT"), (profile, key, value)
        for key in ("/etc/shadow", "/root/.ssh/id_rsa", "/home/cloudsdk", "/sys/kernel/notes",
                    str(CANARY)):
            assert R["read " + key] in ("ENOENT", "EACCES"), (profile, key, R["read " + key])
        assert R["read /proc/1/mem"] in ("EACCES", "EPERM", "ENOENT"), R
        assert CANARY_CONTENT.decode().strip() not in json.dumps(R), R
        # /etc/passwd is the sandbox's own, generated: the host's users are not in it.
        sandbox_users = {ln.split(":")[0] for ln in R["passwd"][3:].splitlines() if ":" in ln}
        assert sandbox_users and sandbox_users <= {"root", "user", "nobody", "sandbox"}, \
            R["passwd"]
        assert os.environ.get("AIRLOCK_TOKEN", "-" * 40) not in R["environ"], R["environ"]


def test_restricted_open_through_planted_symlinks():
    res = run(LINKS.replace("CANARY", repr(str(CANARY))), profile="data-science")
    assert res.status == "ok", res.describe()
    R = _report(res)
    assert CANARY_CONTENT.decode().strip() not in json.dumps(R), R
    for path, value in R.items():
        if path == "write through cwd link":
            # /proc/self/cwd is /work: the write lands in the sandbox's own /work.
            assert "written-through-link" in value, value
        else:
            assert value.startswith("errno "), (path, value)


def test_module_written_with_open_is_not_imported():
    """No writable directory is on sys.path: a module planted with open() under the name of an
    allowed one is not what `import` loads (it would run outside the policy's checks)."""
    code = ("for d in ('/work', '/tmp'):\n"
            "    with open(d + '/scipy.py', 'w') as f:\n"
            "        f.write('print(\"PLANTED\")\\n')\n"
            "import scipy\n"
            "print('IMPORTED', scipy.__name__)")
    res = run(code, profile="data-science")
    assert res.status == "ok", res.describe()
    assert "IMPORTED scipy" in res.out and "PLANTED" not in res.out, res.describe()


def test_restricted_policy_still_refuses_escape_dunders_next_to_open():
    for code, offender in (
            ("f = open('/work/x', 'w')\nf.__class__.__subclasses__()", "__class__"),
            ("open.__self__.__import__('os')", "__self__"),
            ("import re\nre.enum.bltns.__import__('os')", "bltns"),
            ("def f():\n    pass\nf.__globals__['__builtins__']", "__globals__"),
            ("with open('/work/x', 'w') as f:\n    f.write(str(f.__dict__))", "__dict__")):
        res = run(code + "\nprint('RAN')", profile="minimal")
        assert res.status == "error", res.describe()
        assert "RAN" not in res.out, res.describe()
        err = res.error or {}
        assert err.get("name") == "PolicyError", res.describe()
        assert f"'{offender}' is not allowed by profile 'minimal'" in err.get("value", ""), \
            res.describe()
