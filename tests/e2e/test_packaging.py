"""Packaging (issue 11, item 5): the systemd unit and `airlock serve --print-systemd-unit`, the
unit's hardening run for real (emulated with the kernel features systemd itself uses, since
this machine has no systemd as PID 1), sd_notify readiness, `meson install`, the man page, the
bash completion and the Containerfile. docs/DEPLOY.md is what these tests hold true."""
import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

from airlock_daemon import AIRLOCK, Daemon, start_daemon_or_fail

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(AIRLOCK).resolve().parents[2]
UNIT = BUILD / "packaging" / "airlock.service"
COMPLETION = ROOT / "packaging" / "airlock.bash-completion"
CONTAINERFILE = ROOT / "packaging" / "Containerfile"
ENV = {k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_")}
ENV["ASAN_OPTIONS"] = "detect_leaks=0"

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="airlock's sandboxes need root")


def run(argv, **kw):
    kw.setdefault("env", ENV)
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, **kw)


def unit_service_keys(text):
    """{key: [values]} of the unit's [Service] section."""
    keys, section = {}, None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = line
        elif section == "[Service]":
            k, _, v = line.partition("=")
            keys.setdefault(k, []).append(v)
    return keys


@pytest.fixture
def tmp():
    d = pathlib.Path(tempfile.mkdtemp(prefix="airlock-e2e-pkg-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


# ------------------------------------------------------------------------------------------
# The unit
# ------------------------------------------------------------------------------------------

def test_print_systemd_unit_is_the_unit_meson_installs():
    p = run([AIRLOCK, "serve", "--print-systemd-unit"])
    assert p.returncode == 0, p.stderr
    assert p.stdout == UNIT.read_text()
    assert not re.search(r"@[a-z_]+@", p.stdout), "an unsubstituted @var@"
    assert re.search(r"^ExecStart=/\S+/bin/airlock serve ", p.stdout, re.M)


def test_unit_passes_systemd_analyze_verify(tmp):
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is not installed (apt-get install systemd)")
    # verify checks that ExecStart's binary exists: point it at the one under test.
    text = re.sub(r"^ExecStart=\S+", f"ExecStart={AIRLOCK}", UNIT.read_text(), flags=re.M)
    (tmp / "airlock.service").write_text(text)
    p = run(["systemd-analyze", "verify", "--man=no", str(tmp / "airlock.service")])
    # verify exits 0 on an unknown key or a bad value and only prints a warning: none may show.
    assert p.returncode == 0 and not (p.stdout + p.stderr).strip(), p.stdout + p.stderr


def test_unit_sets_what_the_daemon_needs():
    keys = unit_service_keys(UNIT.read_text())
    assert keys["Type"] == ["notify"]
    assert keys["KillMode"] == ["mixed"], "SIGTERM to every sandbox at once loses sessions"
    assert keys["Delegate"] == ["yes"]
    assert keys["StateDirectory"] == ["airlock"]
    assert int(keys["TimeoutStopSec"][0]) >= 60
    for key in ("ProtectKernelTunables", "ProtectControlGroups", "ProtectHostname",
                "RestrictNamespaces", "MemoryDenyWriteExecute", "ProtectKernelLogs"):
        assert key not in keys, f"{key} breaks the sandboxes (see the unit's comments)"


# The unit's hardening, emulated with the same kernel features systemd uses for it
# (systemd.exec(5)), so that a sandbox made by a daemon under it is tested for real. Options
# that are seccomp filters or service-manager settings are not emulated; each is named here
# so that a new option in the unit needs a decision.
NOT_EMULATED = {
    "Type", "NotifyAccess", "ExecStart", "StateDirectoryMode", "KillMode", "TimeoutStopSec",
    "Restart", "RestartSec", "Delegate", "RestrictAddressFamilies", "LockPersonality",
    "RestrictRealtime", "RestrictSUIDSGID", "SystemCallArchitectures", "SystemCallFilter",
}


def emulation_script(keys, state_dir, extra=""):
    """A shell script, run as `unshare --mount --propagation private sh -c SCRIPT sh ARGV...`,
    that sets up the unit's filesystem, privileges and limits and then execs ARGV."""
    unknown = set(keys) - NOT_EMULATED - {
        "StateDirectory", "ReadWritePaths", "ProtectSystem", "ProtectHome", "PrivateTmp",
        "ProtectKernelModules", "NoNewPrivileges", "CapabilityBoundingSet", "LimitNOFILE",
        "UMask"}
    assert not unknown, f"the unit sets {unknown}: emulate them here or list them as not emulated"
    caps = ",".join("+" + c.lower().removeprefix("cap_")
                    for c in keys["CapabilityBoundingSet"][0].split())
    rw = [state_dir]
    lines = ["set -eu", f"mkdir -p '{state_dir}'", f"exec 3<'{state_dir}'"]
    if keys.get("PrivateTmp") == ["yes"]:
        # A checkout (and its build) under /tmp, as CI's fresh clone is, stays visible: bound
        # back over the private /tmp, as an installed binary in /usr would be.
        keep_dirs = sorted({str(d) for d in (ROOT, BUILD, pathlib.Path(AIRLOCK).resolve().parent)
                            if str(d).startswith(("/tmp/", "/var/tmp/"))})
        lines += [f"exec {4 + i}<'{d}'" for i, d in enumerate(keep_dirs)]
        lines += ["mount -t tmpfs -o mode=1777 tmpfs /tmp", "mount -t tmpfs -o mode=1777 tmpfs /var/tmp"]
        for i, d in enumerate(keep_dirs):
            lines += [f"mkdir -p '{d}'", f"mount --no-canonicalize --bind /proc/self/fd/{4 + i} '{d}'",
                      f"exec {4 + i}<&-"]
    # StateDirectory= and ReadWritePaths=: a writable bind of the state directory.
    lines += [f"mkdir -p '{state_dir}'", f"mount --no-canonicalize --bind /proc/self/fd/3 '{state_dir}'", "exec 3<&-"]
    if keys.get("ProtectHome") == ["yes"]:
        lines += ["for d in /home /root /run/user; do [ -d $d ] && mount -t tmpfs -o ro,mode=000 tmpfs $d; done"]
    if keys.get("ProtectKernelModules") == ["yes"]:
        lines += ["for d in /usr/lib/modules /lib/modules; do [ -d $d ] && [ ! -L $d ] && mount -t tmpfs -o ro,mode=000 tmpfs $d || true; done"]
    if keys.get("ProtectSystem") == ["strict"]:
        # Everything read-only but /dev, /proc, /sys, the private /tmp and the state directory.
        keep = "^/(dev|proc|sys)(/|$)|^/tmp$|^/var/tmp$|^" + re.escape(state_dir) + "$"
        lines += ["awk '{ print $5 }' /proc/self/mountinfo | grep -vE '" + keep + "' |"
                  " while read -r m; do mount -o remount,bind,ro \"$m\" 2>/dev/null ||"
                  " mount -o remount,bind,ro,nosuid,nodev,noexec \"$m\" 2>/dev/null || true; done"]
    lines += [extra, f"umask {keys.get('UMask', ['0022'])[0]}", 'cd "$PWD"']
    nofile = keys.get("LimitNOFILE", ["1024"])[0]
    nnp = "--no-new-privs" if keys.get("NoNewPrivileges") == ["yes"] else ""
    # LimitNOFILE=, as far as this machine's own hard limit lets a test raise it.
    lines += [f"n={nofile}; h=$(ulimit -Hn); [ \"$h\" = unlimited ] || [ \"$h\" -ge $n ] || n=$h",
              f'exec prlimit --nofile=$n:$n -- setpriv {nnp} --inh-caps=-all '
              f'--bounding-set=-all,{caps} -- "$@"']
    return "\n".join(lines)


def emulated_binary(tmp, script):
    wrapper = tmp / "under-unit"
    wrapper.write_text("#!/bin/sh\nexec unshare --mount --propagation private -- sh -c '"
                       + script.replace("'", "'\\''") + f"' sh {AIRLOCK} \"$@\"\n")
    wrapper.chmod(0o755)
    return str(wrapper)


@needs_root
def test_daemon_works_under_the_units_hardening(tmp):
    """Sessions, python, bash and javascript cells, files, a timeout (signals to a session's
    uid), stop and resume (state written to the state directory) under the unit's read-only
    system, private /tmp, hidden homes, no_new_privs and capability bounding set."""
    for tool in ("unshare", "setpriv", "prlimit"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} is not installed (apt-get install util-linux)")
    keys = unit_service_keys(UNIT.read_text())
    workdir = tmp / "daemon"
    workdir.mkdir()
    d = start_daemon_or_fail(
            pytest, args=["--pool-size", "1"], workdir=workdir,
            binary=emulated_binary(tmp, emulation_script(keys, str(workdir / "state"))))
    try:
        nnp = pathlib.Path(f"/proc/{d.proc.pid}/status").read_text()
        assert re.search(r"^NoNewPrivs:\s+1$", nnp, re.M), "the emulation did not apply"
        sid = d.post("/v1/sessions", json={}).json()["id"]
        ex = lambda body: d.post(f"/v1/sessions/{sid}/execute", json=body, timeout=60).json()
        r = ex({"code": "x = 41\nopen('/work/f.txt', 'w').write('hi')\nx + 1"})
        assert (r["status"], r["result"]) == ("ok", "42"), r
        r = ex({"code": "cat /work/f.txt; echo; touch /usr/x 2>&1 | grep -c Read-only", "language": "bash"})
        assert r["status"] == "ok" and r["stdout"].split() == ["hi", "1"], r
        r = ex({"code": "console.log(6 * 7)", "language": "javascript"})
        assert r["status"] == "ok" and r["stdout"].strip() == "42", r
        assert d.put(f"/v1/sessions/{sid}/files/up.txt", data=b"up").status_code in (200, 201)
        assert d.get(f"/v1/sessions/{sid}/files/up.txt").content == b"up"
        r = ex({"code": "while True: pass", "timeout_s": 1})
        assert r["status"] == "timeout", r
        assert d.post(f"/v1/sessions/{sid}/stop", timeout=60).status_code == 200
        r = ex({"code": "x + 1"})
        assert (r["status"], r["result"], r.get("resumed")) == ("ok", "42", True), r
    finally:
        rc, problems = d.stop()
    assert rc == 0 and not problems, "\n".join(problems)


@needs_root
def test_protect_kernel_tunables_would_break_every_sandbox(tmp):
    """Why the unit leaves ProtectKernelTunables= off: with /proc/sys read-only (what it does)
    no sandbox starts. If this starts passing, the unit can turn it on."""
    keys = unit_service_keys(UNIT.read_text())
    state = tmp / "state"
    state.mkdir()
    script = emulation_script(keys, str(state), extra="mount --bind -o ro /proc/sys /proc/sys")
    p = run([emulated_binary(tmp, script), "run", "-p", "minimal", "-"], input="print(1)",
            cwd=state)
    assert p.returncode == 2 and "namespaces" in p.stderr, p.stdout + p.stderr
    p = run([emulated_binary(tmp, emulation_script(keys, str(state))), "run", "-p", "minimal", "-"],
            input="print(1)", cwd=state)
    assert p.returncode == 0 and p.stdout.strip() == "1", p.stdout + p.stderr


# ------------------------------------------------------------------------------------------
# sd_notify
# ------------------------------------------------------------------------------------------

@needs_root
def test_sd_notify_ready_and_stopping(tmp):
    path = str(tmp / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(30)
    d = Daemon(args=["--pool-size", "0"], env={**ENV, "NOTIFY_SOCKET": path})
    try:
        d.start(wait_zygote=None)
        msg = sock.recv(4096).decode()
        assert msg.split("\n")[0] == "READY=1", msg
        assert f"STATUS=listening on {d.url}" in msg
        assert d.get("/healthz").status_code == 200
    finally:
        rc, problems = d.stop()
        sock.settimeout(5)
        try:
            stopping = sock.recv(4096).decode()
        except OSError:
            stopping = ""
        sock.close()
    assert rc == 0 and not problems, "\n".join(problems)
    assert stopping.startswith("STOPPING=1"), stopping


def test_sd_notify_bad_socket_is_said_not_fatal(tmp):
    if os.geteuid() != 0:
        pytest.skip("the daemon's sandboxes need root")
    d = Daemon(args=["--pool-size", "0"], env={**ENV, "NOTIFY_SOCKET": "relative/path"})
    try:
        d.start(wait_zygote=None)
        assert "cannot tell the service manager" in d.log_text()
        assert d.get("/healthz").status_code == 200
    finally:
        rc, problems = d.stop()
    assert rc == 0 and not problems, "\n".join(problems)


# ------------------------------------------------------------------------------------------
# meson install
# ------------------------------------------------------------------------------------------

def config_value(name):
    m = re.search(rf'^#define {name} "([^"]*)"', (BUILD / "config.h").read_text(), re.M)
    assert m, f"{name} not in {BUILD}/config.h"
    return m.group(1)


def test_meson_install_puts_everything_where_airlock_looks(tmp):
    if not shutil.which("meson"):
        pytest.skip("meson is not installed")
    dest = tmp / "dest"
    p = run(["meson", "install", "-C", str(BUILD), "--destdir", str(dest), "--no-rebuild",
             "--quiet"])
    assert p.returncode == 0, p.stdout + p.stderr
    prefix = dest / str(pathlib.Path(config_value("AIRLOCK_PROFILES_DIR")).parents[2]).lstrip("/")
    files = {str(f.relative_to(prefix)) for f in prefix.rglob("*") if f.is_file()}
    for want in ("bin/airlock", "lib/systemd/system/airlock.service", "share/man/man1/airlock.1",
                 "share/bash-completion/completions/airlock", "share/doc/airlock/DEPLOY.md",
                 "share/doc/airlock/API.md"):
        assert want in files, f"{want} not installed; installed: {sorted(files)}"
    # Where the binary looks (config.h) is where meson put them.
    profiles = dest / config_value("AIRLOCK_PROFILES_DIR").lstrip("/")
    assert sorted(f.name for f in profiles.glob("*.json")) == sorted(
        f.name for f in (ROOT / "profiles").glob("*.json"))
    assert os.access(dest / config_value("AIRLOCK_LIBEXEC_DIR").lstrip("/") / "airlock-runner",
                     os.X_OK)
    assert (prefix / "lib/systemd/system/airlock.service").read_text() == UNIT.read_text()
    assert (prefix / "share/bash-completion/completions/airlock").read_text() == \
        COMPLETION.read_text()
    page = run(["man", "-l", str(prefix / "share/man/man1/airlock.1")],
               env={**ENV, "MANWIDTH": "100", "MAN_KEEP_FORMATTING": ""})
    assert page.returncode == 0 and "airlock - a self-hosted code interpreter" in page.stdout


# ------------------------------------------------------------------------------------------
# The man page
# ------------------------------------------------------------------------------------------

def help_flags(cmd):
    out = run([AIRLOCK, cmd, "--help"]).stdout
    return set(re.findall(r"(?:^|[ ,\[])(--[a-z][a-z0-9-]+)", out, re.M))


def commands():
    out = run([AIRLOCK, "--help"]).stdout
    return re.findall(r"^  ([a-z]+) ", out.split("commands:", 1)[1], re.M)


def test_man_page_renders_and_names_every_command_and_flag():
    if not shutil.which("man"):
        pytest.skip("man is not installed (apt-get install man-db)")
    built = BUILD / "packaging" / "airlock.1"
    page = built if built.exists() else ROOT / "packaging" / "airlock.1"
    p = run(["man", "--no-hyphenation", "--no-justification", "-l", str(page)],
            env={**ENV, "MANWIDTH": "100"})
    assert p.returncode == 0, p.stderr
    text = re.sub(r".\x08", "", p.stdout).replace("\u2010", "-")
    text = re.sub(r"-\n\s*", "-", text)
    assert text.startswith("AIRLOCK(1)")
    missing = []
    for cmd in commands():
        if not re.search(rf"^ {{7}}{cmd}\b", text, re.M):
            missing.append(cmd)
        missing += [f"{cmd} {f}" for f in sorted(help_flags(cmd) - {"--help"})
                    if not re.search(re.escape(f) + r"(?![a-z-])", text)]
    # The subcommands each command's usage lines name (`airlock sessions new ...`).
    for cmd in commands():
        usage = run([AIRLOCK, cmd, "--help"]).stdout.split("\n\n", 1)[0]
        for sub in sorted(set(re.findall(rf"airlock {cmd} \[?([a-z]+)", usage))):
            if not re.search(rf"(?<![a-z-]){sub}(?![a-z-])", text):
                missing.append(f"{cmd} {sub}")
    assert not missing, f"docs/airlock.1.md does not mention: {missing}"


def test_checked_in_man_page_matches_the_markdown(tmp):
    if not shutil.which("pandoc"):
        pytest.skip("pandoc is not installed (apt-get install pandoc): the checked-in "
                    "packaging/airlock.1 cannot be compared with docs/airlock.1.md")
    p = run(["pandoc", "--standalone", "--to", "man", str(ROOT / "docs/airlock.1.md"), "-o",
             str(tmp / "airlock.1")])
    assert p.returncode == 0, p.stderr
    assert (tmp / "airlock.1").read_text() == (ROOT / "packaging/airlock.1").read_text(), \
        "regenerate it: pandoc --standalone --to man docs/airlock.1.md -o packaging/airlock.1"


# ------------------------------------------------------------------------------------------
# bash completion
# ------------------------------------------------------------------------------------------

def complete(*words, env=None):
    """COMPREPLY of _airlock for the command line `airlock WORDS...` (the last word the one
    being completed), in a fresh bash that sourced the completion script."""
    script = ('source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); '
              'COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; _airlock; printf "%s\\n" "${COMPREPLY[@]}"')
    p = run(["bash", "--norc", "-c", script, "bash", str(COMPLETION), AIRLOCK, *words],
            env=env or ENV)
    assert p.returncode == 0, p.stderr
    return [w for w in p.stdout.split("\n") if w]


@pytest.mark.parametrize("words, expected", [
    (["ses"], ["sessions"]),
    (["s"], ["serve", "sessions"]),
    (["serve", "--print-sys"], ["--print-systemd-unit"]),
    (["serve", "--state-d"], ["--state-dir"]),
    (["sessions", "st"], ["stop"]),
    (["sessions", ""], ["fork", "list", "new", "resume", "rm", "stop"]),
    (["exec", "-l", ""], ["bash", "javascript", "python", "typescript"]),
    (["run", "--isolation", "n"], ["namespaces", "none"]),
    (["cp", "--rec"], ["--recursive"]),
    (["tenants", ""], ["add", "list", "revoke", "rotate", "set", "show"]),
    (["tenants", "--max-c"], ["--max-cpu"]),
    (["profile", ""], ["build", "list", "rm", "show"]),
    (["profile", "--state-d"], ["--state-dir"]),
    (["serve", "--metrics-l"], ["--metrics-listen"]),
    (["serve", "--audit-k"], ["--audit-keep"]),
    (["serve", "--audit-fail", ""], ["continue", "refuse"]),
    (["serve", "--audit-code", ""], ["off", "on"]),
    (["serve", "--audit-syslog", "auth"], ["auth", "authpriv"]),
    # An option's value is not taken for the subcommand.
    (["sessions", "--url", "http://127.0.0.1:9", ""], ["fork", "list", "new", "resume", "rm", "stop"]),
])
def test_bash_completion(words, expected):
    assert sorted(complete(*words)) == expected


def test_bash_completion_registers_for_airlock():
    p = run(["bash", "--norc", "-c", f"source {COMPLETION}; complete -p airlock"])
    assert p.stdout.strip() == "complete -F _airlock airlock", p.stdout + p.stderr


def test_bash_completion_offers_the_tenants_names(tmp):
    for name in ("team-a", "team-b"):
        p = run([AIRLOCK, "tenants", "add", name, "--state-dir", str(tmp)])
        assert p.returncode == 0, p.stderr
    sd = ["--state-dir", str(tmp)]
    assert sorted(complete("tenants", "rotate", *sd, "")) == ["team-a", "team-b"]
    assert complete("tenants", *sd, "show", "team-b") == ["team-b"]
    # One name per subcommand: nothing after it, and nothing for add's new name.
    assert complete("tenants", *sd, "show", "team-a", "") == []
    assert complete("tenants", *sd, "add", "") == []


def test_bash_completion_offers_profile_names(tmp):
    (tmp / "zeta-one.json").write_text("{}")
    (tmp / "zeta-two.json").write_text("{}")
    env = {**ENV, "AIRLOCK_PROFILES_DIR": str(tmp)}
    assert sorted(complete("profile", "build", "zeta-", env=env)) == ["zeta-one", "zeta-two"]
    assert complete("profile", "--state-dir", str(tmp), "show", "zeta-t", env=env) == ["zeta-two"]
    assert complete("profile", "rm", "zeta-one", "", env=env) == []


@needs_root
def test_bash_completion_offers_the_daemons_session_ids():
    d = Daemon(args=["--pool-size", "0"], token_env="packaging-test-token-0123456789")
    try:
        d.start(wait_zygote=None)
        sid = d.post("/v1/sessions", json={}).json()["id"]
        env = {**ENV, "AIRLOCK_TOKEN": d.token}
        assert complete("sessions", "stop", "--url", d.url, "", env=env) == [sid]
        assert complete("exec", "--url", d.url, "-s", sid[:4], env=env) == [sid]
        assert complete("cp", "--url", d.url, "s-", env=env) == [sid + ":"]
    finally:
        rc, problems = d.stop()
    assert rc == 0 and not problems, "\n".join(problems)


# ------------------------------------------------------------------------------------------
# Containerfile
# ------------------------------------------------------------------------------------------

INSTRUCTIONS = {"FROM", "RUN", "COPY", "ADD", "ENV", "ARG", "WORKDIR", "VOLUME", "EXPOSE",
                "ENTRYPOINT", "CMD", "USER", "LABEL", "STOPSIGNAL", "HEALTHCHECK", "SHELL"}


def containerfile_instructions():
    text = re.sub(r"\\\n", " ", "\n".join(l for l in CONTAINERFILE.read_text().splitlines()
                                          if not l.lstrip().startswith("#")))
    out = []
    for line in text.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            out.append((word, rest.strip()))
    return out


def test_containerfile_parses_and_matches_the_build():
    """No network to build an image here: this checks what a build would trip over."""
    ins = containerfile_instructions()
    assert all(w in INSTRUCTIONS for w, _ in ins), [w for w, _ in ins if w not in INSTRUCTIONS]
    froms = [r for w, r in ins if w == "FROM"]
    assert froms and all(re.match(r"docker\.io/library/debian:12\b", f) for f in froms), froms
    stages = {f.split()[-1] for f in froms if " AS " in f}
    for w, r in ins:
        m = re.search(r"--from=(\S+)", r)
        assert w != "COPY" or not m or m.group(1) in stages, r
        if w in ("ENTRYPOINT", "CMD"):
            assert isinstance(json.loads(r), list), f"{w} is not an exec-form JSON array: {r}"
    entry = json.loads(dict(ins)["ENTRYPOINT"])
    assert entry[:2] == ["/usr/bin/airlock", "serve"] and "--prefix=/usr" in CONTAINERFILE.read_text()
    # Every build dependency of scripts/deps.sh is installed in the build stage.
    deps = (ROOT / "scripts" / "deps.sh").read_text()
    build_deps = re.search(r"# build\n(.*?)\n\s*#", deps, re.S).group(1).split()
    build_run = next(r for w, r in ins if w == "RUN" and "meson" in r and "apt-get" in r)
    assert not [p for p in build_deps if p not in build_run.split()], build_deps
    # The packages exist in Debian (from the local apt lists, when there are any).
    pkgs = [w for w, r in ins if w == "RUN"]
    names = set()
    for w, r in ins:
        if w == "RUN" and "apt-get install" in r:
            seg = r.split("apt-get install", 1)[1].split("&&")[0]
            names |= {p for p in seg.split() if not p.startswith("-")}
    if shutil.which("apt-cache") and run(["apt-cache", "show", "bash"]).returncode == 0:
        unknown = [n for n in sorted(names) if run(["apt-cache", "show", n]).returncode != 0]
        assert not unknown, f"not Debian packages: {unknown}"
    assert pkgs
