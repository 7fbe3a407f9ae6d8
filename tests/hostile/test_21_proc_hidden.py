"""Row 21: /proc/kallsyms, kcore, sys/*, sched_debug, keys, the daemon's (here: the CLI's)
environ -> ENOENT (proc mounted with subset=pid in a new pid namespace)."""
import os

from conftest import SECRET_ENV, expect_in, run_py

HIDDEN = ["/proc/kallsyms", "/proc/kcore", "/proc/sys/kernel/hostname",
          "/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe", "/proc/sys/vm/drop_caches",
          "/proc/sched_debug", "/proc/keys", "/proc/key-users", "/proc/sysrq-trigger",
          "/proc/modules", "/proc/timer_list", "/proc/kmsg", "/proc/iomem", "/proc/ioports",
          "/proc/config.gz", "/proc/mounts", "/proc/meminfo", "/proc/cmdline", "/proc/sysvipc/shm",
          "/proc/slabinfo", "/proc/vmallocinfo", "/proc/buddyinfo", "/proc/self/../kallsyms",
          "/proc/net/tcp", "/proc/cgroups", "/proc/fs", "/proc/driver", "/proc/bus", "/proc/irq",
          "/proc/acpi", "/proc/scsi", "/proc/tty", "/proc/sys"]


def test_proc_is_pid_only():
    cli_ppid = os.getpid()
    res = run_py(r'''
        hidden = @HIDDEN@
        for p in hidden:
            R["read " + p] = attempt(lambda: open(p, "rb").read(64))
        R["write core_pattern"] = attempt(lambda: open("/proc/sys/kernel/core_pattern", "w").write("|/x"))
        R["write sysrq-trigger"] = attempt(lambda: open("/proc/sysrq-trigger", "w").write("h"))
        R["listing"] = sorted(os.listdir("/proc"))
        R["host pid visible"] = os.path.exists("/proc/@HOSTPID@")
        envs = {}
        for pid in [d for d in os.listdir("/proc") if d.isdigit()] + ["self"]:
            try:
                envs[pid] = open("/proc/%s/environ" % pid, "rb").read().decode("utf-8", "replace")
            except OSError as e:
                envs[pid] = ename(e.errno)
        R["environs"] = envs
        R["os.environ"] = dict(os.environ)
    '''.replace("@HIDDEN@", repr(HIDDEN)).replace("@HOSTPID@", str(cli_ppid)))
    r = dict(res.R)
    listing = r.pop("listing")
    extra = [e for e in listing if not e.isdigit() and e not in ("self", "thread-self")]
    assert extra == [], f"/proc shows more than pids: {extra}"
    assert len([e for e in listing if e.isdigit()]) < 32, listing
    assert r.pop("host pid visible") is False
    envs = r.pop("environs")
    environ = r.pop("os.environ")
    blob = repr(envs) + repr(environ)
    for name, value in SECRET_ENV.items():
        assert value not in blob, f"secret {name} from the CLI's environment reached the sandbox"
    for key, value in r.items():
        if key.startswith("write"):
            expect_in(value, {"ENOENT", "EROFS", "EACCES"}, key)
        else:
            expect_in(value, {"ENOENT"}, key)
