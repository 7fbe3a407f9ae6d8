"""Row 42: the JavaScript REPL (language "javascript") is a new process in the sandbox, so the
attacks of the Python rows are tried again from Node: read the environment and /proc of every
process for the daemon's secrets, read the host's files, spawn past the pids limit, and reach
io_uring, which seccomp denies (libuv must fall back, not die). The host guard checks that no
process is left afterwards."""
import json

import pytest

from conftest import SECRET_ENV, run

pytestmark = pytest.mark.skipif(
    not __import__("os").access("/usr/bin/node", __import__("os").X_OK),
    reason="no /usr/bin/node on this host: javascript cells cannot run")


def js(code, **kw):
    return run(code, language="javascript", **kw)


def test_node_sees_no_secrets():
    res = js(r'''
const fs = require('fs');
let blob = JSON.stringify(process.env);
for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
  for (const f of ['environ', 'cmdline']) {
    try { blob += fs.readFileSync(`/proc/${pid}/${f}`, 'latin1'); } catch {}
  }
}
console.log(blob.replace(/\0/g, '\n'));
''')
    assert res.status == "ok", res.describe()
    for name, value in SECRET_ENV.items():
        assert value not in res.out, f"{name} reached the JavaScript REPL"


def test_node_cannot_read_or_write_the_host():
    res = js(r'''
const fs = require('fs');
const out = {};
for (const p of ['/etc/shadow', '/root/.bashrc', '/proc/1/root/etc/shadow']) {
  try { fs.readFileSync(p); out[p] = 'read'; } catch (e) { out[p] = e.code; }
}
for (const p of ['/etc/airlock-hostile-node', '/usr/airlock-hostile-node']) {
  try { fs.writeFileSync(p, 'x'); out[p] = 'written'; } catch (e) { out[p] = e.code; }
}
console.log(JSON.stringify(out));
''')
    assert res.status == "ok", res.describe()
    seen = json.loads(res.out.strip().splitlines()[-1])
    assert "read" not in seen.values() and "written" not in seen.values(), seen


@pytest.mark.slow
def test_node_spawn_bomb_hits_pids_limit():
    res = js(r'''
const { spawn } = require('child_process');
let n = 0, err = null;
const kids = [];
for (; n < 5000; n++) {
  try {
    const c = spawn('/bin/sleep', ['60'], { stdio: 'ignore' });
    c.on('error', (e) => { err = err || e.code; });
    kids.push(c);
  } catch (e) { err = e.code; break; }
}
await new Promise((r) => setTimeout(r, 500));
for (const c of kids) { try { c.kill('SIGKILL'); } catch {} }
console.log(JSON.stringify({ n, err }));
''', timeout=60)
    assert res.status == "ok", res.describe()
    seen = json.loads(res.out.strip().splitlines()[-1])
    assert seen["err"] == "EAGAIN", seen


def test_file_io_works_under_the_io_uring_denial():
    """Where libuv tries io_uring for file I/O (some Node 20 builds), seccomp answers EPERM: it
    must fall back to its thread pool, and asynchronous file reads still work."""
    res = js(r'''
const fs = require('fs');
fs.writeFileSync('/work/a.txt', 'hello');
await fs.promises.readFile('/work/a.txt', 'utf8');
''')
    assert res.status == "ok" and res.json["result"] == "'hello'", res.describe()
