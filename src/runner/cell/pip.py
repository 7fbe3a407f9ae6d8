"""%pip and the site directories (docs/NETWORK.md, "Inside the sandbox")."""

import builtins
import os
import sys

from .context import PipError, _flush_streams, _source_lines


_LAYER_SITE = "/opt/airlock/layer/site-packages"
_sites_seen = {}  # site directory -> its st_mtime_ns when last looked at, None while missing
_pth_seen = set()  # (directory, name) of the .pth files processed


def _user_site():
    """The session's pip site directory (pip --user with $PYTHONUSERBASE), or None."""
    base = os.environ.get("PYTHONUSERBASE")
    if not base:
        return None
    return f"{base}/lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages"


def _site_rank(path, user_site):
    """Where a directory goes on sys.path: the session's installs win over the layer's, which
    win over the image's (Debian's dist-packages); anything else keeps its place."""
    if path == user_site:
        return 0
    if path == _LAYER_SITE:
        return 1
    if path.startswith("/usr/") and path.endswith(("-packages", "-packages/")):
        return 2
    return -1


def _add_site(path, user_site):
    """Puts path on sys.path before the directories it ranks above, and processes its .pth
    files that were not processed yet (so a package installed later that brings one works)."""
    import site

    rank = _site_rank(path, user_site)
    if path not in sys.path:
        at = len(sys.path)
        for i, entry in enumerate(sys.path):
            if _site_rank(entry, user_site) > rank:
                at = i
                break
        sys.path.insert(at, path)
    try:
        names = sorted(n for n in os.listdir(path) if n.endswith(".pth"))
    except OSError:
        return
    known = set(sys.path)
    for name in names:
        if (path, name) not in _pth_seen:
            _pth_seen.add((path, name))
            site.addpackage(path, name, known)


def _refresh_sites():
    """Before each cell (and a restore): one stat of the session's site directory. A directory
    that appeared goes on sys.path; one that changed (pip installed or removed something, from
    %pip, a bash cell or a subprocess) makes the import system look again. The layer's is
    looked at once: it is read-only, mounted before the interpreter started, and never
    changes under a running session (a new layer goes to new sessions)."""
    changed = False
    user_site = _user_site()
    for path in (user_site, _LAYER_SITE):
        if path is None or (path == _LAYER_SITE and path in _sites_seen):
            continue
        try:
            mark = os.stat(path).st_mtime_ns
        except OSError:
            mark = None
        if _sites_seen.get(path, None) == mark and path in _sites_seen:
            continue
        _sites_seen[path] = mark
        if mark is not None:
            _add_site(path, user_site)
            changed = True
    if changed:
        import importlib

        importlib.invalidate_caches()


def _pip_lines(code):
    """code with each line "%pip ARGS" (indentation kept) turned into a call of _airlock_pip
    with ARGS, so that it runs in its place among the cell's statements. Lines inside a string
    that spans lines are left alone. Returns code itself when it has no such line."""
    if "%pip" not in code:
        return code
    import io
    import re
    import tokenize

    inside = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
                inside.update(range(tok.start[0] + 1, tok.end[0] + 1))
    except (tokenize.TokenError, SyntaxError, ValueError):
        pass  # the compiler will say what is wrong with the cell
    magic = re.compile(r"([ \t]*)%pip(?:[ \t]+(.*?))?[ \t]*")
    out = []
    found = False
    for number, line in enumerate(code.splitlines(keepends=True), 1):
        body = line.rstrip("\r\n")
        m = magic.fullmatch(body)
        if m is None or number in inside:
            out.append(line)
            continue
        found = True
        out.append(f"{m.group(1)}_airlock_pip({(m.group(2) or '')!r}){line[len(body):]}")
    if not found:
        return code
    builtins._airlock_pip = _pip_magic
    return "".join(out)


def _as_written(e, code, source):
    """e, a compile error of source (code with its %pip lines rewritten), showing a rewritten
    line as the cell has it."""
    if source is code or not isinstance(e, SyntaxError) or not e.lineno:
        return e
    written, compiled = _source_lines(code), _source_lines(source)
    if e.lineno <= min(len(written), len(compiled)) and \
            written[e.lineno - 1] != compiled[e.lineno - 1]:
        e.text = written[e.lineno - 1]
        e.offset = e.end_offset = None  # columns of the rewritten line mean nothing here
    return e


def _pip_magic(args):
    """What a "%pip ARGS" line runs: pip (the sandbox's shim, /opt/airlock/bin/pip) with the
    session's environment, its output going straight to the cell's stdout and stderr. Then
    what it installed is importable at once. Raises PipError when pip failed."""
    import shlex
    import subprocess

    argv = shlex.split(args)
    _flush_streams()
    try:
        status = subprocess.call(["pip", *argv])
    except FileNotFoundError:
        status = subprocess.call([sys.executable or "python3", "-m", "pip", *argv])
    _refresh_sites()
    if status != 0:
        why = os.environ.get("AIRLOCK_PIP_NO_INDEX")
        command = next((a for a in argv if not a.startswith("-")), "")
        message = f"pip {command} failed (exit status {status})".replace("  ", " ")
        if why and command in ("install", "download", "wheel", "index"):
            message += f": {why}"
        raise PipError(message)
