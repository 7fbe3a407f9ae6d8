"""Cell execution for the airlock runner, with notebook semantics.

The runner (runner.c) embeds CPython and carries this module inside its own binary as a string
(embed.py), so user code cannot swap it on disk. The C side calls these functions:

    configure(profile, imports, policy)  once, in the zygote, before any user code
    preload(modules)                     in the zygote: import the profile's modules
    reseed()                             in every fresh session right after the fork
    warmup_begin(), warmup_end()         in a warm pool member, around the cells it runs
                                         before it is handed over
    run_cell(code, stdin=, env=, cwd=) -> dict
                                         once per execute request (the keywords only when the
                                         request gives them: this call's stdin, environment
                                         and working directory, undone after the cell)
    snapshot(fd, bash_state) -> dict     on stop, checkpoint and fork: write the variables of
                                         __main__ as one pickle to fd (a pipe to the daemon)
    restore(fd, offset, size, modules, lost_names, count, reseed) -> dict
                                         in the new sandbox of a resume or fork: load them back

A line "%pip ARGS" in a cell (IPython's magic, also indented) runs pip with the session's
environment, its output streamed like the cell's, and what it installed is importable on the
cell's next line: pip installs into the session's own site directory ($PYTHONUSERBASE, in /work,
set by the daemon), which is put on sys.path as soon as it appears, whoever ran pip (a bash cell,
a subprocess), and left out of the cell's files; the profile's layer (/opt/airlock/layer) is put
on sys.path the same way (docs/NETWORK.md, "Inside the sandbox").

run_cell() runs the code in the namespace of the ``__main__`` module (so pickling user classes
works), keeps it between calls, evaluates a trailing expression like a notebook does, and returns
the result, the error, rich outputs (HTML, PNG plots...) and the files the cell changed under the
working directory. stdout and stderr are not captured here: they are the fds 1 and 2 that the
daemon reads, and they are flushed at the end of every cell.

Profile policy -- NOT the security boundary. The import allow-list and the "restricted" static
checks exist so that a profile like the seed's "minimal" refuses what it does not offer with a
clear message. Python cannot be sandboxed from inside itself: a determined user can get around
any of these checks (a chain of attributes built at run time, a C extension, a library that
hands out a module object). The security boundary is the kernel sandbox around the whole runner
process (namespaces, Landlock, seccomp, cgroups, a unique uid; see docs/ and DESIGN.md section
3), which holds whatever happens in this file.

Importing this module must stay cheap (it is imported in every zygote): only modules that the
interpreter has already loaded at start-up are imported at module level; ast, linecache and
traceback come in with configure() or the first cell, numpy and matplotlib are only ever used
when user code or preload() has already imported them; pickle and marshal come in with the
first snapshot() or restore().
"""

import builtins
import os
import sys

# The filename this module's code carries (whatever runner.c compiled it as): frames with it are
# stripped from user-visible tracebacks.
_SELF = (lambda: None).__code__.co_filename

# Code compiled from a cell carries this filename prefix; it is how the import guard and the
# traceback filter recognise user code.
_CELL_PREFIX = "<cell "

_profile = "default"
# Importable whatever the profile's allow-list: airlock_tools is airlock's own (Code Mode), and
# what it may call is decided by the daemon, not by the import.
_ALWAYS_ALLOWED = frozenset({"__future__", "airlock_tools"})
_allowed = None  # frozenset of top-level module names, or None for "anything"
_allowed_text = ""
_restricted = False
_orig_import = builtins.__import__
_count = 0
_cell_outputs = None  # the outputs list of the running cell, None between cells
_cell_figures = None  # ids of matplotlib figures already rendered by the running cell

# Cell sources stay in linecache so that tracebacks (also of functions defined in an older cell)
# show the user's lines; past this many bytes the oldest cells' sources are dropped.
_LINECACHE_MAX_BYTES = 16 << 20
_cell_sources = []  # filenames registered in linecache, oldest first
_cell_sources_bytes = 0

# Walk bounds for the files manifest, applied silently (no "truncated" entry): past the entry
# bound the walk stops and covers only what it visited (_files_changed keeps the diff honest about
# that); directories deeper than the depth bound are not entered, by either walk.
_WALK_MAX_ENTRIES = 10000
_WALK_MAX_DEPTH = 32


class PolicyError(Exception):
    """Raised (reported) when code is refused by the profile's restricted policy."""


class PipError(Exception):
    """Raised by a "%pip" line whose pip failed: the cell stops there."""


class _Refused(Exception):
    """A static refusal found before anything of the cell ran."""

    def __init__(self, name, message, line):
        super().__init__(message)
        self.name = name
        self.message = message
        self.line = line


# --- restricted policy ------------------------------------------------------------------------

# Dunders that user code may still name under the restricted policy. All are plain strings except
# __init__, which is allowed so that ordinary classes can call super().__init__(...): an __init__
# function or slot wrapper leads nowhere new, because everything that could be reached from it
# (__globals__, __code__, __closure__, __self__, __func__, __objclass__...) is itself refused.
_DUNDER_ATTRS_OK = frozenset({"__name__", "__qualname__", "__module__", "__doc__", "__version__",
                              "__init__"})
_DUNDER_NAMES_OK = frozenset({"__name__", "__doc__", "__debug__"})

# Builtins that evaluate strings, look attributes up by name, reach namespaces, or start a
# debugger or a pager. getattr() is here so that a string attribute name cannot dodge the static
# walk. open() and input() are not: what a file or standard input can reach is decided by the
# kernel (Landlock and the mount plan: docs/SECURITY.md, "Files the code can open"), not here.
_REFUSED_NAMES = frozenset({
    "eval", "exec", "compile", "__import__", "globals", "locals", "vars", "getattr",
    "setattr", "delattr", "breakpoint", "memoryview", "help", "exit", "quit",
})

# Attributes refused whatever object they are read from: frame, traceback, generator and code
# introspection (the classic way from a function back to a module's globals), mro(), the
# attribute-by-name helpers of the stdlib (operator.attrgetter/methodcaller,
# string.Formatter.get_field) and module objects that public attributes of allowed modules hand
# out (typing.sys, re.enum.bltns, ...). "open" is not among them: io.open and Path.open are the
# builtin open(), which the kernel confines.
_REFUSED_ATTRS = frozenset({
    "f_globals", "f_locals", "f_builtins", "f_back", "f_code", "f_trace", "tb_frame", "tb_next",
    "gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "cr_await", "cr_origin",
    "ag_frame", "ag_code", "ag_await", "co_code", "func_globals", "mro",
    "attrgetter", "methodcaller", "get_field",
    "sys", "os", "posix", "builtins", "bltns", "modules", "subprocess", "importlib", "ctypes",
    "gc", "inspect",
    "eval", "exec", "getattr", "setattr", "delattr", "globals", "locals", "vars",
    "breakpoint",
})


def _is_dunder(name):
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _attr_refused(attr):
    if _is_dunder(attr):
        return attr not in _DUNDER_ATTRS_OK
    return attr.startswith("_") or attr in _REFUSED_ATTRS


def _name_refused(name):
    if _is_dunder(name):
        return name not in _DUNDER_NAMES_OK
    return name in _REFUSED_NAMES


def _format_field_offender(text):
    """The first refused attribute that a str.format() field in text would read, or None:
    "{0.__class__}".format(x) is attribute access written as a string."""
    import _string

    todo = [text]
    while todo:
        s = todo.pop()
        try:
            for _lit, field, spec, _conv in _string.formatter_parser(s):
                if field:
                    _first, rest = _string.formatter_field_name_split(field)
                    for is_attr, key in rest:
                        if is_attr and _attr_refused(key):
                            return key
                if spec and "{" in spec:
                    todo.append(spec)
        except (ValueError, TypeError):
            continue
    return None


def _policy_check(ast, tree):
    """Raise _Refused for the first (in source order) construct the restricted policy refuses."""
    found = []
    for node in ast.walk(tree):
        kind = type(node)
        if kind is ast.Attribute:
            if _attr_refused(node.attr):
                # An attribute node spans "value.attr": the name itself ends the node.
                line = node.end_lineno
                found.append((line, node.end_col_offset - len(node.attr), node.attr))
        elif kind is ast.Name:
            if _name_refused(node.id):
                found.append((node.lineno, node.col_offset, node.id))
        elif kind is ast.Import or kind is ast.ImportFrom:
            modname = (node.module or "") if kind is ast.ImportFrom else ""
            parts = [p for p in modname.split(".") if p]
            for alias in node.names:
                if kind is ast.Import:
                    parts = alias.name.split(".")
                else:
                    # "from random import _os" reads an attribute of the module.
                    if alias.name != "*" and (_attr_refused(alias.name)
                                              or alias.name in _REFUSED_NAMES):
                        found.append((node.lineno, node.col_offset, alias.name))
                for p in parts:
                    if p != "__future__" and (p.startswith("_") or p in _REFUSED_ATTRS):
                        found.append((node.lineno, node.col_offset, p))
                        break
                if alias.asname and _name_refused(alias.asname):
                    found.append((node.lineno, node.col_offset, alias.asname))
        elif kind is ast.MatchClass:
            # "case str(__class__=c)" reads the attribute by name.
            for attr in node.kwd_attrs:
                if _attr_refused(attr):
                    found.append((node.lineno, node.col_offset, attr))
        elif kind is ast.Constant:
            v = node.value
            if type(v) is str and "{" in v and "." in v:
                bad = _format_field_offender(v)
                if bad is not None:
                    found.append((node.lineno, node.col_offset, bad))
    if found:
        line, _col, name = min(found)
        raise _Refused("PolicyError",
                       f"'{name}' is not allowed by profile '{_profile}' (line {line})", line)


