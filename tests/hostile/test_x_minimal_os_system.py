"""Extra: `import os; os.system("ls /")` under the minimal profile -> refused with a message that
names the module and the allowed list; under default it runs, inside the sandbox only."""
import json

from conftest import REPO, run


def _minimal_imports():
    try:
        with open(REPO / "profiles" / "minimal.json") as f:
            return json.load(f).get("imports") or []
    except (OSError, ValueError):
        return []


def test_minimal_refuses_os():
    res = run('import os\nos.system("ls /")\nprint("RAN")', profile="minimal")
    assert res.rc != 2, f"airlock failed instead of refusing\n{res.describe()}"
    assert res.status == "error", res.describe()
    assert "RAN" not in res.out and "usr" not in res.out, res.describe()
    err = res.error or {}
    message = " ".join(str(err.get(k) or "") for k in ("name", "value", "traceback")) + res.err
    assert "'os'" in message or '"os"' in message or " os " in message, \
        f"the refusal does not name the module: {message!r}"
    allowed = [m for m in _minimal_imports() if m != "os"]
    if allowed:
        named = [m for m in allowed if m in message]
        assert len(named) >= min(3, len(allowed)), \
            f"the refusal does not list the allowed modules: {message!r}"
    else:
        assert "allow" in message.lower(), message


def test_minimal_refuses_os_via_importlib_and_dunder():
    for code in ('__import__("os").system("ls /")',
                 'import importlib\nimportlib.import_module("os").system("ls /")',
                 'from os import system\nsystem("ls /")',
                 'import subprocess\nsubprocess.run(["ls", "/"])'):
        res = run(code + '\nprint("RAN")', profile="minimal")
        assert res.status == "error" and "RAN" not in res.out and "usr" not in res.out, \
            f"{code!r} ran under minimal\n{res.describe()}"


def test_default_runs_inside_the_sandbox_only():
    res = run('import os\nos.system("ls -a /")\nos.system("ls -a /mnt")\n'
              'os.system("ls -a /home")\nos.system("ls -a /opt")\n'
              'a, b = os.stat("/work"), os.stat("/mnt/data")\n'
              'print("SAME" if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino) else "OTHER")\n'
              'a, b = os.stat("/work"), os.stat("/home/user")\n'
              'print("SAME" if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino) else "OTHER")\n'
              'print(os.path.realpath("/home/user"))')
    assert res.status == "ok", res.describe()
    lines = res.out.split()
    # ls -a /, ls -a /mnt, ls -a /home: each listing starts with its ".".
    second = lines.index(".", 1)
    third = lines.index(".", second + 1)
    fourth = lines.index(".", third + 1)
    entries, mnt, home = lines[:second], lines[second:third], lines[third:fourth]
    opt = lines[fourth:-3]
    assert "work" in entries and "usr" in entries, entries
    for host_only in ("root", "boot", "sys", "srv", "media"):
        assert host_only not in entries, f"/{host_only} visible: {entries}"
    # /opt is airlock's own, not the host's: only its airlock directory (the pip shims, and a
    # profile's layer) is there.
    assert opt == [".", "..", "airlock"], f"/opt holds {opt}"
    # /mnt is airlock's own, not the host's: it holds only data, which is /work itself (where
    # code written for OpenAI's code interpreter keeps its files).
    assert mnt == [".", "..", "data"], f"/mnt holds {mnt}"
    assert lines[-3] == "SAME", res.out
    # /home likewise holds only user, /work bound there (E2B's home).
    assert home == [".", "..", "user"], f"/home holds {home}"
    assert lines[-2] == "SAME" and lines[-1] == "/home/user", res.out
