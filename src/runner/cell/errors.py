"""Errors as the reply carries them: tracebacks without the runner's frames, SystemExit, static
refusals."""

import sys

from .context import _CELL_PREFIX, _SELF


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
    return [fs for fs in frames if not fs.filename.startswith(_SELF)]


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