# --- import allow-list ------------------------------------------------------------------------

def _import_refusal(top):
    return f"import of '{top}' is not allowed by profile '{_profile}'; allowed modules: " \
           f"{_allowed_text}"


def _import_check(ast, tree):
    """Raise _Refused for the first import statement (anywhere in the cell) that the allow-list
    refuses. Relative imports are refused: a cell is not part of a package."""
    found = []
    for node in ast.walk(tree):
        kind = type(node)
        if kind is ast.Import:
            for alias in node.names:
                top = alias.name.partition(".")[0]
                if top not in _allowed and top not in _ALWAYS_ALLOWED:
                    found.append((node.lineno, node.col_offset, top))
                    break
        elif kind is ast.ImportFrom:
            if node.level:
                found.append((node.lineno, node.col_offset, "." * node.level + (node.module or "")))
                continue
            top = (node.module or "").partition(".")[0]
            if top not in _allowed and top not in _ALWAYS_ALLOWED:
                found.append((node.lineno, node.col_offset, top))
    if found:
        line, _col, top = min(found)
        raise _Refused("ImportError", _import_refusal(top), line)


def _guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
    """builtins.__import__ while an allow-list is set: refuse what user code imports outside it,
    leave imports made by library code (pandas importing os) alone.

    The caller is user code when its frame was compiled from a cell, or runs in the __main__
    namespace (exec("import os") from a cell). CPython's C-level PyImport_Import() (datetime's
    strftime importing time, strptime importing _strptime) calls __import__ with the current
    Python frame -- the user's -- and an empty *list* as fromlist, whereas import statements pass
    None or a tuple and a plain __import__('os') passes (): such implicit imports (globals passed
    twice, an empty list) are let through. Code that mimics that call gets past the guard: this is
    a policy, not the boundary (see the module docstring).
    """
    if _allowed is not None and not (type(fromlist) is list and not fromlist
                                     and globals is not None and globals is locals):
        caller = sys._getframe(1)
        main = sys.modules.get("__main__")
        if (caller.f_code.co_filename.startswith(_CELL_PREFIX)
                or (main is not None and caller.f_globals is getattr(main, "__dict__", None))):
            if level:
                raise ImportError(_import_refusal("." * level + name), name=name)
            top = name.partition(".")[0]
            if top not in _allowed and top not in _ALWAYS_ALLOWED:
                raise ImportError(_import_refusal(top), name=name)
    return _orig_import(name, globals, locals, fromlist, level)


# --- public API -------------------------------------------------------------------------------

def configure(profile, imports, policy):
    """Set the profile name (used in messages), the top-level module allow-list (None: any) and
    the policy ("none" or "restricted"). Installs or removes the __import__ guard and loads the
    modules run_cell() needs, so that a forked session does not pay for them."""
    global _profile, _allowed, _allowed_text, _restricted, _orig_import
    if isinstance(imports, str) and not isinstance(policy, str):
        # Called as configure(profile, policy, imports): the two are unambiguous by type.
        imports, policy = policy, imports
    if policy not in ("none", "restricted"):
        raise ValueError(f"unknown policy {policy!r} (expected 'none' or 'restricted')")
    _profile = str(profile)
    _restricted = policy == "restricted"
    if imports is None:
        _allowed = None
        _allowed_text = ""
    else:
        _allowed = frozenset(str(m) for m in imports)
        _allowed_text = ", ".join(sorted(_allowed)) or "(none)"

    # Install the guard once: unwrap a guard installed earlier (by this or another instance of
    # this module) so guards never stack.
    current = builtins.__import__
    _orig_import = getattr(current, "_airlock_original", current)
    if _allowed is None:
        builtins.__import__ = _orig_import
    else:
        _guarded_import._airlock_original = _orig_import
        builtins.__import__ = _guarded_import

    # Warm-up: what run_cell() needs is loaded here, in the zygote, not again in each session.
    import ast  # noqa: F401
    import linecache  # noqa: F401
    import traceback  # noqa: F401
    import warnings

    # plt.show() on the Agg backend is replaced (see _patch_pyplot); these cover fig.show() and
    # a show() reached before the patch.
    warnings.filterwarnings("ignore", message=".*non-GUI backend.*")
    warnings.filterwarnings("ignore", message=".*is non-interactive, and thus cannot be shown.*")
    _patch_pyplot()
    _install_pyplot_hook()
    _install_tools_module()
    # The layer's packages are importable before preload() imports them.
    _refresh_sites()


def preload(modules):
    """Import each module (trusted: no allow-list check). Returns ["name: message", ...] for the
    ones that failed, an empty list when all imported."""
    import importlib

    errors = []
    for name in modules:
        try:
            importlib.import_module(name)
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # a module may raise anything, SystemExit included
            errors.append(f"{name}: {e}" if str(e) else f"{name}: {type(e).__name__}")
    _patch_pyplot()
    return errors


def reseed():
    """Give this (freshly forked) session its own random sequences: sessions forked from one
    zygote would otherwise share the state of random and numpy's legacy global RandomState.
    (numpy's default_rng() and secrets/uuid read the OS entropy themselves; the str hash seed is
    fixed at interpreter start and cannot be changed here.)"""
    # A module that is not loaded yet seeds itself from os.urandom when the session imports it.
    rnd = sys.modules.get("random")
    if rnd is not None:
        rnd.seed(os.urandom(32))
    nprandom = sys.modules.get("numpy.random")
    if nprandom is not None:
        raw = os.urandom(32)
        nprandom.seed([int.from_bytes(raw[i:i + 4], "little") for i in range(0, 32, 4)])


def _call_enter(saved, stdin, env, cwd):
    """Applies an execute request's stdin, env and cwd for this cell, noting in saved what
    _call_leave() must undo (also when a step fails half-way). stdin is a memfd on fd 0, so
    input(), sys.stdin and subprocesses all read it, then EOF; nothing the cell does not read
    can block anyone."""
    if env:
        saved["env"] = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
    if cwd is not None:
        saved["cwd"] = _cwd()
        os.chdir(cwd)
    if stdin is not None:
        data = stdin.encode("utf-8", "surrogateescape")
        fd = os.memfd_create("airlock-stdin", os.MFD_CLOEXEC)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.lseek(fd, 0, os.SEEK_SET)
            saved["fd0"] = os.dup(0)
            os.dup2(fd, 0)
        finally:
            os.close(fd)
        saved["stdin"] = sys.stdin
        sys.stdin = open(0, "r", encoding="utf-8", errors="surrogateescape", closefd=False)


def _call_leave(saved):
    """Undoes _call_enter(): the session's stdin (EOF), environment and directory are back."""
    if "stdin" in saved:
        sys.stdin = saved.pop("stdin")
    if "fd0" in saved:
        fd0 = saved.pop("fd0")
        try:
            os.dup2(fd0, 0)
        finally:
            os.close(fd0)
    if "cwd" in saved:
        cwd = saved.pop("cwd")
        if cwd is not None:
            try:
                os.chdir(cwd)
            except OSError:
                pass
    if "env" in saved:
        for k, v in saved.pop("env").items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_cell(code, stdin=None, env=None, cwd=None):
    """Run one cell. Returns {"status", "result", "error", "exit_code", "outputs",
    "execution_count", "files"} (see the module docstring and DESIGN.md section 4). stdin, env
    and cwd apply to this cell only; the files manifest stays that of the session's own
    directory."""
    global _count, _cell_outputs, _cell_figures
    _count += 1
    n = _count
    outputs = []
    reply = {"status": "ok", "result": None, "error": None, "exit_code": 0, "outputs": outputs,
             "execution_count": n, "files": []}
    interrupted = False
    root = before = None
    try:
        _refresh_sites()
        ns = _user_namespace()
        root = _cwd()
        before = _snapshot(root)
        _patch_pyplot()
        _cell_outputs = outputs
        _cell_figures = set()
    except KeyboardInterrupt:
        interrupted = True

    saved = {}
    if not interrupted:
        try:
            if stdin is not None or env or cwd is not None:
                _call_enter(saved, stdin, env, cwd)
            has_value, value = _execute(code, n, ns)
            if has_value and value is not None:
                ns["_"] = value
                reply["result"] = repr(value)
                rich = _rich_data(value)
                if rich:
                    data = {"text/plain": reply["result"]}
                    data.update(rich)
                    outputs.append({"data": data, "main": True})
        except _Refused as r:
            reply["error"] = {"name": r.name, "value": r.message,
                              "traceback": _static_traceback(n, r)}
        except SystemExit as e:
            _system_exit(e, reply)
        except KeyboardInterrupt as e:
            reply["error"] = _error_of(e)
            reply["exit_code"] = 130  # what a shell reports for a process ended by SIGINT
        except BaseException as e:
            reply["error"] = _error_of(e)

    # Bookkeeping after the cell. A SIGINT that lands here (the daemon's timeout racing the end of
    # the cell) must not lose the reply: each step is guarded and the cell reported interrupted.
    while saved:
        try:
            _call_leave(saved)
        except KeyboardInterrupt:
            interrupted = True
        except Exception:
            pass  # each step leaves saved before it runs: the loop ends
    try:
        _flush_figures(outputs)
        _patch_pyplot()
    except KeyboardInterrupt:
        interrupted = True
    except Exception:
        pass
    _cell_outputs = None
    _cell_figures = None
    try:
        if root is not None and before is not None:
            reply["files"] = _files_changed(before, _snapshot(root))
    except KeyboardInterrupt:
        interrupted = True
    _flush_streams()

    _sanitize(reply)
    if interrupted and reply["error"] is None:
        reply["error"] = {"name": "KeyboardInterrupt", "value": "",
                          "traceback": "Traceback (most recent call last):\nKeyboardInterrupt\n"}
        reply["exit_code"] = 130
    if reply["error"] is not None:
        reply["status"] = "error"
        reply["result"] = None
        if reply["exit_code"] == 0 and reply["error"]["name"] != "SystemExit":
            reply["exit_code"] = 1
    return reply


