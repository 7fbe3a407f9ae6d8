#!/usr/bin/python3
"""A scriptable MCP server for fault tests: the flags choose how it misbehaves, the tools
cover every result shape. stdio by default, streamable HTTP on loopback with --http HOST:PORT
(port 0 picks a free port; the URL is printed on stdout as "fixture: listening on URL").
It shares the protocol code of examples/internal-tools/mcp_stdlib.py with the example server.

Flags:
  --die-on-start            print a message on stderr and exit 3 before anything else
  --hang-initialize         never answer initialize (everything else is still read)
  --exit-after-init         exit 5 right after notifications/initialized (once acknowledged)
  --tools-changed-after N   after the Nth tool call, add tool late_tool and send
                            notifications/tools/list_changed (HTTP: on that call's event
                            stream with --sse, else on the session's GET stream)
  --sse                     HTTP: answer each POSTed request as text/event-stream, with a
                            notifications/message event before the answer
  --page-size N             tools/list pages of N tools, linked by nextCursor
  --name-clash              also expose run_python (airlock's own tool's name); echo is
                            always there, as in @modelcontextprotocol/server-everything
  --state-file PATH         append one line per message received: its method, and for
                            tools/call the tool's name after a space ("tools/call echo")
  --require-header "NAME: VALUE"
                            HTTP: refuse every request without this header and value
                            with 401 (an API key the client's config must send)

Tools: echo(text), add(a, b), slow(seconds), crash() (exits 4 mid-call), big(bytes),
fail(message), rpc_error(), image(), structured(), strict(n, mode, tags), needs_env(), pid().
"""
import argparse
import base64
import os
import struct
import sys
import threading
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "internal-tools"))
from mcp_stdlib import (HANG, RpcError, Server, Tool, ToolError,  # noqa: E402
                        add_transport_arguments, json_result, log, serve, text_result)

EXIT_DIE_ON_START = 3
EXIT_CRASH = 4
EXIT_AFTER_INIT = 5
MAX_BIG_BYTES = 64 << 20
MAX_SLOW_SECONDS = 600


