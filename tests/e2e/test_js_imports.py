"""Static ESM imports in JavaScript cells (issue 25): `import fs from 'node:fs'`, named, namespace,
default-and-named and side-effect imports of Node's built-ins and of packages in
/work/node_modules (CommonJS and ESM) are loaded before the cell runs and bound in the session's
scope for the next cells; strings and comments that say `import` are left alone; `export` is
dropped and re-exports refused. One daemon for the module; every test deletes its sessions,
whatever happened."""
import os

import pytest

from airlock_daemon import daemon_fixture, sessions_fixture
from node_cells import cell, failed, ok

if not os.access("/usr/bin/node", os.X_OK):
    pytest.skip("javascript sessions need Node.js (/usr/bin/node): apt-get install nodejs",
                allow_module_level=True)

daemon = daemon_fixture(pytest)
sessions = sessions_fixture(pytest)


def test_esm_import_forms(daemon, sessions):
    sid = sessions.new()
    ok(cell(daemon, sid, "open('/work/in.txt', 'w').write('from a file')", "python"))
    out = ok(cell(daemon, sid, "import fs from 'node:fs';\n"
                  "import { readFileSync } from 'fs';\n"
                  "import * as path from 'path';\n"
                  "import os, { cpus } from 'os';\n"
                  "import 'node:util';\n"
                  "// import nothing from 'a comment'\n"
                  "const s = \"import x from 'a string'\";\n"
                  "[fs.readFileSync('/work/in.txt', 'utf8'), readFileSync('in.txt', 'utf8'),\n"
                  " path.join('a', 'b'), typeof os.cpus, typeof cpus, s]", "javascript"))
    assert out["result"] == ("[\n  'from a file',\n  'from a file',\n  'a/b',\n  'function',\n"
                             "  'function',\n  \"import x from 'a string'\"\n]"), out
    # The bindings stay in the session's scope, and a cell may import the same names again.
    assert ok(cell(daemon, sid, "path.basename('/x/y.txt')", "javascript"))["result"] == "'y.txt'"
    assert ok(cell(daemon, sid, "import path from 'node:path'; path.sep",
                   "javascript"))["result"] == "'/'"


def test_import_of_a_package_in_work_node_modules(daemon, sessions):
    sid = sessions.new()
    ok(cell(daemon, sid,
           "import os\n"
           "os.makedirs('/work/node_modules/greet', exist_ok=True)\n"
           "open('/work/node_modules/greet/package.json', 'w').write("
           "'{\"name\": \"greet\", \"version\": \"1.0.0\", \"main\": \"index.js\"}')\n"
           "open('/work/node_modules/greet/index.js', 'w').write("
           "'exports.hello = (n) => `hello ${n}`; exports.answer = 42;')\n"
           "os.makedirs('/work/node_modules/esm-only', exist_ok=True)\n"
           "open('/work/node_modules/esm-only/package.json', 'w').write("
           "'{\"name\": \"esm-only\", \"type\": \"module\", \"exports\": \"./main.js\"}')\n"
           "open('/work/node_modules/esm-only/main.js', 'w').write("
           "'export default function twice(x) { return 2 * x }\\nexport const kind = \"esm\";')\n",
           "python"))
    out = ok(cell(daemon, sid, "import greet, { hello } from 'greet';\n"
                  "import twice, { kind } from 'esm-only';\n"
                  "[hello('js'), greet.answer, twice(21), kind]", "javascript"))
    assert out["result"] == "[ 'hello js', 42, 42, 'esm' ]"
    err = failed(cell(daemon, sid, "import { nothing } from 'greet'", "javascript"))
    assert err["name"] == "SyntaxError"
    assert "does not provide an export named 'nothing'" in err["value"], err
    err = failed(cell(daemon, sid, "import x from 'no-such-package'", "javascript"))
    assert "Cannot find package 'no-such-package'" in err["value"], err
    assert "node_modules of /work" in err["value"], err


def test_exports_are_dropped_and_reexports_refused(daemon, sessions):
    sid = sessions.new()
    ok(cell(daemon, sid, "export const exported = 5;\nexport function f() { return 6 }",
            "javascript"))
    assert ok(cell(daemon, sid, "exported + f()", "javascript"))["result"] == "11"
    assert ok(cell(daemon, sid, "export default { a: 1 }", "javascript"))["result"] == "{ a: 1 }"
    err = failed(cell(daemon, sid, "export * from 'fs'", "javascript"))
    assert err["name"] == "SyntaxError" and "re-export" in err["value"], err


def test_import_over_an_earlier_const_is_refused(daemon, sessions):
    sid = sessions.new()
    ok(cell(daemon, sid, "const fs = 1", "javascript"))
    err = failed(cell(daemon, sid, "import fs from 'fs'", "javascript"))
    assert err["name"] == "SyntaxError" and "already been declared" in err["value"], err
    assert ok(cell(daemon, sid, "fs", "javascript"))["result"] == "1"


@pytest.mark.skipif(not os.path.isfile("/usr/share/nodejs/typescript/package.json"),
                    reason="needs a global package in the image: Debian's node-typescript")
def test_import_and_require_of_a_global_package_of_the_image(daemon, sessions):
    sid = sessions.new()
    out = ok(cell(daemon, sid, "import ts from 'typescript';\n"
                  "[typeof ts.transpileModule, typeof require('typescript').version]",
                  "javascript"))
    assert out["result"] == "[ 'function', 'string' ]", out
    # NODE_PATH was set only while Node read it.
    assert ok(cell(daemon, sid, "process.env.NODE_PATH", "javascript"))["result"] is None


def test_a_package_that_never_finishes_loading_times_out(daemon, sessions):
    sid = sessions.new()
    ok(cell(daemon, sid,
            "import os\n"
            "os.makedirs('/work/node_modules/spin', exist_ok=True)\n"
            "open('/work/node_modules/spin/index.js', 'w').write('for (;;) {}')\n"
            "kept = 'python state'", "python"))
    out = daemon.execute(sid, "import 'spin'", language="javascript", timeout_s=2)
    assert out["status"] == "timeout", out
    assert out["state"] == "preserved", out
    assert ok(cell(daemon, sid, "kept", "python"))["result"] == "'python state'"
    assert ok(cell(daemon, sid, "1 + 1", "javascript"))["result"] == "2"