# --- execution --------------------------------------------------------------------------------

def _user_namespace():
    main = sys.modules.get("__main__")
    if main is None:
        main = type(sys)("__main__")
        sys.modules["__main__"] = main
    ns = main.__dict__
    if "__builtins__" not in ns:
        ns["__builtins__"] = builtins
    current = ns.get("display")
    try:
        ours = current is None or getattr(current, "_airlock_display", False) is True
    except Exception:  # a user object whose __getattr__ raises: it is theirs
        ours = False
    if ours:
        ns["display"] = display
    return ns


def _execute(code, n, ns):
    """Parse, check and run one cell. Returns (has_value, value). Raises _Refused for a refused
    or unparsable cell (nothing ran), otherwise whatever the user code raised."""
    import ast
    import linecache

    filename = f"{_CELL_PREFIX}{n}>"
    lines = _source_lines(code)
    _remember_source(linecache, filename, code, lines)
    # Tracebacks show the cell as written; the compiler gets its %pip lines as calls.
    source = _pip_lines(code)
    if source is not code:
        lines = _source_lines(source)
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    try:
        tree = ast.parse(source, filename, "exec")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as e:
        raise _compile_refusal(_as_written(e, code, source)) from None
    if _allowed is not None:
        _import_check(ast, tree)
    if _restricted:
        _policy_check(ast, tree)

    body = tree.body
    last = None
    if body and type(body[-1]) is ast.Expr and not _semicolon_after(lines, body[-1]):
        last = body.pop()
    co_coroutine = 0x80  # inspect.CO_COROUTINE, without importing inspect
    try:
        head = compile(tree, filename, "exec", flags, dont_inherit=True) if body else None
        tail = None
        if last is not None:
            tail = compile(ast.Expression(last.value), filename, "eval", flags, dont_inherit=True)
        is_async = any(c is not None and c.co_flags & co_coroutine for c in (head, tail))
        if is_async:
            code_async = _compile_async(ast, tree, last, filename)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as e:
        raise _compile_refusal(_as_written(e, code, source)) from None

    if is_async:
        return _run_async(code_async, last is not None, ns)
    if head is not None:
        exec(head, ns)
    if tail is None:
        return False, None
    return True, eval(tail, ns)


# --- pip and site directories (docs/NETWORK.md, "Inside the sandbox") -------------------------

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
    """Before each cell (and a restore): one stat per site directory. A directory that
    appeared goes on sys.path; one that changed (pip installed or removed something, from
    %pip, a bash cell or a subprocess) makes the import system look again."""
    changed = False
    user_site = _user_site()
    for path in (user_site, _LAYER_SITE):
        if path is None:
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


def _remember_source(linecache, filename, code, lines):
    global _cell_sources_bytes
    # mtime None: linecache.checkcache() keeps entries that have no file behind them.
    linecache.cache[filename] = (len(code), None, lines, filename)
    _cell_sources.append((filename, len(code)))
    _cell_sources_bytes += len(code)
    while _cell_sources_bytes > _LINECACHE_MAX_BYTES and len(_cell_sources) > 1:
        old, size = _cell_sources.pop(0)
        _cell_sources_bytes -= size
        linecache.cache.pop(old, None)


_HIDDEN_VALUE = "_airlock_last_value"


def _compile_async(ast, tree, last, filename):
    """A cell with top-level await runs as one coroutine, like in Jupyter, so that the whole cell
    shares one event loop: its trailing expression is assigned to a hidden name instead."""
    if last is not None:
        assign = ast.Assign(targets=[ast.Name(_HIDDEN_VALUE, ast.Store())], value=last.value)
        ast.copy_location(assign, last)
        tree.body.append(assign)
        ast.fix_missing_locations(tree)
    return compile(tree, filename, "exec", ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)


def _run_async(code, has_value, ns):
    import asyncio

    coro = eval(code, ns)
    if coro is not None:
        asyncio.run(coro)
    if not has_value:
        return False, None
    return True, ns.pop(_HIDDEN_VALUE, None)


def _source_lines(code):
    """The cell's lines as the compiler numbers them (\\n, \\r\\n and \\r end a line), each with
    its newline, for linecache."""
    text = code.replace("\r\n", "\n").replace("\r", "\n")
    lines = [line + "\n" for line in text.split("\n")]
    if text.endswith("\n"):
        lines.pop()
    return lines


def _semicolon_after(lines, node):
    """True when the trailing expression is followed by ';' (notebook idiom: no output)."""
    if node.end_lineno is None or node.end_lineno > len(lines):
        return False
    # Column offsets count UTF-8 bytes.
    rest = lines[node.end_lineno - 1].encode("utf-8", "surrogatepass")[node.end_col_offset:]
    return rest.lstrip().startswith(b";")


def _compile_refusal(e):
    import traceback

    text = "".join(traceback.format_exception_only(type(e), e))
    r = _Refused(type(e).__name__, str(e), getattr(e, "lineno", None))
    r.traceback = text
    return r


def _static_traceback(n, r):
    text = getattr(r, "traceback", None)
    if text is not None:
        return text
    import linecache

    filename = f"{_CELL_PREFIX}{n}>"
    out = "Traceback (most recent call last):\n"
    if r.line:
        out += f'  File "{filename}", line {r.line}\n'
        src = linecache.getline(filename, r.line).strip()
        if src:
            out += f"    {src}\n"
    return out + f"{r.name}: {r.message}\n"


def _system_exit(e, reply):
    code = e.code
    if code is None:
        return
    if isinstance(code, int):
        status = code & 0xFF
        if status == 0:
            return
        reply["exit_code"] = status
        reply["error"] = {"name": "SystemExit", "value": str(code), "traceback": ""}
        return
    # Like the interpreter: a non-int code is printed to stderr and the exit status is 1.
    try:
        sys.stderr.write(f"{code}\n")
    except Exception:
        pass
    reply["exit_code"] = 1
    reply["error"] = {"name": "SystemExit", "value": str(code), "traceback": ""}


def _error_of(e):
    try:
        value = str(e)
    except Exception:
        value = f"<unprintable {type(e).__name__} object>"
    try:
        tb = _format_traceback(e)
    except Exception:
        tb = f"Traceback (most recent call last):\n{type(e).__name__}: {value}\n"
    return {"name": type(e).__name__, "value": value, "traceback": tb}


def _filter_stack(stack):
    """Keep the user's frames and the library frames they called: drop the runner frames above
    the first cell frame (run_cell, asyncio's loop for await cells) and any runner frame below
    it (the import guard, display())."""
    frames = list(stack)
    for i, fs in enumerate(frames):
        if fs.filename.startswith(_CELL_PREFIX):
            frames = frames[i:]
            break
    return [fs for fs in frames if fs.filename != _SELF]


def _format_traceback(e):
    import traceback

    te = traceback.TracebackException(type(e), e, e.__traceback__, compact=True)
    seen = set()
    todo = [te]
    while todo:
        t = todo.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        t.stack = traceback.StackSummary.from_list(_filter_stack(t.stack))
        for nxt in (t.__cause__, t.__context__):
            if nxt is not None:
                todo.append(nxt)
        todo.extend(getattr(t, "exceptions", None) or ())
    text = "".join(te.format())
    # No frame left (an interrupt that landed in the runner's own code): still a traceback.
    # An exception group's own header ("+ Exception Group Traceback ...") is left alone.
    header = "Traceback (most recent call last):\n"
    if header not in text.partition("\n")[0] + "\n":
        text = header + text
    return text


def _flush_streams():
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            pass


def _clean(text):
    """text as something that encodes to UTF-8: lone surrogates (str(e) of an exception built
    from undecodable bytes) would make the C side's conversion fail."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _sanitize(reply):
    if reply["result"] is not None:
        reply["result"] = _clean(reply["result"])
    error = reply["error"]
    if error is not None:
        for key in ("name", "value", "traceback"):
            error[key] = _clean(error[key])
    for out in reply["outputs"]:
        data = out["data"]
        for mime in list(data):
            data[mime] = _clean(data[mime])


def _cwd():
    try:
        return os.getcwd()
    except OSError:
        return None


# --- rich outputs -----------------------------------------------------------------------------

# IPython's formatter methods, in the order a front end prefers them.
_REPR_METHODS = (
    ("_repr_html_", "text/html"),
    ("_repr_markdown_", "text/markdown"),
    ("_repr_svg_", "image/svg+xml"),
    ("_repr_png_", "image/png"),
    ("_repr_jpeg_", "image/jpeg"),
    ("_repr_latex_", "text/latex"),
    ("_repr_json_", "application/json"),
)
_BINARY_MIMES = ("image/png", "image/jpeg")


def _note(text):
    try:
        sys.stderr.write(f"airlock: {text}\n")
    except Exception:
        pass


def _method(obj, name):
    try:
        m = getattr(obj, name, None)
    except Exception:
        return None
    return m if callable(m) else None


def _mime_value(mime, value):
    """A formatter's return value as the string the reply carries, or None to skip it."""
    if isinstance(value, tuple) and len(value) == 2:  # (data, metadata)
        value = value[0]
    if value is None:
        return None
    if mime in _BINARY_MIMES:
        if isinstance(value, (bytes, bytearray, memoryview)):
            import binascii

            return binascii.b2a_base64(bytes(value), newline=False).decode("ascii")
        return value if isinstance(value, str) else None
    if mime == "application/json" or mime.endswith("+json"):
        if isinstance(value, str):
            return value
        import json

        try:
            return json.dumps(value)
        except (TypeError, ValueError):
            return None
    return value if isinstance(value, str) else None


