"""Code Mode: the airlock_tools module a cell imports to call the session's internal tools."""

import sys

from . import context as ctx


#
# `import airlock_tools` in a cell gives one function per tool the session's code may call, plus
# call(name, **arguments) and list(). Each call is one request on the runner's channel (_channel,
# set by runner.c), answered by the daemon, which decides what is allowed: nothing here is a
# security boundary. The tool list is asked once per cell, at first use.

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
    # runner.c sets _channel on the package: _channel(request_json) -> reply_json
    reply = json.loads(sys.modules[__package__]._channel(text))
    if "error" in reply:
        raise ToolError(str(reply["error"]), tool=message.get("name"), kind=reply.get("kind"))
    return reply.get("ok")


def _tools_list():
    global _tools_cache
    if _tools_cache[0] != ctx._count or _tools_cache[1] is None:
        tools = _tools_request({"op": "tool_list"})
        _tools_cache = (ctx._count, tools if isinstance(tools, list) else [])
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
