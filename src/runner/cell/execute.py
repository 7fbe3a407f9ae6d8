"""Running one cell: run_cell() and what it needs (the call's stdin/env/cwd, parsing, the trailing
expression, top-level await, the reply), and the warm pool's warm-up cells."""

import builtins
import os
import sys

from . import context as ctx
from . import ipython
from .context import (_CELL_PREFIX, _HIDDEN_VALUE, _Refused, _clean, _cwd, _flush_streams,
                      _source_lines)
from .errors import _error_of, _static_traceback, _system_exit
from .files import _after, _before, _files_changed
from .pip import _as_written, _pip_lines, _refresh_sites
from .policy import _import_check, _policy_check
from .rich import _flush_figures, _mime_value, _patch_pyplot, _rich_data, display


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
    ctx._count += 1
    n = ctx._count
    outputs = []
    reply = {"status": "ok", "result": None, "error": None, "exit_code": 0, "outputs": outputs,
             "execution_count": n, "files": []}
    interrupted = False
    root = before = None
    try:
        _refresh_sites()
        ns = _user_namespace()
        root = None if _no_manifest else _cwd()
        before = _before(root)
        _patch_pyplot()
        ctx._cell_outputs = outputs
        ctx._cell_figures = set()
    except KeyboardInterrupt:
        interrupted = True

    saved = {}
    if not interrupted:
        try:
            if stdin is not None or env or cwd is not None:
                _call_enter(saved, stdin, env, cwd)
            ipython.begin_cell(sys.modules["__main__"], ns, n, _warm_saved is not None)
            has_value, value = _execute(code, n, ns)
            # Warm-up cells too (their history is forgotten in warmup_end): the first write to
            # the history's lists copies pages shared with the zygote, in the warm-up, not in
            # the session's first cell.
            ipython.end_cell(ns, n, has_value, value)
            if has_value and value is not None:
                ns["_"] = value
                reply["result"], rich = _represent(value)
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
            reply["error"] = ipython.usage_error(e) or _error_of(e)

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
    ctx._cell_outputs = None
    ctx._cell_figures = None
    try:
        if root is not None and before is not None:
            reply["files"] = _files_changed(before, _after(root))
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
        ns["display"] = ctx._display or display
    return ns


def _represent(value):
    """(text/plain, {other mime: data}) of the cell's value: IPython's formatters where the
    profile has IPython's dialect, else repr() and the object's _repr_*_ methods."""
    if ipython.enabled():
        data = {}
        for mime, raw in ipython.format_value(value).items():
            v = _mime_value(mime, raw)
            if v is not None:
                data[mime] = v
        text = data.pop("text/plain", None)
        return (text if text is not None else repr(value)), data
    return repr(value), _rich_data(value)


def _parse(ast, code, filename):
    """(tree, source): the cell as written when it is Python; else, where the profile has
    IPython's dialect, as IPython's transformer turns it into Python. Raises _Refused."""
    try:
        return ast.parse(code, filename, "exec"), code
    except (SyntaxError, ValueError, MemoryError, RecursionError) as e:
        error = e
    if ipython.enabled():
        try:
            source = ipython.transform(code)
        except Exception:
            source = code
    else:
        message = ipython.refusal(code)
        if message is not None:
            raise _Refused("PolicyError", message, None)
        # A cell quoted indented (as IPython would take it), and %pip lines, which run in every
        # profile: the compiler gets them as calls.
        import textwrap

        source = _pip_lines(textwrap.dedent(code))
        if source == code:
            source = code
    if source is code:
        raise _compile_refusal(error) from None
    try:
        return ast.parse(source, filename, "exec"), source
    except (SyntaxError, ValueError, MemoryError, RecursionError) as e:
        raise _compile_refusal(_as_written(e, code, source)) from None


def _execute(code, n, ns):
    """Parse, check and run one cell. Returns (has_value, value). Raises _Refused for a refused
    or unparsable cell (nothing ran), otherwise whatever the user code raised."""
    import ast
    import linecache

    filename = f"{_CELL_PREFIX}{n}>"
    lines = _source_lines(code)
    _remember_source(linecache, filename, code, lines)
    # Tracebacks show the cell as written; the compiler gets it as Python.
    tree, source = _parse(ast, code, filename)
    if source is not code:
        lines = _source_lines(source)
    ipython.store_input(ns, n, source)
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    if ctx._allowed is not None:
        _import_check(ast, tree)
    if ctx._restricted:
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


def _remember_source(linecache, filename, code, lines):
    # mtime None: linecache.checkcache() keeps entries that have no file behind them.
    linecache.cache[filename] = (len(code), None, lines, filename)
    ctx._cell_sources.append((filename, len(code)))
    ctx._cell_sources_bytes += len(code)
    while ctx._cell_sources_bytes > ctx._LINECACHE_MAX_BYTES and len(ctx._cell_sources) > 1:
        old, size = ctx._cell_sources.pop(0)
        ctx._cell_sources_bytes -= size
        linecache.cache.pop(old, None)


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

    _warm_saved = (sys.modules.get("__main__"), ctx._count, list(ctx._cell_sources),
                   ctx._cell_sources_bytes)
    scratch = type(sys)("__main__")
    scratch.__dict__["_airlock_sink"] = io.StringIO()  # where the warm-up cells print
    sys.modules["__main__"] = scratch


_no_manifest = False  # zygote_warmup(): the zygote's directory is /, not a workspace


def zygote_warmup(code, times):
    """In the zygote, before it freezes its heap and forks: runs the warm pool's cell a few times,
    so that the code on the exec path (IPython's formatters among it) is specialized (CPython 3.11
    rewrites bytecode as it warms up) and what it builds lazily exists before the fork; sessions
    then share those pages instead of each copying them in its own warm-up (docs/PERFORMANCE.md).
    Leaves nothing behind: a scratch __main__ as warmup_begin() makes, no files manifest, the
    count, cell sources and history put back."""
    global _no_manifest
    warmup_begin()
    _no_manifest = True
    try:
        for _ in range(times):
            run_cell(code)
        from .saved import warm

        warm()  # the load path of a fork's children and of resumes
    finally:
        _no_manifest = False
        warmup_end()


def reset_namespace():
    """A fresh interpreter state for a code context (docs/API.md, "Contexts"): a new, empty
    __main__ (the modules imported so far stay imported, which is what makes a context cheap),
    execution count 0, no cell sources, IPython's history gone. Objects of the old namespace
    that user code still holds keep theirs: it is replaced, not cleared."""
    import linecache

    main = type(sys)("__main__")
    sys.modules["__main__"] = main
    for name, _size in ctx._cell_sources:
        linecache.cache.pop(name, None)
    ctx._cell_sources[:] = []
    ctx._count, ctx._cell_sources_bytes = 0, 0
    ipython.forget_history(0)
    ns = _user_namespace()
    ipython.begin_cell(main, ns, 0)


def warmup_end():
    global _warm_saved
    import linecache

    if _warm_saved is None:
        return
    main, count, sources, sources_bytes = _warm_saved
    _warm_saved = None
    sys.modules["__main__"] = main
    for name, _size in ctx._cell_sources[len(sources):]:
        linecache.cache.pop(name, None)
    ctx._cell_sources[:] = sources
    ctx._count, ctx._cell_sources_bytes = count, sources_bytes
    ipython.forget_history(count)
    # The shell back on the session's namespace now, so that its first cell does not pay that.
    ns = _user_namespace()
    ipython.begin_cell(sys.modules["__main__"], ns, count)