def _figure_png(fig):
    import binascii
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return binascii.b2a_base64(buf.getvalue(), newline=False).decode("ascii")


def _rich_data(obj):
    """The rich representations of obj as {mime: str} (text/plain not included). Classes are
    skipped (their _repr_*_ are unbound functions); a failing formatter is skipped with a note on
    stderr, like IPython does."""
    if isinstance(obj, type):
        return {}
    data = {}
    mpl_figure = sys.modules.get("matplotlib.figure")
    if mpl_figure is not None and isinstance(obj, getattr(mpl_figure, "Figure", ())):
        try:
            data["image/png"] = _figure_png(obj)
            if _cell_figures is not None:
                _cell_figures.add(id(obj))
        except Exception as e:
            _note(f"cannot render figure: {type(e).__name__}: {e}")
        return data
    bundle = _method(obj, "_repr_mimebundle_")
    if bundle is not None:
        try:
            got = bundle(include=None, exclude=None)
            if isinstance(got, tuple) and len(got) == 2:
                got = got[0]
            if isinstance(got, dict):
                for mime, value in got.items():
                    if isinstance(mime, str) and mime != "text/plain":
                        v = _mime_value(mime, value)
                        if v is not None:
                            data[mime] = v
        except Exception as e:
            _note(f"_repr_mimebundle_ failed: {type(e).__name__}: {e}")
    for meth, mime in _REPR_METHODS:
        if mime in data:
            continue
        m = _method(obj, meth)
        if m is None:
            continue
        try:
            v = _mime_value(mime, m())
        except Exception as e:
            _note(f"{meth} failed: {type(e).__name__}: {e}")
            continue
        if v is not None:
            data[mime] = v
    return data


def display(*objs):
    """Show objects as outputs of the running cell, like IPython's display(): each becomes one
    output with text/plain (its repr) and the rich formats it offers."""
    outputs = _cell_outputs
    for obj in objs:
        data = {"text/plain": repr(obj)}
        data.update(_rich_data(obj))
        if outputs is not None:
            outputs.append({"data": data, "main": False})


display._airlock_display = True


