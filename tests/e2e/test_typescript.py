"""TypeScript cells and ESM imports (issue 25): `language: "typescript"` (or "ts") is transpiled by
Debian's TypeScript compiler inside the session's Node REPL and runs in that same REPL, so a
TypeScript cell and a JavaScript cell share their variables; a type error does not stop a cell,
a syntax error is the cell's error. JavaScript and TypeScript cells accept static `import`
declarations of Node's built-ins and of packages in /work/node_modules, bound in the session's
scope for the next cells. Profiles without javascript refuse typescript. One daemon for the
module; every test deletes its sessions, whatever happened."""
import os

import pytest

from airlock_daemon import daemon_fixture, sessions_fixture
from node_cells import cell, failed, ok

if not os.access("/usr/bin/node", os.X_OK):
    pytest.skip("typescript sessions need Node.js (/usr/bin/node): apt-get install nodejs",
                allow_module_level=True)
if not os.path.isfile("/usr/share/nodejs/typescript/package.json"):
    pytest.skip("typescript sessions need Debian's TypeScript compiler "
                "(/usr/share/nodejs/typescript): apt-get install node-typescript",
                allow_module_level=True)

daemon = daemon_fixture(pytest)
sessions = sessions_fixture(pytest)


def test_types_and_interfaces_run_and_share_variables_with_javascript(daemon, sessions):
    sid = sessions.new()
    out = ok(cell(daemon, sid, "interface Point { x: number; y: number }\n"
                  "type Pair<T> = [T, T];\n"
                  "const p: Point = { x: 3, y: 4 };\n"
                  "function norm(q: Point): number { return Math.hypot(q.x, q.y) }\n"
                  "enum Color { Red = 'red', Green = 'green' }\n"
                  "class Box<T> { constructor(public value: T) {} }\n"
                  "let pair: Pair<string> = ['a', 'b'];\n"
                  "console.log('norm', norm(p));\n"
                  "norm(p) as number", "typescript"))
    assert out["stdout"] == "norm 5\n"
    assert out["result"] == "5"
    # The JavaScript cell sees what the TypeScript cell declared, and the other way round.
    assert ok(cell(daemon, sid, "[p.x, pair.join(''), Color.Green, new Box(7).value]",
                   "javascript"))["result"] == "[ 3, 'ab', 'green', 7 ]"
    ok(cell(daemon, sid, "let fromJs = 40", "javascript"))
    assert ok(cell(daemon, sid, "const sum: number = fromJs + 2; sum", "ts"))["result"] == "42"
    # Top-level await works in TypeScript cells as in JavaScript ones.
    assert ok(cell(daemon, sid, "const later: number = await Promise.resolve(sum + 1); later",
                   "typescript"))["result"] == "43"


def test_type_error_still_runs(daemon, sessions):
    sid = sessions.new()
    out = ok(cell(daemon, sid, "const n: number = 'not a number';\nn + '!'", "typescript"))
    assert out["result"] == "'not a number!'"


def test_syntax_error_is_the_cells_error(daemon, sessions):
    sid = sessions.new()
    err = failed(cell(daemon, sid, "const a: number = 1;\nlet b = ;", "typescript"))
    assert err["name"] == "SyntaxError"
    assert "Expression expected" in err["value"] and "<cell-1>:2:9" in err["value"], err
    # A runtime error keeps its name and message, as in JavaScript cells.
    err = failed(cell(daemon, sid, "interface Shape {\n  area: number;\n}\n\n"
                           "const o: any = null;\no.field", "typescript"))
    assert err["name"] == "TypeError" and "null" in err["value"], err
    # The stack shows the line the user wrote (6), not the transpiled JavaScript's (1).
    assert "<cell-2>:6:" in err["traceback"], err
    # The session lives on.
    assert ok(cell(daemon, sid, "const a: number = 1; a", "ts"))["result"] == "1"


def test_typescript_cells_import_too(daemon, sessions):
    sid = sessions.new()
    out = ok(cell(daemon, sid, "import fs from 'node:fs';\n"
                  "import type { Stats } from 'node:fs';\n"
                  "import { join, type ParsedPath } from 'path';\n"
                  "const where: string = join('/', 'work');\n"
                  "const st: Stats = fs.statSync(where);\n"
                  "[where, st.isDirectory()]", "typescript"))
    assert out["result"] == "[ '/work', true ]", out
    # A binding only a later cell uses is kept (the compiler would drop it in a module).
    ok(cell(daemon, sid, "import { readdirSync } from 'fs'", "typescript"))
    assert ok(cell(daemon, sid, "readdirSync('/').includes('work')",
                   "javascript"))["result"] == "true"


def test_python_only_profile_refuses_typescript(daemon, sessions):
    sid = sessions.new(profile="minimal")
    for language in ("typescript", "ts"):
        r = daemon.post(f"/v1/sessions/{sid}/execute",
                        json={"code": "const a: number = 1", "language": language})
        assert r.status_code == 400, r.text
        assert "profile 'minimal' does not allow typescript" in r.json()["error"], r.text


def test_unknown_language_names_typescript(daemon, sessions):
    sid = sessions.new()
    r = daemon.post(f"/v1/sessions/{sid}/execute", json={"code": "1", "language": "tsx"})
    assert r.status_code == 400, r.text
    assert "typescript" in r.json()["error"], r.text


def test_profiles_list_typescript(daemon):
    profiles = {p["name"]: p for p in daemon.get("/v1/profiles").json()["profiles"]}
    assert "typescript" in profiles["default"]["languages"]
    assert "typescript" not in profiles["minimal"]["languages"]


def test_one_shot_execute_typescript(daemon):
    r = daemon.post("/execute", json={"code": "const x: string = 'one'; x + ' shot'",
                                      "language": "ts"})
    assert r.status_code == 200, r.text
    assert r.json()["result"] == "'one shot'", r.text


def test_cli_run_typescript(run):
    r = run("interface A { v: number }\nconst a: A = { v: 6 };\nconsole.log(a.v * 7)",
            "-l", "ts")
    assert r["status"] == "ok" and r["stdout"] == "42\n", r
