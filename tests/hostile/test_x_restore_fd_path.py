"""Extra (issue 12): a resumed session's runner reads its saved variables from a file of the
daemon's state directory, handed in as an open fd, and unpickling runs the session's own code
(an object's __reduce__) while that fd is open. The code reads the links of every open fd at
that moment; none may show a host path (the state directory, this suite's directory)."""
import pytest

import conftest
from conftest import SESSION_DIR, VIA_DAEMON

pytestmark = pytest.mark.skipif(
    not VIA_DAEMON, reason="daemon-only: stopped sessions and their saved state exist only in "
                           "`airlock serve`; run with AIRLOCK_HOSTILE_VIA=daemon")

# Stored by the session itself; when its state is loaded, exec() runs this with the fd open.
SPY = r'''
class Spy:
    def __reduce__(self):
        return (exec, ("""
import builtins, os
links = {}
for fd in os.listdir('/proc/self/fd'):
    try:
        links[fd] = os.readlink('/proc/self/fd/' + fd)
    except OSError:
        pass
builtins._links_at_load = links
""", {}))
spy = Spy()
'''


def test_the_saved_state_fd_shows_no_host_path():
    d = conftest.daemon()
    sid = d.create_session()
    try:
        res = d.execute(sid, SPY)
        assert res["status"] == "ok", res
        r = d.post(f"/v1/sessions/{sid}/stop", timeout=120)
        assert r.status_code == 200 and r.json()["state"] == "stopped", d.why(r)

        res = d.execute(sid, "import builtins\nsorted(builtins._links_at_load.values())")
        assert res.get("resumed") is True and res["status"] == "ok", res
        links = res["result"]
        print(f"fd links while the state loaded: {links}")
        for host_path in (str(d.state_dir), str(SESSION_DIR)):
            assert host_path not in links, (f"the sandbox saw the host path {host_path!r} "
                                            f"through an fd: {links}")
    finally:
        d.delete_session(sid)