def _flush_figures(outputs):
    """Append every open pyplot figure as a PNG output, then close them all."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    try:
        nums = plt.get_fignums()
    except Exception:
        return
    rendered = _cell_figures or ()
    for num in nums:
        try:
            fig = plt.figure(num)
            if id(fig) in rendered:
                continue
            outputs.append({"data": {"image/png": _figure_png(fig), "text/plain": repr(fig)},
                            "main": False})
        except Exception as e:
            _note(f"cannot render figure {num}: {type(e).__name__}: {e}")
    try:
        plt.close("all")
    except Exception:
        pass


def _show(*args, **kwargs):
    """plt.show() inside airlock: like Jupyter's inline backend, the open figures become outputs
    of the running cell right away and are closed, so the next plot starts on a fresh figure.
    Nothing is drawn on a screen and nothing warns."""
    if _cell_outputs is not None:
        _flush_figures(_cell_outputs)


class _PatchingLoader:
    """Wraps the loader of matplotlib.pyplot so that plt.show is replaced as soon as pyplot has
    been executed, also when a cell imports pyplot for the first time and calls show() at once.
    Everything else (get_source for tracebacks, resources) goes to the real loader."""

    def __init__(self, loader):
        self._loader = loader

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        module.show = _show


class _PyplotHook:
    """A sys.meta_path finder that only answers for matplotlib.pyplot (it is asked only about
    modules not imported yet, so it costs one call per new module)."""

    _airlock_pyplot_hook = True

    def find_spec(self, name, path=None, target=None):
        if name != "matplotlib.pyplot":
            return None
        for finder in sys.meta_path:
            if getattr(finder, "_airlock_pyplot_hook", False):
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _PatchingLoader(spec.loader)
                return spec
        return None


def _install_pyplot_hook():
    # Replace a hook that an earlier instance of this module installed.
    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "_airlock_pyplot_hook", False)]
    sys.meta_path.insert(0, _PyplotHook())


def _patch_pyplot():
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None and getattr(plt, "show", None) is not _show:
        try:
            plt.show = _show
        except Exception:
            pass


# --- files manifest ---------------------------------------------------------------------------

def _snapshot(root):
    """({relative path: (size, mtime_ns, inode)}, truncated) for the regular files and symlinks
    under root, without following symlinks; truncated says the entry bound cut the walk short.
    An empty directory costs one scandir(); a file costs one lstat (scandir gives no sizes)."""
    if root is None:
        return None
    snap = {}
    seen = 0
    truncated = False
    # pip's installs for the session (hundreds of files) are not files the cell made.
    skip = os.environ.get("PYTHONUSERBASE")
    stack = [("", root, 0)]
    scandir = os.scandir
    while stack and not truncated:
        prefix, path, depth = stack.pop()
        try:
            it = scandir(path)
        except OSError:
            continue
        with it:
            for entry in it:
                seen += 1
                if seen > _WALK_MAX_ENTRIES:
                    truncated = True
                    break
                try:
                    if entry.is_dir(follow_symlinks=False):
                        # Deeper directories are skipped by both walks alike, so the diff
                        # stays consistent: the manifest just does not see them.
                        if depth < _WALK_MAX_DEPTH and entry.path != skip:
                            stack.append((prefix + entry.name + "/", entry.path, depth + 1))
                    elif entry.is_file(follow_symlinks=False) or entry.is_symlink():
                        st = entry.stat(follow_symlinks=False)
                        snap[prefix + entry.name] = (st.st_size, st.st_mtime_ns, st.st_ino)
                except OSError:
                    continue
    return snap, truncated


def _safe_path(rel):
    try:
        rel.encode("utf-8")
        return rel
    except UnicodeEncodeError:  # undecodable bytes in a name (surrogateescape)
        return rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _files_changed(before, after):
    """Diff two snapshots into [{"path", "size", "change"}] sorted by path. When a walk hit its
    bound it saw only part of the tree: "created" is then only reported if the walk before the
    cell was complete, "deleted" only if the walk after it was."""
    if before is None or after is None:
        return []
    old, old_cut = before
    new, new_cut = after
    if not old and not new:
        return []
    changes = []
    for path, st in new.items():
        prev = old.get(path)
        if prev is None:
            if not old_cut:
                changes.append((path, st[0], "created"))
        elif prev != st:
            changes.append((path, st[0], "changed"))
    if not new_cut:
        for path in old.keys() - new.keys():
            changes.append((path, 0, "deleted"))
    changes.sort()
    return [{"path": _safe_path(p), "size": size, "change": c} for p, size, c in changes]


def files_snapshot():
    """The "before" half of the files manifest for a cell that does not run through
    run_cell() (a bash cell): pass the value to files_changed() afterwards."""
    root = _cwd()
    return (root, _snapshot(root))


def files_changed(snapshot):
    """What changed under the snapshot's root since files_snapshot(), in run_cell()'s "files"
    format."""
    root, before = snapshot
    if before is None:
        return []
    return _files_changed(before, _snapshot(root))


# --- saved Python state (stop, resume, fork) ------------------------------------------------
#
# snapshot() writes the user's variables as ONE pickle (protocol 5, the C pickler) to a pipe to
# the daemon, which stores the stream as python.state; restore() loads it in a new sandbox (a
# resumed session, or each child of a fork). Values are pickled as usual, with a reducer_override
# for what plain pickle cannot save or would save by a name that does not exist yet on restore:
#
#   - functions, lambdas and classes defined in cells (__module__ "__main__") by value: code via
#     marshal, globals = the live __main__ namespace on load, so identity between names holds and
#     a restored function sees the restored variables;
#   - module objects nested in values as an import by name (top-level ones are not pickled at
#     all: they are returned in "modules" and imported again, subject to the allow-list);
#   - staticmethod, classmethod, property, cached_property, lru_cache wrappers, mappingproxy,
#     TypeVar, the dataclasses sentinels and the types that only the types module names.
#
# Loading runs user code (a __reduce__'s rebuild function, __setstate__, a metaclass) that may
# look up globals of __main__: the pickle binds each name in __main__ as soon as its value is
# built (_Bind), classes and functions first, so such code finds what it needs; a load that fails
# takes those names out again. Hooks that ran when the session defined a class
# (__init_subclass__ of a cell's class) do not run again when it is rebuilt: what they did is in
# the saved state already.
#
# While pickling, sys.modules["__main__"] is an empty stand-in: anything that would still be
# saved as a reference to a name of __main__ (which does not exist yet while the pickle loads)
# fails then, in snapshot(), and its name is reported lost, instead of failing the whole restore.
# The rebuild helpers are named in the pickle as globals of a pseudo-module, _STATE_MODULE
# (registered only while pickling; restore() resolves it itself), so the stream does not depend
# on the name under which the runner imported this module.

_STATE_MODULE = "_airlock_state"

# Names never saved: the interpreter and _user_namespace() set them up in every sandbox.
_UNSAVED = frozenset({"__builtins__", "__name__", "__doc__", "__loader__", "__spec__",
                      "__package__", "__file__", "__cached__", "__warningregistry__",
                      _HIDDEN_VALUE})

# Objects that cannot be pickled, by the module that defines their type (looked up only in
# modules already loaded): such a name is reported lost without costing a failed pickling pass.
_UNPICKLABLE = (
    ("types", ("GeneratorType", "CoroutineType", "AsyncGeneratorType", "FrameType",
               "TracebackType", "CodeType")),
    ("builtins", ("memoryview",)),
    ("_thread", ("LockType", "RLock")),
    ("_io", ("FileIO", "BufferedReader", "BufferedWriter", "BufferedRandom", "BufferedRWPair",
             "TextIOWrapper")),
    ("weakref", ("ref", "ProxyType", "CallableProxyType")),
    ("socket", ("socket",)),
    ("threading", ("Thread", "Condition", "Event", "Semaphore", "Barrier")),
    ("queue", ("Queue",)),
    ("subprocess", ("Popen",)),
    ("select", ("epoll",)),
    ("selectors", ("BaseSelector",)),
    ("mmap", ("mmap",)),
    ("sqlite3", ("Connection", "Cursor")),
    ("asyncio", ("AbstractEventLoop", "Future")),
    ("concurrent.futures", ("Executor", "Future")),
)

# A snapshot gives up after this many failed passes and saves {}, all names lost: every failed
# pass drops at least one culprit, unless pickling failed for no reason that can be found again
# (a __reduce__ that fails at random), so only such a state gets there.
_STATE_ATTEMPTS = 4

# Metaclasses whose classes are rebuilt by value from cells: plain classes, ABCs (also typing's
# Protocol) and enums are; other library metaclasses (ORMs, model frameworks) register or check
# classes as they are created, which a rebuilt skeleton would not survive: their classes are
# reported lost in snapshot() rather than failing in restore().
_METACLASS_MODULES = frozenset({"builtins", "abc", "typing", "enum", "__main__"})

# Class attributes that are not copied onto a rebuilt class: type() makes them itself.
_CLASS_SKIP = frozenset({"__dict__", "__weakref__", "__module__", "__qualname__", "__slots__",
                         "__orig_bases__", "__doc__", "_abc_impl"})
_ENUM_SKIP = frozenset({"__new__", "__init__", "_generate_next_value_", "_member_map_",
                        "_member_names_", "_member_type_", "_new_member_", "_unhashable_values_",
                        "_use_args_", "_value2member_map_", "_value_repr_", "_all_bits_",
                        "_boundary_", "_flag_mask_", "_inverted_", "_singles_mask_"})

_state_classes = None  # (Pickler, Unpickler, writer, null sink), built on first use


def snapshot(fd, bash_state):
    """Write the variables of __main__ as one pickle to fd (a pipe: written in order, never
    sought) and close fd, also on error. Returns {"offset", "size", "lost_names", "modules",
    "count", "bash"}: the valid pickle is the size bytes from offset (0 unless a first pass failed
    part way, see _write_state), modules maps names bound to modules to the module to import
    again, lost_names lists the names that could not be saved, bash is bash_state as given.
    Prints nothing and leaves the namespace as it was. Raises OSError when fd cannot be written
    (the daemon gone, a full disk behind the pipe)."""
    try:
        main = sys.modules.get("__main__")
        ns = getattr(main, "__dict__", None)
        if not isinstance(ns, dict):
            ns = {}
        state, modules, lost = _split_namespace(ns)
        had_registry = "__warningregistry__" in ns
        try:
            offset, size = _write_state(fd, ns, state, lost)
        finally:
            # A warning from user code run by pickling (a __reduce__) leaves a registry behind.
            if not had_registry:
                ns.pop("__warningregistry__", None)
    finally:
        _close(fd)
    lost.discard("_")  # the last value is a convenience: no one asked to keep it
    return {"offset": offset, "size": size, "lost_names": sorted(lost), "modules": modules,
            "count": _count, "bash": bash_state}


def restore(fd, offset, size, modules, lost_names, count, reseed):
    """Load what snapshot() saved into __main__, in a new sandbox: import modules ({name:
    module}) again, except those the allow-list refuses or that fail to import, then (size > 0)
    the pickle of size bytes at offset in fd, and set the execution count. reseed (a child of a
    fork) gives the random generators of the namespace and of random/numpy fresh seeds. Closes
    fd. Never raises: returns {"lost_names": the given ones plus the names not restored, "error":
    None, or one line saying why the variables could not be loaded (the imported modules stay)}.
    """
    global _count
    lost = set()
    error = None
    try:
        lost.update(str(n) for n in lost_names or ())
        ns = _user_namespace()
        _refresh_sites()  # the session's pip installs are back in /work: import from there
        lost.update(_import_modules(ns, modules or {}))
        if size and size > 0:
            try:
                ns.update(_load_state(ns, fd, offset, size))
            except BaseException as e:  # corrupt or truncated state, or a __setstate__ that raised
                error = _clean("the saved Python variables could not be loaded: "
                               f"{type(e).__name__}: {_one_line(e)}")
        if type(count) is int:
            _count = count
        if reseed:
            _reseed_namespace(ns)
            _reseed_process()
    except BaseException as e:
        error = error or _clean(f"the saved Python variables could not be restored: "
                                f"{type(e).__name__}: {_one_line(e)}")
    finally:
        _close(fd)
    return {"lost_names": sorted(lost), "error": error}


# restore() has a parameter named reseed.
_reseed_process = reseed


_warm_saved = None


def warmup_begin():
    """A warm pool member runs a session's first calls before it is handed over (runner.c,
    handle_warmup): cells through the real exec path until one costs no page faults. A session
    forked from the zygote pays first-time costs on that path (copy-on-write faults on the pages
    the interpreter, the allocator and the reply's JSON touch, lazy imports, code warming up);
    a warm member pays them here, so its first real call is as fast as its tenth
    (docs/PERFORMANCE.md). This sets a throwaway __main__ for those cells; warmup_end() puts the
    real one back with the execution count and the cell sources, so they leave no trace."""
    global _warm_saved
    import io

    _warm_saved = (sys.modules.get("__main__"), _count, list(_cell_sources), _cell_sources_bytes)
    scratch = type(sys)("__main__")
    scratch.__dict__["_airlock_sink"] = io.StringIO()  # where the warm-up cells print
    sys.modules["__main__"] = scratch


def warmup_end():
    global _count, _cell_sources_bytes, _warm_saved
    import linecache

    if _warm_saved is None:
        return
    main, count, sources, sources_bytes = _warm_saved
    _warm_saved = None
    sys.modules["__main__"] = main
    for name, _size in _cell_sources[len(sources):]:
        linecache.cache.pop(name, None)
    _cell_sources[:] = sources
    _count, _cell_sources_bytes = count, sources_bytes


def _close(fd):
    try:
        os.close(fd)
    except (OSError, TypeError):
        pass


def _one_line(e):
    try:
        text = str(e)
    except Exception:
        text = ""
    return " ".join(text.split()) or "(no message)"


# --- saving

def _split_namespace(ns):
    """(state to pickle, {name: module name}, lost names) for the namespace ns."""
    unpicklable = _unpicklable_types()
    module_type = type(sys)
    state, modules, lost = {}, {}, set()
    for name, value in list(ns.items()):  # a thread of the session may change ns meanwhile
        if type(name) is not str or name in _UNSAVED:
            continue
        if name == "__annotations__" and type(value) is dict and not value:
            continue
        if name == "display" and _is_our_display(value):
            continue
        if _isinstance(value, module_type):
            modname = getattr(value, "__name__", None)
            # A module made at run time cannot be imported again.
            if type(modname) is str and sys.modules.get(modname) is value:
                modules[name] = modname
            else:
                lost.add(name)
        elif _isinstance(value, unpicklable):
            lost.add(name)
        else:
            state[name] = value
    return state, modules, lost


def _isinstance(value, types):
    try:
        return isinstance(value, types)
    except Exception:  # a __class__ property that raises: let pickling decide
        return False


def _is_our_display(value):
    try:
        return getattr(value, "_airlock_display", False) is True
    except Exception:
        return False


def _unpicklable_types():
    found = []
    for modname, names in _UNPICKLABLE:
        mod = sys.modules.get(modname)
        for name in names if mod is not None else ():
            t = getattr(mod, name, None)
            if isinstance(t, type):
                found.append(t)
    return tuple(found)


def _write_state(fd, ns, state, lost):
    """Pickle state to fd; returns (offset, size) of the valid pickle. The first pass pickles the
    whole state straight to fd (big arrays go from their memory to the pipe without a copy). If
    it fails, its partial bytes are already in the stream: each value is then pickled alone into
    a sink that only counts to find the culprits, which go to lost, and the state is written
    again after those bytes."""
    pickler, _unpickler, writer, null_sink = _classes()
    out = writer(fd)
    saved = _enter_pickling()
    try:
        for _attempt in range(_STATE_ATTEMPTS):
            start = out.count
            buffers = []
            try:
                pickler(out, ns, buffers.append).dump(_bindings(state))
                _write_buffers(out, buffers, out.count - start)
                return start, out.count - start
            except Exception:
                if out.error is not None:
                    raise out.error from None
            bad = _culprits(pickler, null_sink, ns, state) or _joint_culprit(pickler, null_sink,
                                                                             ns, state)
            for name in bad:
                del state[name]
                lost.add(name)
        lost.update(state)
        start = out.count
        pickler(out, ns).dump({})
        _write_buffers(out, [], out.count - start)
        return start, out.count - start
    finally:
        _leave_pickling(saved)


# The state is the pickle, then the raw bytes of its out-of-band buffers (protocol 5: the data of
# numpy arrays, so of DataFrames, goes there without being copied into the pickle), then a
# trailer: each buffer's length, the pickle's length and the buffer count (8 bytes each, little
# endian) and a magic. Loading reads each buffer straight into memory of its own (numpy's, which
# asks for huge pages for big arrays), and the arrays are built on it without another copy.
_TRAILER_MAGIC = b"ALSTATE1"


def _write_buffers(out, buffers, pickle_len):
    lengths = []
    for b in buffers:
        raw = b.raw()
        lengths.append(raw.nbytes)
        out.write(raw)
    out.write(b"".join(n.to_bytes(8, "little") for n in lengths)
              + pickle_len.to_bytes(8, "little") + len(lengths).to_bytes(8, "little")
              + _TRAILER_MAGIC)


def _read_exact(fd, view, pos):
    """Fills view from fd at pos (pread, so the fd's offset does not matter)."""
    done = 0
    while done < len(view):
        n = os.preadv(fd, [view[done:]], pos + done)
        if n <= 0:
            raise EOFError("the saved state ends early")
        done += n


def _read_state_parts(fd, offset, size):
    """(pickle bytes, [writable buffers]) of the state at offset in fd."""
    if size < 24:
        raise EOFError("the saved state is too short")
    trailer = bytearray(24)
    _read_exact(fd, memoryview(trailer), offset + size - 24)
    if bytes(trailer[16:]) != _TRAILER_MAGIC:
        raise ValueError("the saved state has no valid trailer")
    pickle_len = int.from_bytes(trailer[0:8], "little")
    count = int.from_bytes(trailer[8:16], "little")
    table_len = 8 * count
    if count > size or pickle_len + table_len + 24 > size:
        raise ValueError("the saved state's trailer does not match its size")
    table = bytearray(table_len)
    _read_exact(fd, memoryview(table), offset + size - 24 - table_len)
    lengths = [int.from_bytes(table[i:i + 8], "little") for i in range(0, table_len, 8)]
    if pickle_len + sum(lengths) + table_len + 24 != size:
        raise ValueError("the saved state's buffers do not add up to its size")
    data = bytearray(pickle_len)
    _read_exact(fd, memoryview(data), offset)
    np = sys.modules.get("numpy")
    buffers, pos = [], offset + pickle_len
    for n in lengths:
        # numpy's allocator madvises big blocks for huge pages: one fault per 2 MiB instead of
        # one per 4 KiB, which is most of the cost of bringing a big array back.
        buf = np.empty(n, dtype=np.uint8) if np is not None and n >= (1 << 20) else bytearray(n)
        view = memoryview(buf).cast("B") if np is not None and n >= (1 << 20) else memoryview(buf)
        _read_exact(fd, view, pos)
        buffers.append(buf)
        pos += n
    return data, buffers


def _bindings(state):
    """The state as the pickle carries it: classes and functions first (code run while loading
    the data may need them), each value wrapped so that loading binds its name in __main__."""
    function = type(_bindings)

    def data_last(item):
        value = item[1]
        return not (type(value) is function or _isinstance(value, type))

    return {name: _Bind(name, value) for name, value in sorted(state.items(), key=data_last)}


def _culprits(pickler, null_sink, ns, state):
    """The names whose value fails to pickle on its own."""
    bad = []
    for name, value in state.items():
        try:
            pickler(null_sink(), ns).dump(value)
        except Exception:
            bad.append(name)
    return bad


def _joint_culprit(pickler, null_sink, ns, state):
    """For a state that fails only as a whole: the name whose addition makes the shortest failing
    prefix of the state (bisected), or [] if the whole state pickles now."""
    names = list(state)

    def fails(k):
        try:
            pickler(null_sink(), ns).dump({n: state[n] for n in names[:k]})
            return False
        except Exception:
            return True

    if not fails(len(names)):
        return []
    lo, hi = 1, len(names)  # fails(hi) holds
    while lo < hi:
        mid = (lo + hi) // 2
        if fails(mid):
            hi = mid
        else:
            lo = mid + 1
    return [names[hi - 1]]


def _enter_pickling():
    """Make the rebuild helpers importable by their pseudo-module, hide __main__ (see the section
    comment) and silence warnings while pickling. Returns what _leave_pickling() puts back."""
    import warnings

    helpers = type(sys)(_STATE_MODULE)
    for name, helper in _helpers().items():
        setattr(helpers, name, helper)
    saved = (sys.modules.get(_STATE_MODULE), sys.modules.get("__main__"),
             warnings.catch_warnings())
    saved[2].__enter__()
    warnings.simplefilter("ignore")
    sys.modules[_STATE_MODULE] = helpers
    sys.modules["__main__"] = type(sys)("__main__")
    return saved


def _leave_pickling(saved):
    old_helpers, main, warn = saved
    for name, mod in ((_STATE_MODULE, old_helpers), ("__main__", main)):
        if mod is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = mod
    warn.__exit__(None, None, None)


def _classes():
    """The Pickler and Unpickler subclasses and the two writers, built once (pickle is imported
    only when a state is saved or restored)."""
    global _state_classes
    if _state_classes is None:
        _state_classes = _build_classes()
    return _state_classes


def _build_classes():
    import pickle

    picklebuffer = pickle.PickleBuffer

    class StatePickler(pickle.Pickler):
        def __init__(self, file, ns, buffer_callback=None):
            super().__init__(file, protocol=5, buffer_callback=buffer_callback)
            self.ns = ns
            self.table = _reducers()

        def reducer_override(self, obj):
            # Called for every object but atoms and plain containers: keep it cheap.
            reduce = self.table.get(type(obj))
            if reduce is not None:
                return reduce(self, obj)
            if isinstance(obj, type):
                return _reduce_class(self, obj)
            return NotImplemented

    helpers = _helpers()

    class StateUnpickler(pickle.Unpickler):
        def find_class(self, module, name):
            if module == _STATE_MODULE:
                if name not in helpers:
                    raise pickle.UnpicklingError(f"unknown rebuild helper {name!r}")
                return helpers[name]
            return super().find_class(module, name)

    class FdWriter:
        """The pickler's file: every write goes to fd in full (pipes take partial writes)."""

        __slots__ = ("fd", "count", "error")

        def __init__(self, fd):
            self.fd = fd
            self.count = 0
            self.error = None

        def write(self, data):
            view = memoryview(data)
            if view.ndim != 1 or view.itemsize != 1:
                view = picklebuffer(data).raw()  # an array's buffer, passed through as is
            total = view.nbytes
            done = 0
            try:
                while done < total:
                    try:
                        done += os.write(self.fd, view[done:])
                    except BlockingIOError:
                        _wait_writable(self.fd)
            except OSError as e:
                self.error = e
                raise
            self.count += total
            return total

    class NullSink:
        """A file that only counts: where values are pickled to find the ones that fail."""

        __slots__ = ("count",)

        def __init__(self):
            self.count = 0

        def write(self, data):
            n = memoryview(data).nbytes
            self.count += n
            return n

    return StatePickler, StateUnpickler, FdWriter, NullSink


def _wait_writable(fd):
    import select

    select.select((), (fd,), ())


def _reducers():
    """{type: reduce(pickler, obj)} for StatePickler.reducer_override, for the modules loaded."""
    import types

    table = {
        types.FunctionType: _reduce_function,
        types.CellType: _reduce_cell,
        types.ModuleType: _reduce_module,
        types.MappingProxyType: _reduce_mappingproxy,
        _Marshalled: _reduce_marshalled,
        _Bind: _reduce_bind,
        staticmethod: _reduce_wrapper,
        classmethod: _reduce_wrapper,
        property: _reduce_property,
    }
    functools = sys.modules.get("functools")
    if functools is not None:
        table[functools.cached_property] = _reduce_cached_property
        table[functools._lru_cache_wrapper] = _reduce_lru_cache
    typing = sys.modules.get("typing")
    if typing is not None:
        table[typing.TypeVar] = _reduce_typevar
    dataclasses = sys.modules.get("dataclasses")
    if dataclasses is not None:
        for name in ("MISSING", "KW_ONLY", "_HAS_DEFAULT_FACTORY", "_FIELD", "_FIELD_CLASSVAR",
                     "_FIELD_INITVAR"):
            table[type(getattr(dataclasses, name))] = _reduce_dataclass_sentinel
    return table


class _Marshalled:
    """A code object in a function's pickle, as its marshal bytes."""

    __slots__ = ("data",)

    def __init__(self, data):
        self.data = data


class _Bind:
    """A top-level value of the state, bound to its name in __main__ as soon as it is loaded."""

    __slots__ = ("name", "value")

    def __init__(self, name, value):
        self.name = name
        self.value = value


def _reduce_bind(pickler, obj):
    return _bind, (obj.name, obj.value)


def _reduce_marshalled(pickler, obj):
    import marshal

    return marshal.loads, (obj.data,)


def _reduce_module(pickler, obj):
    import importlib

    # Like any class a pickle names: imported when loaded, not checked against the allow-list.
    name = getattr(obj, "__name__", None)
    if type(name) is not str or sys.modules.get(name) is not obj:
        return NotImplemented  # made at run time: pickle says it cannot
    return importlib.import_module, (name,)


def _reduce_mappingproxy(pickler, obj):
    # A read-only view, as a dataclass field's metadata: a view of a copy is as good.
    return type(obj), (dict(obj),)


def _reduce_wrapper(pickler, obj):
    return type(obj), (obj.__func__,)


def _reduce_property(pickler, obj):
    return property, (obj.fget, obj.fset, obj.fdel, obj.__doc__)


def _reduce_cached_property(pickler, obj):
    return type(obj), (obj.func,), {"attrname": obj.attrname, "__doc__": obj.__doc__}


def _reduce_lru_cache(pickler, obj):
    params = obj.cache_parameters()
    return _make_lru_cache, (obj.__wrapped__, params["maxsize"], params["typed"])


def _reduce_typevar(pickler, obj):
    if obj.__module__ != "__main__":
        return NotImplemented
    import functools

    make = functools.partial(type(obj), obj.__name__, *obj.__constraints__, bound=obj.__bound__,
                             covariant=obj.__covariant__, contravariant=obj.__contravariant__)
    return make, ()


def _reduce_dataclass_sentinel(pickler, obj):
    # dataclasses tells fields apart by the identity of these objects: a copy would not do.
    dataclasses = sys.modules["dataclasses"]
    for name in ("MISSING", "KW_ONLY", "_HAS_DEFAULT_FACTORY", "_FIELD", "_FIELD_CLASSVAR",
                 "_FIELD_INITVAR"):
        if getattr(dataclasses, name) is obj:
            return getattr, (dataclasses, name)
    return NotImplemented


def _found_by_name(obj):
    """Whether pickle finds obj again under its module and qualified name."""
    try:
        found = sys.modules.get(obj.__module__)
        for part in obj.__qualname__.split("."):
            found = getattr(found, part)
        return found is obj
    except Exception:
        return False


def _reduce_function(pickler, f):
    """A function of a cell by value; also one that pickle could not find by name (a closure, a
    method that namedtuple or functools.wraps renamed). Its globals: the live namespace for a
    cell's function, the module for a module's, a copy otherwise (exec in a dict of its own)."""
    if f.__module__ != "__main__" and _found_by_name(f):
        return NotImplemented
    import marshal

    g = f.__globals__
    where = g
    if g is pickler.ns:
        where = None
    else:
        name = g.get("__name__")
        mod = sys.modules.get(name) if type(name) is str else None
        if mod is not None and getattr(mod, "__dict__", None) is g:
            where = name
    args = (_Marshalled(marshal.dumps(f.__code__)), where, f.__name__, f.__closure__)
    state = (f.__defaults__, f.__kwdefaults__, f.__dict__ or None, f.__annotations__ or None,
             f.__doc__, f.__qualname__, f.__module__)
    return _make_function, args, state, None, None, _fill_function


def _reduce_cell(pickler, cell):
    """A closure cell as an object of its own (two closures of one call share it), filled after
    it is memoised: a recursive inner function finds itself through its cell."""
    import types

    try:
        value = cell.cell_contents
    except ValueError:  # empty: the variable was not assigned yet
        return types.CellType, ()
    return types.CellType, (), (None, {"cell_contents": value})


def _reduce_class(pickler, cls):
    """A class of a cell by value: a skeleton made by its metaclass from name, bases and what
    must be there at creation (slots, __orig_bases__, enum members), memoised before the rest of
    its __dict__ is set on it, so that methods, instances and subclasses that refer back to it
    get the same class object."""
    if cls.__module__ != "__main__":
        return _reduce_type_by_name(cls)
    meta = type(cls)
    if getattr(meta, "__module__", None) not in _METACLASS_MODULES:
        import pickle

        raise pickle.PicklingError(f"cannot save class {cls.__qualname__}: its metaclass "
                                   f"{meta.__module__}.{meta.__qualname__} is not supported")
    d = cls.__dict__
    skeleton = {"__module__": "__main__", "__qualname__": cls.__qualname__,
                "__doc__": d.get("__doc__")}
    for key in ("__slots__", "__orig_bases__"):
        if key in d:
            skeleton[key] = d[key]
    member = type(type.__dict__["__dict__"]), type(_Marshalled.data)  # getset, member slots
    state = {k: v for k, v in d.items()
             if k not in _CLASS_SKIP and not (type(v) in member and v.__objclass__ is cls)}
    enum = sys.modules.get("enum")
    if enum is not None and isinstance(cls, enum.EnumMeta):
        return _reduce_enum(cls, meta, skeleton, state)
    return _make_class, (meta, cls.__name__, cls.__bases__, skeleton), state, None, None, \
        _fill_class


def _reduce_enum(cls, meta, skeleton, state):
    """An enum of a cell: its members (aliases included) by value, and the __init__ or __new__
    that makes them, are in the skeleton (the enum machinery builds members at creation)."""
    d = cls.__dict__
    members = [(name, m._value_) for name, m in cls._member_map_.items()]
    if "__init__" in d:
        skeleton["__init__"] = d["__init__"]
    if getattr(d.get("_new_member_"), "__module__", None) == "__main__":
        skeleton["__new__"] = d["_new_member_"]
    state = {k: v for k, v in state.items() if k not in _ENUM_SKIP and k not in cls._member_map_}
    return _make_enum, (meta, cls.__name__, cls.__bases__, skeleton, members), state, None, \
        None, _fill_class


_types_by_name = None  # {type: name in the types module} for types builtins does not name


def _reduce_type_by_name(cls):
    """types.CellType, MappingProxyType...: classes that pickle would look for in builtins."""
    global _types_by_name
    if cls.__module__ != "builtins":
        return NotImplemented
    import types

    if _types_by_name is None:
        _types_by_name = {t: n for n, t in vars(types).items()
                          if isinstance(t, type) and not n.startswith("_")}
    name = _types_by_name.get(cls)
    return NotImplemented if name is None else (getattr, (types, name))


# --- rebuilding (the helpers a pickle names as _STATE_MODULE.<name>)

def _make_function(code, where, name, closure):
    import types

    if where is None:
        g = sys.modules["__main__"].__dict__
    elif type(where) is str:
        import importlib

        g = importlib.import_module(where).__dict__
    else:
        g = where
    return types.FunctionType(code, g, name, None, closure)


def _fill_function(f, state):
    defaults, kwdefaults, fdict, annotations, doc, qualname, module = state
    f.__defaults__ = defaults
    f.__kwdefaults__ = kwdefaults
    if fdict:
        f.__dict__.update(fdict)
    if annotations:
        f.__annotations__ = annotations
    f.__doc__ = doc
    f.__qualname__ = qualname
    f.__module__ = module


_bound = None  # while restore() loads: [(name, had a value, previous value)], undone on failure


def _bind(name, value):
    ns = sys.modules["__main__"].__dict__
    if _bound is not None:
        _bound.append((name, name in ns, ns.get(name)))
    ns[name] = value
    return value


def _make_class(meta, name, bases, skeleton):
    # The __init_subclass__ of a cell's base class ran when the session defined this class: what
    # it did (a registry...) is in the saved state, it must not run again.
    hidden = {}
    for base in bases:
        for klass in getattr(base, "__mro__", ()):
            if (getattr(klass, "__module__", None) == "__main__"
                    and "__init_subclass__" in klass.__dict__):
                hidden[klass] = klass.__dict__["__init_subclass__"]
    for klass in hidden:
        type.__delattr__(klass, "__init_subclass__")
    try:
        return meta(name, bases, dict(skeleton))
    finally:
        for klass, hook in hidden.items():
            type.__setattr__(klass, "__init_subclass__", hook)


def _make_enum(meta, name, bases, skeleton, members):
    ns = meta.__prepare__(name, bases)
    for key, value in skeleton.items():
        ns[key] = value
    for key, value in members:
        ns[key] = value
    return meta(name, bases, ns)


def _fill_class(cls, state):
    for key, value in state.items():
        type.__setattr__(cls, key, value)


def _make_lru_cache(func, maxsize, typed):
    import functools

    return functools.lru_cache(maxsize=maxsize, typed=typed)(func)


def _helpers():
    return {f.__name__: f for f in (_bind, _make_function, _fill_function, _make_class,
                                     _make_enum, _fill_class, _make_lru_cache)}


for _helper in _helpers().values():
    _helper.__module__ = _STATE_MODULE
del _helper


# --- restoring

def _import_modules(ns, modules):
    """Bind each name to its module again; returns the names that were not (refused by the
    allow-list, or failing to import)."""
    import importlib

    lost = []
    for name, modname in modules.items():
        top = str(modname).partition(".")[0]
        if _allowed is not None and top not in _allowed:
            lost.append(str(name))
            continue
        try:
            ns[str(name)] = importlib.import_module(str(modname))
        except BaseException:  # a module may raise anything, SystemExit included
            lost.append(str(name))
    _patch_pyplot()
    return lost


def _load_state(ns, fd, offset, size):
    """The dict pickled at offset in fd (its names already bound in ns, see _Bind); on failure
    ns is as it was before. The garbage collector is held off while loading: it would otherwise
    rescan the new objects again and again."""
    global _bound
    _bound = []
    try:
        return _unpickle_state(fd, offset, size)
    except BaseException:
        for name, had, old in reversed(_bound):
            if had:
                ns[name] = old
            else:
                ns.pop(name, None)
        raise
    finally:
        _bound = None


def _unpickle_state(fd, offset, size):
    import gc
    import stat

    _pickler, unpickler, _writer, _sink = _classes()
    st = os.fstat(fd)
    if stat.S_ISREG(st.st_mode) and st.st_size < offset + size:
        raise EOFError(f"the saved state is truncated ({max(st.st_size - offset, 0)} of "
                       f"{size} bytes)")
    data, buffers = _read_state_parts(fd, offset, size)
    enabled = gc.isenabled()
    gc.disable()
    try:
        import io
        state = unpickler(io.BytesIO(data), buffers=buffers).load()
    finally:
        if enabled:
            gc.enable()
    if type(state) is not dict or not all(type(k) is str for k in state):
        raise TypeError(f"the saved state is a {type(state).__name__}, not a dict of names")
    for name in _UNSAVED:
        state.pop(name, None)
    return state


def _reseed_namespace(ns):
    """Fresh seeds for the random generators bound to names of the namespace (a forked child
    must not replay its parent's, or its siblings', random sequence)."""
    rnd = sys.modules.get("random")
    nprandom = sys.modules.get("numpy.random")
    done = set()
    for value in list(ns.values()):
        if id(value) in done:
            continue
        done.add(id(value))
        try:
            if rnd is not None and isinstance(value, rnd.Random):
                value.seed(os.urandom(32))
            elif nprandom is not None and isinstance(value, nprandom.Generator):
                _fresh_bits(nprandom, value.bit_generator)
            elif nprandom is not None and isinstance(value, nprandom.RandomState):
                _reseed_random_state(nprandom, value)
        except Exception:
            pass


def _fresh_bits(nprandom, bits):
    """Give a numpy bit generator, in place, the state of a new one of its type."""
    seed = nprandom.SeedSequence(int.from_bytes(os.urandom(16), "little"))
    bits.state = type(bits)(seed).state


def _reseed_random_state(nprandom, rs):
    raw = os.urandom(32)
    try:
        rs.seed([int.from_bytes(raw[i:i + 4], "little") for i in range(0, 32, 4)])
    except TypeError:  # only an MT19937 RandomState can be seeded: the others get new bits
        _fresh_bits(nprandom, rs._bit_generator)


# --- Code Mode: airlock_tools -----------------------------------------------------------------
#
# `import airlock_tools` in a cell gives one function per tool the session's code may call, plus
# call(name, **arguments) and list(). Each call is one request on the runner's channel (_channel,
# set by runner.c), answered by the daemon, which decides what is allowed: nothing here is a
# security boundary. The tool list is asked once per cell, at first use.

_channel = None  # runner.c: _channel(request_json) -> reply_json
_tools_cache = (0, None)  # (cell number, the list) of the last list request


class ToolError(Exception):
    """A tool call that failed. kind says why: "tool_error" (the tool ran and reported an error),
    "not_allowed", "unavailable", "invalid" (the arguments), "timeout", "limit", "too_large",
    "disabled" (Code Mode is off), "unknown". tool is the tool's name."""

    def __init__(self, message, tool=None, kind=None):
        super().__init__(message)
        self.tool = tool
        self.kind = kind


ToolError.__module__ = "airlock_tools"


def _json_default(o):
    # numpy arrays and scalars, pandas Series and values; tolist() first: an array's item()
    # works only for an array of one element.
    for method in ("tolist", "item"):
        f = getattr(o, method, None)
        if callable(f):
            return f()
    f = getattr(o, "isoformat", None)  # datetime, date, pandas Timestamp
    if callable(f):
        return f()
    raise TypeError(f"an argument of type {type(o).__name__} cannot be sent to a tool (send str, "
                    f"int, float, bool, None, list or dict)")


def _tools_request(message):
    import json

    try:
        text = json.dumps(message, default=_json_default, allow_nan=False)
    except ValueError as e:  # NaN or an infinity, a circular reference
        why = "NaN and infinity are not numbers JSON can carry" \
            if "Out of range float" in str(e) else str(e)
        raise ValueError(f"the arguments of a tool call cannot be sent as JSON: {why}") from None
    reply = json.loads(_channel(text))
    if "error" in reply:
        raise ToolError(str(reply["error"]), tool=message.get("name"), kind=reply.get("kind"))
    return reply.get("ok")


def _tools_list():
    global _tools_cache
    if _tools_cache[0] != _count or _tools_cache[1] is None:
        tools = _tools_request({"op": "tool_list"})
        _tools_cache = (_count, tools if isinstance(tools, list) else [])
    return _tools_cache[1]


def _tools_call(name, /, **arguments):
    """Call the tool `name` with keyword arguments and return its result as Python data."""
    if not isinstance(name, str):
        raise TypeError("airlock_tools.call(name, **arguments): name must be a str")
    return _tools_request({"op": "tool_call", "name": name, "arguments": arguments})


def _tools_public_list():
    """The tools this session's code may call: [{"name", "python_name", "server", "description",
    "parameters"}], parameters being the tool's JSON Schema."""
    return [{"name": t.get("name"), "python_name": t.get("python_name"),
             "server": t.get("server"), "description": t.get("description", ""),
             "parameters": t.get("inputSchema") or {}} for t in _tools_list()]


class _Tool:
    """One tool as a Python function: keyword arguments as the tool's parameters (positional
    ones in the schema's order), the result as Python data, ToolError on failure."""

    def __init__(self, info):
        import inspect

        self._info = {k: info.get(k) for k in ("name", "python_name", "server", "description",
                                                "inputSchema")}
        self._name = info.get("name")
        self.__name__ = self.__qualname__ = info.get("python_name") or self._name
        self.__module__ = "airlock_tools"
        schema = info.get("inputSchema") or {}
        props = schema.get("properties") or {}
        required = [p for p in (schema.get("required") or ()) if p in props]
        optional = [p for p in props if p not in required]
        params = []
        # **arguments for parameters that are not identifiers, and for a schema that does not
        # say which there are
        extra = "properties" not in schema
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        for p in required + optional:
            if not (isinstance(p, str) and p.isidentifier()) or p == "self":
                extra = True
                continue
            default = inspect.Parameter.empty if p in required else None
            params.append(inspect.Parameter(p, kind, default=default))
        if extra:
            params.append(inspect.Parameter("arguments", inspect.Parameter.VAR_KEYWORD))
        self.__signature__ = inspect.Signature(params)
        lines = [str(info.get("description") or "").strip() or "(no description)", ""]
        lines.append(f"Internal tool '{self._name}' of server '{info.get('server')}'.")
        for p, spec in props.items():
            spec = spec if isinstance(spec, dict) else {}
            mark = "" if p in required else " (optional)"
            text = spec.get("description", "")
            lines.append(f"  {p}: {spec.get('type', 'any')}{mark}{' - ' + text if text else ''}")
        self.__doc__ = "\n".join(lines)

    def __call__(self, *args, **kwargs):
        params = self.__signature__.parameters
        if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            # Named first: bind() would only say that a required one is missing.
            for key in kwargs:
                if key not in params:
                    raise TypeError(f"{self.__name__}() got an unexpected keyword argument "
                                    f"'{key}'; its parameters: {', '.join(params) or 'none'}")
        bound = self.__signature__.bind(*args, **kwargs)
        arguments = {}
        for key, value in bound.arguments.items():
            if self.__signature__.parameters[key].kind is self.__signature__.parameters[key].VAR_KEYWORD:
                arguments.update(value)
            else:
                arguments[key] = value
        return _tools_call(self._name, **arguments)

    def __repr__(self):
        return f"<airlock tool {self.__name__}{self.__signature__}>"

    def __reduce__(self):
        # A saved session gets the tool back as it was described (signature, help): a restore
        # runs outside any cell, where the channel cannot be asked (and a failure would lose
        # every variable). Whether the call is still allowed is the daemon's to say when it is
        # made.
        return (_Tool, (self._info,))


def _tool_by_name(name):
    """A tool back from a session saved before tools pickled their description. Resuming runs
    outside any cell, where nothing can be asked of the daemon: the function takes any keyword
    arguments (the daemon still checks them against the tool's schema); `airlock_tools.NAME`
    gives the described one again."""
    return _Tool({"name": name, "python_name": name, "inputSchema": {"type": "object"}})


def _tools_getattr(attr):
    if attr.startswith("__"):
        raise AttributeError(attr)
    tools = _tools_list()
    for info in tools:
        if info.get("python_name") == attr:
            return _Tool(info)
    names = ", ".join(t.get("python_name", "?") for t in tools) or "none"
    raise AttributeError(f"airlock_tools has no tool '{attr}'; this session's code may call: "
                         f"{names} (the session's code_tools, or its profile's, set them)")


def _tools_dir():
    return sorted({"ToolError", "call", "list"} | {t.get("python_name") for t in _tools_list()})


def _install_tools_module():
    import types

    if "airlock_tools" in sys.modules:
        return
    m = types.ModuleType("airlock_tools", "Code Mode: call the internal tools this session's code "
                         "may call, as Python functions (docs/TOOLS.md).")
    m.ToolError = ToolError
    m.call = _tools_call
    m.list = _tools_public_list
    m.__getattr__ = _tools_getattr
    m.__dir__ = _tools_dir
    sys.modules["airlock_tools"] = m
