"""The profile's policy: the restricted static checks and the import allow-list (a policy, not
the security boundary: see the package docstring)."""

import sys

from . import context as ctx
from .context import _ALWAYS_ALLOWED, _CELL_PREFIX, _Refused


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
                       f"'{name}' is not allowed by profile '{ctx._profile}' (line {line})", line)


# --- import allow-list ------------------------------------------------------------------------

def _import_refusal(top):
    return f"import of '{top}' is not allowed by profile '{ctx._profile}'; allowed modules: " \
           f"{ctx._allowed_text}"


def _import_check(ast, tree):
    """Raise _Refused for the first import statement (anywhere in the cell) that the allow-list
    refuses. Relative imports are refused: a cell is not part of a package."""
    found = []
    for node in ast.walk(tree):
        kind = type(node)
        if kind is ast.Import:
            for alias in node.names:
                top = alias.name.partition(".")[0]
                if top not in ctx._allowed and top not in _ALWAYS_ALLOWED:
                    found.append((node.lineno, node.col_offset, top))
                    break
        elif kind is ast.ImportFrom:
            if node.level:
                found.append((node.lineno, node.col_offset, "." * node.level + (node.module or "")))
                continue
            top = (node.module or "").partition(".")[0]
            if top not in ctx._allowed and top not in _ALWAYS_ALLOWED:
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
    if ctx._allowed is not None and not (type(fromlist) is list and not fromlist
                                     and globals is not None and globals is locals):
        caller = sys._getframe(1)
        main = sys.modules.get("__main__")
        if (caller.f_code.co_filename.startswith(_CELL_PREFIX)
                or (main is not None and caller.f_globals is getattr(main, "__dict__", None))):
            if level:
                raise ImportError(_import_refusal("." * level + name), name=name)
            top = name.partition(".")[0]
            if top not in ctx._allowed and top not in _ALWAYS_ALLOWED:
                raise ImportError(_import_refusal(top), name=name)
    return ctx._orig_import(name, globals, locals, fromlist, level)
