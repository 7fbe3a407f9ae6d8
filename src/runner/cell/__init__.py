"""Cell execution for the airlock runner, with notebook semantics: the package airlock_cell.

The runner (runner.c) embeds CPython and carries this package inside its own binary (embed.py:
each module's source and compiled code), so user code cannot swap it on disk. The C side calls
these functions of the package:

    configure(profile, imports, policy)  once, in the zygote, before any user code
    preload(modules)                     in the zygote: import the profile's modules
    reseed()                             in every fresh session right after the fork
    home(path)                           a session that lives in E2B's /home/user: its
                                         kernels' conventions (an Image.save displays it)
    warmup_begin(), warmup_end()         in a warm pool member, around the cells it runs
                                         before it is handed over
    zygote_warmup(code, times)           in the zygote before it forks: the same cells
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
3), which holds whatever happens in this package.

Importing this package must stay cheap (it is imported in every zygote): only modules that the
interpreter has already loaded at start-up are imported at module level; ast, linecache and
traceback come in with configure() or the first cell, numpy and matplotlib are only ever used
when user code or preload() has already imported them; pickle and marshal come in with the
first snapshot() or restore().

The modules, one concern each: context (what they share), setup (configure, preload, reseed),
execute (run_cell), policy (allow-list and restricted checks), pip (%pip and site directories),
errors (tracebacks), rich (display and figures), files (the manifest), saved (snapshot and
restore), tools (Code Mode's airlock_tools).
"""

from .execute import reset_namespace, run_cell, warmup_begin, warmup_end, zygote_warmup
from .files import files_changed, files_snapshot
from .rich import display
from .saved import restore, snapshot
from .setup import configure, home, preload, reseed

__all__ = ["configure", "preload", "reseed", "home", "warmup_begin", "warmup_end", "zygote_warmup",
           "run_cell", "snapshot", "restore", "files_snapshot", "files_changed", "display"]

# Set by runner.c: _channel(request_json) -> reply_json (Code Mode), _display(output_json) -> bool
# (a display streamed as it is made, rich.py).
_channel = None
_display = None
