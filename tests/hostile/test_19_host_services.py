"""Row 19: reach host services: a TCP port on 127.0.0.1 (standing in for the daemon's port),
the abstract socket @/tmp/.X11-unix/X0, a host unix socket path (standing in for D-Bus and the
daemon's control socket) -> ECONNREFUSED/ENOENT/EPERM; no host socket anywhere in the tree.
Every listener here is one this test created."""
import os
import socket
import uuid

from conftest import SESSION_DIR, Listener, expect_in, run_py


def _abstract_listener(name):
    try:
        return Listener(socket.AF_UNIX, socket.SOCK_STREAM, name)
    except OSError:
        return None


def test_host_services_unreachable(tcp_listener):
    x11_name = "\0/tmp/.X11-unix/X0"
    own_name = "\0airlock-hostile-" + uuid.uuid4().hex
    x11 = _abstract_listener(x11_name)   # None when a real X server already has it
    own = _abstract_listener(own_name)
    assert own is not None
    path_sock = Listener(socket.AF_UNIX, socket.SOCK_STREAM, str(SESSION_DIR / "daemon.sock"))
    try:
        names = [own_name] + ([x11_name] if x11 else [])
        res = run_py(r'''
            import socket, stat
            names = @NAMES@
            for n in names:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                R["abstract " + n.lstrip("\0")] = attempt(s.connect, n)
                s.close()
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(5)
            R["daemon port"] = attempt(s.connect, ("127.0.0.1", @PORT@))
            s.close()
            for path in ["@SOCKPATH@", "/run/dbus/system_bus_socket",
                         "/var/run/dbus/system_bus_socket", "/run/systemd/private",
                         "/run/systemd/journal/socket", "/var/run/docker.sock",
                         "/run/containerd/containerd.sock", "/tmp/.X11-unix", "/run/user"]:
                R["lstat " + path] = attempt(os.lstat, path)
            # no socket inode anywhere in the sandbox's tree (except /proc)
            sockets = []
            def walk(d):
                try:
                    it = list(os.scandir(d))
                except OSError:
                    return
                for e in it:
                    if e.is_symlink() or e.is_file(follow_symlinks=False):
                        continue
                    if e.is_dir(follow_symlinks=False):
                        if e.path != "/proc":
                            walk(e.path)
                        continue
                    try:
                        if stat.S_ISSOCK(e.stat(follow_symlinks=False).st_mode):
                            sockets.append(e.path)
                    except OSError:
                        pass
            walk("/")
            R["socket inodes"] = sockets
        '''.replace("@NAMES@", repr(names)).replace("@PORT@", str(tcp_listener.port))
           .replace("@SOCKPATH@", str(SESSION_DIR / "daemon.sock")), timeout=60)
        r = dict(res.R)
        assert r.pop("socket inodes") == [], "socket files visible in the sandbox"
        expect_in(r.pop("daemon port"), {"ENETUNREACH", "EACCES", "ECONNREFUSED", "EPERM"},
                  "127.0.0.1 daemon port")
        for key in [k for k in r if k.startswith("abstract")]:
            expect_in(r.pop(key), {"ECONNREFUSED", "EPERM", "ENOENT"}, key)
        for key, value in r.items():
            expect_in(value, {"ENOENT"}, key)
        assert tcp_listener.contacts() == 0
        assert own.contacts() == 0, "the test's abstract socket was reached from the sandbox"
        assert path_sock.contacts() == 0
        if x11:
            assert x11.contacts() == 0, "abstract @/tmp/.X11-unix/X0 reached from the sandbox"
    finally:
        for lst in (x11, own, path_sock):
            if lst:
                lst.close()
        try:
            os.unlink(SESSION_DIR / "daemon.sock")
        except FileNotFoundError:
            pass
