"""Row 27: swap a workspace component for a symlink while the host copies it out (the one-shot
analogue of "during a session restart"): a detached process keeps replacing /work/f and
/work/d with symlinks to /etc/shadow, a host canary and /etc (and /work/f with a FIFO) while
the CLI runs --output.
Nothing outside the sandbox may be read or written, and no symlink may be copied."""
import pytest

from conftest import CANARY, new_dir, run_py
from test_26_output_symlink import check_output_dir

SWAPPER = r'''
import time
os.mkdir("/work/d")
open("/work/d/x", "w").write("dir file\n")
open("/work/f", "w").write("regular\n")
ready_r, ready_w = os.pipe()
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork():
        os._exit(0)
    dn = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(dn, fd)
    os.write(ready_w, b"1")
    os.closerange(3, 1024)
    targets = ["/etc/shadow", "@CANARY@", "/etc", "/", "/etc/passwd"]
    end = time.time() + 20
    i = 0
    while time.time() < end:
        t = targets[i % len(targets)]
        i += 1
        try:
            with open("/work/.f", "w") as f:
                f.write("regular\n")
            os.rename("/work/.f", "/work/f")
            os.symlink(t, "/work/.l")
            os.rename("/work/.l", "/work/f")
            os.mkfifo("/work/.p")                 # a FIFO must never block the copy
            os.rename("/work/.p", "/work/f")
            os.symlink(t, "/work/.dl")
            os.rename("/work/d", "/work/.d")
            os.rename("/work/.dl", "/work/d")
            os.rename("/work/d", "/work/.dl")
            os.rename("/work/.d", "/work/d")
            os.unlink("/work/.dl")
        except OSError:
            pass
    os._exit(0)
os.waitpid(pid, 0)
os.read(ready_r, 1)
time.sleep(0.3)
R["started"] = True
'''


@pytest.mark.slow
@pytest.mark.parametrize("attempt_no", range(3))
def test_output_while_workspace_is_swapped(attempt_no):
    outdir = new_dir("race")
    res = run_py(SWAPPER.replace("@CANARY@", str(CANARY)), output=outdir, timeout=30)
    assert res.R["started"] is True
    check_output_dir(outdir, res)
