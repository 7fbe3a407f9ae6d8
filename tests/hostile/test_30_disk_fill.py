"""Row 30: fill the disk and the inodes of /tmp, /dev/shm and /work; one huge file ->
ENOSPC/EFBIG at the quota; the host disk is unchanged (those are size-capped tmpfs mounts)."""
import os

import pytest

from conftest import custom_profile, new_dir, run_py

WORK = 32 << 20
TMP = 16 << 20


def _profile():
    return custom_profile("hostile-disk", limits={"workspace": "32MiB", "tmp": "16MiB"})


def _host_free():
    st = os.statvfs("/")
    return st.f_bavail * st.f_frsize


@pytest.mark.slow
def test_fill_space_of_each_mount():
    free_before = _host_free()
    res = run_py(r'''
        chunk = b"\xa5" * (1 << 20)
        for d in ("/tmp", "/dev/shm", "/work"):
            total, err = 0, None
            with open(d + "/fill", "wb") as f:
                try:
                    while total < (1 << 30):
                        f.write(chunk)
                        f.flush()
                        total += len(chunk)
                except OSError as e:
                    err = ename(e.errno)
            R[d] = [err, total]
            os.unlink(d + "/fill")
        mi = {}
        for line in open("/proc/self/mountinfo"):
            parts = line.split()
            sep = parts.index("-")
            mi[parts[4]] = [parts[sep + 1], parts[sep + 3] if len(parts) > sep + 3 else ""]
        R["mounts"] = {m: mi.get(m) for m in ("/tmp", "/dev/shm", "/work")}
    ''', profile=_profile(), timeout=60)
    r = res.R
    for d, cap in (("/tmp", TMP), ("/dev/shm", TMP), ("/work", WORK)):
        err, total = r[d]
        assert err in ("ENOSPC", "EFBIG", "EDQUOT"), f"{d}: {err} after {total} bytes"
        assert total <= cap + (1 << 20), f"{d}: wrote {total} bytes past its {cap}-byte cap"
        fstype, opts = r["mounts"][d]
        assert fstype == "tmpfs", f"{d} is {fstype}, not a tmpfs: it may be host disk"
    # the host disk did not absorb it (generous: other work on the host changes it a little)
    assert _host_free() > free_before - (256 << 20)


@pytest.mark.slow
def test_fill_inodes():
    res = run_py(r'''
        import time
        for d in ("/tmp", "/dev/shm", "/work"):
            os.mkdir(d + "/many")
            n, err, t0 = 0, None, time.time()
            try:
                while n < 2_000_000 and time.time() - t0 < 20:
                    os.close(os.open("%s/many/%d" % (d, n), os.O_CREAT | os.O_WRONLY, 0o600))
                    n += 1
            except OSError as e:
                err = ename(e.errno)
            R[d] = [err, n]
            import shutil
            shutil.rmtree(d + "/many")
    ''', profile=_profile(), timeout=90, hard_timeout=150)
    for d in ("/tmp", "/dev/shm", "/work"):
        err, n = res.R[d]
        assert err in ("ENOSPC", "EDQUOT"), f"{d}: no inode cap ({n} files created, {err})"


def test_one_huge_file():
    res = run_py(r'''
        def write_at(path, off):
            with open(path, "wb") as f:
                f.seek(off)
                f.write(b"x")
        R["write at 10GiB"] = attempt(write_at, "/work/huge", 10 << 30)
        R["truncate 10GiB"] = attempt(lambda: open("/work/huge2", "wb").truncate(10 << 30))
        fd = os.open("/work/huge3", os.O_CREAT | os.O_WRONLY)
        R["fallocate 10GiB"] = attempt(os.posix_fallocate, fd, 0, 10 << 30)
        os.close(fd)
        R["tmp write at 10GiB"] = attempt(write_at, "/tmp/huge", 10 << 30)
        R["sizes"] = {n: os.stat("/work/" + n).st_size for n in os.listdir("/work")}
    ''', profile=_profile())
    r = dict(res.R)
    sizes = r.pop("sizes")
    for key, value in r.items():
        assert value in ("EFBIG", "ENOSPC"), f"{key}: {value} (a sparse 10 GiB file was made)"
    assert all(s <= WORK for s in sizes.values()), sizes


def test_huge_sparse_file_is_not_copied_out():
    """Whatever the sandbox manages to create, --output must not write more to the host than
    the workspace cap."""
    outdir = new_dir("huge-out")
    res = run_py(r'''
        try:
            with open("/work/sparse", "wb") as f:
                f.seek(10 << 30)
                f.write(b"x")
        except OSError as e:
            R["err"] = ename(e.errno)
    ''', profile=_profile(), output=outdir, timeout=60)
    total = 0
    for dirpath, _, files in os.walk(outdir):
        for n in files:
            st = os.lstat(os.path.join(dirpath, n))
            total += max(st.st_size, st.st_blocks * 512)
    assert total <= WORK, f"--output wrote {total} bytes to the host ({res.R})"
