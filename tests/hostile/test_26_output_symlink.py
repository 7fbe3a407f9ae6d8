"""Row 26: symlink /work/x -> /etc/passwd (and to /etc/shadow, to a host canary, to /), then
ask for a download -> refused (never followed: RESOLVE_BENEATH-style); the host is untouched.
With the one-shot CLI the download is `--output HOSTDIR`."""
import os
import stat

from conftest import CANARY, CANARY_CONTENT, new_dir, run_py

PLANT = r'''
links = {"passwd": "/etc/passwd", "shadow": "/etc/shadow", "canary": "@CANARY@",
         "rootdir": "/", "etcdir": "/etc", "rel": "../../../../../../etc/passwd",
         "selfroot": "/proc/self/root/etc/passwd", "hostdir": "@HOSTDIR@"}
for name, target in links.items():
    os.symlink(target, "/work/" + name)
os.mkfifo("/work/fifo")
with open("/work/real.txt", "w") as f:
    f.write("real content\n")
os.mkdir("/work/sub")
with open("/work/sub/inner.txt", "w") as f:
    f.write("inner\n")
os.symlink("/etc/passwd", "/work/sub/inner-link")
os.symlink("/", "/work/sub/up")
R["planted"] = sorted(os.listdir("/work"))
'''

LINK_NAMES = {"passwd", "shadow", "canary", "rootdir", "etcdir", "rel", "selfroot", "hostdir"}


def _host_secrets():
    out = [CANARY_CONTENT]
    for p in ("/etc/passwd", "/etc/shadow"):
        with open(p, "rb") as f:
            out.append(f.read())
    return out


def _walk(outdir):
    found = {}
    for dirpath, dirnames, filenames in os.walk(outdir):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            found[os.path.relpath(p, outdir)] = os.lstat(p)
    return found


def check_output_dir(outdir, res):
    secrets = _host_secrets()
    found = _walk(outdir)
    for rel, st in found.items():
        assert not stat.S_ISLNK(st.st_mode), f"a symlink was copied out: {rel}"
        assert stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode), f"special file: {rel}"
        if stat.S_ISREG(st.st_mode):
            with open(os.path.join(outdir, rel), "rb") as f:
                data = f.read()
            for s in secrets:
                assert s not in data and data not in (s,), f"host file content leaked into {rel}"
            assert b"root:x:0:0" not in data and b"root:" not in data[:5], f"{rel}: {data[:80]!r}"
    top = {rel for rel in found if os.sep not in rel}
    assert not (top & LINK_NAMES), f"symlinks were followed and copied: {top & LINK_NAMES}"
    return found


def test_output_never_follows_planted_symlinks():
    outdir = new_dir("out")
    hostdir = new_dir("hostdir")  # a host directory a followed symlink would copy from/into
    (hostdir / "host-secret.txt").write_bytes(CANARY_CONTENT)
    res = run_py(PLANT.replace("@CANARY@", str(CANARY)).replace("@HOSTDIR@", str(hostdir)),
                 output=outdir)
    found = check_output_dir(outdir, res)
    assert "real.txt" in found, f"the regular file was not copied out: {sorted(found)}\n{res.describe()}"
    with open(outdir / "real.txt") as f:
        assert f.read() == "real content\n"
    if "sub" in found:
        assert "sub/up" not in found and "sub/inner-link" not in found
    assert "fifo" not in found
    # the skipped entries are reported: in the JSON's skipped_files and on the CLI's stderr
    skipped = {e.get("path"): e.get("reason", "") for e in res.json.get("skipped_files") or []}
    for name in ("passwd", "shadow", "canary", "rootdir", "etcdir", "rel", "selfroot", "fifo"):
        assert name in skipped, f"'{name}' not reported as skipped: {skipped}\n{res.describe()}"
    assert "symbolic link" in skipped["shadow"], skipped
    assert "shadow" in res.cli_stderr, res.describe()
    assert sorted(os.listdir(hostdir)) == ["host-secret.txt"]
    assert (hostdir / "host-secret.txt").read_bytes() == CANARY_CONTENT


def test_output_into_dir_with_existing_files():
    """A second run into the same output dir: files are replaced, never written through."""
    outdir = new_dir("out2")
    res = run_py('open("/work/real.txt", "w").write("one\\n")', output=outdir)
    assert (outdir / "real.txt").read_text() == "one\n", res.describe()
    res = run_py(PLANT.replace("@CANARY@", str(CANARY)).replace("@HOSTDIR@", "/etc"),
                 output=outdir)
    check_output_dir(outdir, res)
