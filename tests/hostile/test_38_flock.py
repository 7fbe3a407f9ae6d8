"""Row 38: flock covert channel on a shared read-only inode -> matches the documented decision.
ISOLATION.md leaves the choice open ("decide whether lock covert channels on shared ro inodes are
out of scope, or deny only flock"); this test looks the decision up in the project's docs and
checks the sandbox against it. No documented decision is a failure: the row cannot be judged."""
import concurrent.futures
import glob
import re
import time

import pytest

from conftest import REPO, run_py

SHARED = "/usr/lib/python3.11/os.py"

HOLD = r'''
import fcntl, time
fd = os.open("@PATH@", os.O_RDONLY)
R["flock"] = attempt(fcntl.flock, fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
R["raw flock"] = syscall(73, fd, 2 | 4) if R["flock"] != "OK" else "held"
time.sleep(8)
'''

PROBE = r'''
import fcntl
fd = os.open("@PATH@", os.O_RDONLY)
R["flock"] = attempt(fcntl.flock, fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
R["rdlock"] = attempt(fcntl.lockf, fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
'''


def documented_decision():
    """('deny' | 'out-of-scope' | None, where). 'deny': flock is refused (EPERM); 'out-of-scope':
    the channel is accepted. Looks in the project's own documentation (docs/, README, SECURITY)
    and DESIGN.md; HOSTILE.md (this spec) and ISOLATION.md (which only asks the question) are
    not decisions."""
    paths = (glob.glob(str(REPO / "docs" / "**" / "*.md"), recursive=True)
             + glob.glob(str(REPO / "README*")) + glob.glob(str(REPO / "SECURITY*"))
             + ["/work/shared/DESIGN.md"])
    for path in paths:
        try:
            with open(path, errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        # paragraphs, table rows and list items
        for chunk in re.split(r"\n\s*\n|\n(?=\||\s*[-*] )", text):
            low = chunk.lower()
            if "flock" not in low or not re.search(r"covert|channel", low):
                continue
            accepted = (re.search(r"out of scope|\baccept(?:s|ed)?\b", low)
                        or (re.search(r"\ballowed\b", low) and "not allowed" not in low))
            if accepted:
                return "out-of-scope", path
            if re.search(r"\bden(?:y|ied)\b|\beperm\b|\brefused\b|not allowed", low):
                return "deny", path
    return None, None


@pytest.mark.slow
def test_flock_channel_matches_the_documented_decision():
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        a = pool.submit(run_py, HOLD.replace("@PATH@", SHARED), timeout=30)
        time.sleep(3)
        b = run_py(PROBE.replace("@PATH@", SHARED))
        ra = a.result().R
    rb = b.R
    channel = ra["flock"] == "OK" and rb["flock"] in ("EWOULDBLOCK", "EAGAIN")
    decision, where = documented_decision()
    observed = f"A: {ra}, B: {rb}, covert channel {'open' if channel else 'closed'}"
    assert decision is not None, (
        "no documented decision on the flock covert channel in docs/ or /work/shared "
        f"(ISOLATION.md leaves it open); observed {observed}")
    if decision == "deny":
        assert ra["flock"] == "EPERM" and rb["flock"] == "EPERM", \
            f"{where} documents flock as denied; observed {observed}"
    else:
        # accepted: the channel may exist; flock and POSIX read locks must keep working (the
        # reason given for allowing them), and the lock must have been taken by A.
        print(f"documented in {where}: flock channel accepted; observed {observed}")
        assert ra["flock"] == "OK" and rb["rdlock"] == "OK", observed