def _png(width, height, rgb):
    """A valid RGB PNG of one colour, built by hand: signature, IHDR, IDAT, IEND."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + \
            struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" +
            chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


PNG = _png(2, 2, (220, 30, 30))

NO_ARGS = {"type": "object", "properties": {}, "additionalProperties": False}


def _obj(required=(), **props):
    return {"type": "object", "properties": props, "required": list(required),
            "additionalProperties": False}


def _slow(args, call):
    seconds = args["seconds"]
    if call.cancelled.wait(seconds):
        return text_result("cancelled")  # dropped by the server: nobody gets this
    return text_result(f"slept {seconds:g} s")


def _crash(args, call):
    log("fixture", f"crash() called: exiting {EXIT_CRASH} in the middle of the call")
    os._exit(EXIT_CRASH)


def _big(args, call):
    n = args["bytes"]
    pattern = "0123456789abcdefghijklmnopqrstuvwxyz\n"
    return text_result((pattern * (n // len(pattern) + 1))[:n])


def _fail(args, call):
    raise ToolError(args["message"])


def _rpc_error(args, call):
    raise RpcError(-32000, "boom")


def _image(args, call):
    return {"content": [{"type": "image", "mimeType": "image/png",
                         "data": base64.b64encode(PNG).decode()}], "isError": False}


STRUCTURED = {"user": {"id": "u1", "name": "Ada", "tags": ["admin", "beta"],
                       "address": {"city": "Lyon", "zip": "69001"}},
              "scores": [1.5, 2, -3], "active": True, "note": None}


def _needs_env(args, call):
    return json_result({
        "fixture_secret": os.environ.get("FIXTURE_SECRET"),
        "llm_api_key_visible": "AIRLOCK_LLM_API_KEY" in os.environ,
        "airlock_vars": sorted(k for k in os.environ if k.startswith("AIRLOCK_")),
    })


TOOLS = [
    Tool("echo", "Return the text unchanged, as text content.",
         _obj(["text"], text={"type": "string"}),
         lambda args, call: text_result(args["text"]),
         annotations={"readOnlyHint": True, "openWorldHint": False}),
    Tool("add", "Add two numbers: structuredContent {sum} and the same JSON as text.",
         _obj(["a", "b"], a={"type": "number"}, b={"type": "number"}),
         lambda args, call: json_result({"sum": args["a"] + args["b"]}),
         output_schema=_obj(["sum"], sum={"type": "number"})),
    Tool("slow", "Sleep this many seconds, then answer; notifications/cancelled stops it.",
         _obj(["seconds"], seconds={"type": "number", "minimum": 0,
                                    "maximum": MAX_SLOW_SECONDS}), _slow),
    Tool("crash", f"Exit the whole server (status {EXIT_CRASH}) in the middle of the call.",
         NO_ARGS, _crash),
    Tool("big", "Return this many bytes of ASCII text.",
         _obj(["bytes"], bytes={"type": "integer", "minimum": 0, "maximum": MAX_BIG_BYTES}),
         _big),
    Tool("fail", "A tool error: isError true with this message.",
         _obj(["message"], message={"type": "string"}), _fail),
    Tool("rpc_error", 'A JSON-RPC error instead of a result: code -32000, "boom".',
         NO_ARGS, _rpc_error),
    Tool("image", "A 2x2 red PNG as image content.", NO_ARGS, _image),
    Tool("structured", "A nested object as structuredContent (and as JSON text).", NO_ARGS,
         lambda args, call: json_result(STRUCTURED),
         output_schema={"type": "object", "required": ["user", "scores"]}),
    Tool("strict", "Echo validated arguments: n an integer 0..10, mode 'a' or 'b', tags "
                   "strings. For schema validation tests.",
         _obj(["n", "mode"], n={"type": "integer", "minimum": 0, "maximum": 10},
              mode={"type": "string", "enum": ["a", "b"]},
              tags={"type": "array", "items": {"type": "string"}}),
         lambda args, call: json_result(dict(args))),
    Tool("needs_env", "What the server's environment holds: FIXTURE_SECRET's value, whether "
                      "AIRLOCK_LLM_API_KEY is set, and the names of AIRLOCK_* variables.",
         NO_ARGS, _needs_env),
    Tool("pid", "The server's process id.", NO_ARGS,
         lambda args, call: json_result({"pid": os.getpid()}),
         output_schema=_obj(["pid"], pid={"type": "integer"})),
]

RUN_PYTHON = Tool(
    "run_python", "The fixture's run_python, named like airlock's own tool to test clashes. "
                  "It runs nothing: it says whose it is.",
    _obj(["code"], code={"type": "string"}),
    lambda args, call: text_result(f"fixture run_python, not airlock's ({len(args['code'])} "
                                   "characters of code ignored)"))


class StateFile:
    """One line per message received, appended and flushed at once, so a test reads what
    reached the server even if it is killed right after."""

    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()

    def record(self, msg, session):
        line = msg["method"]
        if line == "tools/call" and isinstance(msg.get("params"), dict):
            line += f" {msg['params'].get('name')}"
        with self.lock, open(self.path, "a", encoding="utf-8") as f:
            f.write(line.replace("\n", " ") + "\n")


class LateTool:
    """Counts calls across all the tools it wraps; the Nth call adds late_tool, and the
    server tells every session that the list changed."""

    def __init__(self, server, after):
        self.server = server
        self.after = after
        self.calls = 0
        self.lock = threading.Lock()

    def wrap(self, tool):
        def handler(args, call):
            try:
                return tool.handler(args, call)
            finally:
                with self.lock:
                    self.calls += 1
                    now = self.calls == self.after
                if now:
                    self.server.add_tool(Tool(
                        "late_tool", f"Added after {self.after} tool calls.", NO_ARGS,
                        lambda a, c: text_result("late_tool answers")), call)

        return Tool(tool.name, tool.description, tool.input_schema, handler, title=tool.title,
                    output_schema=tool.output_schema, annotations=tool.annotations)


def _positive(text):
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a positive integer")
    return int(text)


def _header(text):
    name, sep, value = text.partition(":")
    if not sep or not name.strip() or not value.strip():
        raise argparse.ArgumentTypeError(f"'{text}' is not 'NAME: VALUE'")
    return name.strip(), value.strip()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\nFlags:")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_transport_arguments(parser)
    parser.add_argument("--die-on-start", action="store_true",
                        help=f"exit {EXIT_DIE_ON_START} at once, with a message on stderr")
    parser.add_argument("--hang-initialize", action="store_true",
                        help="never answer initialize")
    parser.add_argument("--exit-after-init", action="store_true",
                        help=f"exit {EXIT_AFTER_INIT} right after notifications/initialized")
    parser.add_argument("--tools-changed-after", metavar="N", type=_positive,
                        help="after N tool calls, add late_tool and send list_changed")
    parser.add_argument("--sse", action="store_true",
                        help="HTTP: answer POSTs as text/event-stream, a notification first")
    parser.add_argument("--page-size", metavar="N", type=_positive,
                        help="paginate tools/list, N tools a page")
    parser.add_argument("--name-clash", action="store_true",
                        help="also expose a tool named run_python")
    parser.add_argument("--state-file", metavar="PATH",
                        help="append one line per received method to PATH")
    parser.add_argument("--require-header", metavar="'NAME: VALUE'", type=_header,
                        help="HTTP: answer 401 to requests without this header")
    args = parser.parse_args(argv)
    if args.die_on_start:
        log("fixture", f"--die-on-start: exiting {EXIT_DIE_ON_START} before serving")
        return EXIT_DIE_ON_START
    if args.sse and not args.http:
        parser.error("--sse is a streamable HTTP behaviour: give --http HOST:PORT too")

    server = Server("fixture", "1.0.0", title="airlock's MCP test fixture",
                    page_size=args.page_size, logging=True)
    tools = TOOLS + ([RUN_PYTHON] if args.name_clash else [])
    if args.tools_changed_after:
        late = LateTool(server, args.tools_changed_after)
        tools = [late.wrap(t) for t in tools]
    for tool in tools:
        server.add_tool(tool)
    if args.require_header:
        if not args.http:
            parser.error("--require-header is an HTTP behaviour: give --http HOST:PORT too")
        name, value = args.require_header
        server.http_check = lambda headers: None if headers.get(name) == value else \
            f"missing or wrong {name} header"
    if args.state_file:
        server.on_message = StateFile(args.state_file).record
    if args.hang_initialize:
        server.methods["initialize"] = lambda params, call: HANG
    if args.exit_after_init:
        server.notifications["notifications/initialized"] = \
            lambda params, session: server.exit_after_reply(EXIT_AFTER_INIT)
    serve(server, args.http, sse=args.sse)
    return 0


if __name__ == "__main__":
    sys.exit(main())
