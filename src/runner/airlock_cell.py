"""Cell execution for the airlock runner, with notebook semantics.

The runner (runner.c) embeds CPython and carries this module inside its own binary as a string
(embed.py), so user code cannot swap it on disk. The C side calls four functions:

    configure(profile, imports, policy)  once, in the zygote, before any user code
    preload(modules)                     in the zygote: import the profile's modules
    reseed()                             in every fresh session right after the fork
    run_cell(code) -> dict               once per execute request

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
when user code or preload() has already imported them.
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

# Builtins that evaluate strings, look attributes up by name, reach namespaces or files, or talk
# to a terminal. getattr() is here so that a string attribute name cannot dodge the static walk.
_REFUSED_NAMES = frozenset({
    "eval", "exec", "compile", "open", "__import__", "globals", "locals", "vars", "getattr",
    "setattr", "delattr", "breakpoint", "input", "memoryview", "help", "exit", "quit",
})

# Attributes refused whatever object they are read from: frame, traceback, generator and code
# introspection (the classic way from a function back to a module's globals), mro(), the
# attribute-by-name helpers of the stdlib (operator.attrgetter/methodcaller,
# string.Formatter.get_field) and module objects that public attributes of allowed modules hand
# out (typing.sys, json.codecs.open, ...).
_REFUSED_ATTRS = frozenset({
    "f_globals", "f_locals", "f_builtins", "f_back", "f_code", "f_trace", "tb_frame", "tb_next",
    "gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "cr_await", "cr_origin",
    "ag_frame", "ag_code", "ag_await", "co_code", "func_globals", "mro",
    "attrgetter", "methodcaller", "get_field",
    "sys", "os", "posix", "builtins", "modules", "subprocess", "importlib", "ctypes", "gc",
    "inspect",
    "open", "eval", "exec", "getattr", "setattr", "delattr", "globals", "locals", "vars",
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
                if top not in _allowed and top != "__future__":
                    found.append((node.lineno, node.col_offset, top))
                    break
        elif kind is ast.ImportFrom:
            if node.level:
                found.append((node.lineno, node.col_offset, "." * node.level + (node.module or "")))
                continue
            top = (node.module or "").partition(".")[0]
            if top not in _allowed and top != "__future__":
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
            if top not in _allowed and top != "__future__":
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


def run_cell(code):
    """Run one cell. Returns {"status", "result", "error", "exit_code", "outputs",
    "execution_count", "files"} (see the module docstring and DESIGN.md section 4)."""
    global _count, _cell_outputs, _cell_figures
    _count += 1
    n = _count
    outputs = []
    reply = {"status": "ok", "result": None, "error": None, "exit_code": 0, "outputs": outputs,
             "execution_count": n, "files": []}
    interrupted = False
    root = before = None
    try:
        ns = _user_namespace()
        root = _cwd()
        before = _snapshot(root)
        _patch_pyplot()
        _cell_outputs = outputs
        _cell_figures = set()
    except KeyboardInterrupt:
        interrupted = True

    if not interrupted:
        try:
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
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    try:
        tree = ast.parse(code, filename, "exec")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as e:
        raise _compile_refusal(e) from None
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
        raise _compile_refusal(e) from None

    if is_async:
        return _run_async(code_async, last is not None, ns)
    if head is not None:
        exec(head, ns)
    if tail is None:
        return False, None
    return True, eval(tail, ns)


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
                        if depth < _WALK_MAX_DEPTH:
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
