// The JavaScript REPL of a session (node.c starts it with the first javascript cell): one Node
// process whose global scope holds the session's variables. Cells come in on fd 3, one JSON line
// each ({"code", "cell", "ts"?, "env"?, "cwd"?}), and each answer goes out on fd 4 as one JSON line
// ({"status", "result", "error"}). User output goes straight to fds 1 and 2, the sandbox's pipes.
//
// A cell is a vm.Script run in this context, so that top-level let/const/class/function stay
// declared for the next cell and the script's completion value is the result. A cell with a
// top-level await is first rewritten by Node's own REPL transform (internal/repl/await, hence
// --expose-internals): the same code the `node` REPL runs on Node 18 and 20, whose parser
// (acorn) ships inside node itself, so nothing else needs to be installed. A SIGINT stops a
// synchronous busy loop (breakOnSigint) or the wait for a pending promise.
//
// Static ESM import declarations (found by acorn, parsing the cell as a module) are taken out of
// the cell, loaded with import() before it runs, and bound as session variables (var, so that a
// cell may import again); `export` is dropped from declarations and lists, re-exports refused.
//
// A cell with {"ts": true} is TypeScript: Debian's compiler (TS_PATH, loaded with the first such
// cell, not before: it costs half a second) transpiles it without a type check, and the
// JavaScript it gives runs as any cell.
'use strict';
(() => {
  const fs = require('fs');
  const net = require('net');
  const path = require('path');
  const util = require('util');
  const vm = require('vm');
  const Module = require('module');
  const { processTopLevelAwait } = require('internal/repl/await');
  const acorn = require('internal/deps/acorn/acorn/dist/acorn');
  const { pathToFileURL } = require('url');
  const TS_PATH = '/usr/share/nodejs/typescript';
  let ts = null; // the TypeScript compiler, with the first TypeScript cell
  // The source maps of the TypeScript cells, by cell number, so that a stack shows the lines the
  // user wrote; the oldest go first past TS_MAPS_MAX (their frames keep JavaScript positions).
  const tsMaps = new Map();
  const TS_MAPS_MAX = 1000;

  // Taken now: user code may replace any of them on the global object.
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const writeSync = fs.writeSync;
  const inspect = util.inspect;
  const outputMax = Math.max(1024, Number(process.env.AIRLOCK_NODE_OUTPUT_MAX) || 1 << 20);
  delete process.env.AIRLOCK_NODE_OUTPUT_MAX;

  const REPLY_FD = 4;
  let pending = null; // resolve() of the cell awaiting its promise, for SIGINT

  // The image's global packages join require()'s global folders: Debian's node-* packages
  // (/usr/share/nodejs, /usr/lib/nodejs, which Debian's own node searches but nodesource's does
  // not) and npm's -g folders. NODE_PATH is set only while Node reads it, so that the user's
  // environment, and the processes it starts, stay as given.
  {
    const given = process.env.NODE_PATH;
    const global = ['/usr/share/nodejs', '/usr/lib/nodejs', '/usr/lib/node_modules', '/usr/local/lib/node_modules'];
    process.env.NODE_PATH = [given, ...global].filter(Boolean).join(path.delimiter);
    Module._initPaths();
    if (given === undefined) delete process.env.NODE_PATH;
    else process.env.NODE_PATH = given;
  }
  globalThis.require = Module.createRequire(path.join(process.cwd(), '<repl>'));
  globalThis.module = undefined;

  function cut(s) {
    if (typeof s !== 'string' || s.length <= outputMax) return s;
    return s.slice(0, outputMax) + `... [airlock: truncated at ${outputMax} characters]`;
  }

  function show(value) {
    try {
      return inspect(value, { depth: 4, maxArrayLength: 200, maxStringLength: outputMax });
    } catch (e) {
      return `<value that cannot be shown: ${String(e && e.message)}>`;
    }
  }

  // The stack without the driver's frames (the -e script, node:vm, and the runtime below the
  // user's outermost frame), so that a traceback shows <cell-N>:line:column.
  function traceback(e) {
    let stack;
    try {
      stack = e && typeof e.stack === 'string' ? e.stack : null;
    } catch {
      stack = null;
    }
    if (!stack) return '';
    const lines = stack.split('\n').filter((l) => !/\[eval\]|node:vm:|evalmachine/.test(l));
    let last = lines.length;
    while (last > 0 && /^\s+at /.test(lines[last - 1]) && !/<cell-\d+>/.test(lines[last - 1]))
      last--;
    const head = lines.slice(0, last);
    // A frame of the user's code may sit below runtime frames (a callback): keep all then.
    return tsPositions((head.some((l) => /<cell-\d+>/.test(l)) ? head : lines).join('\n'));
  }

  // <cell-N>:line:column of a TypeScript cell's JavaScript, as the line and column of its source.
  function tsPositions(text) {
    if (!tsMaps.size) return text;
    return text.replace(/<cell-(\d+)>:(\d+):(\d+)/g, (all, n, line, col) => {
      const map = tsMaps.get(Number(n));
      let at = null;
      try {
        at = map && map.findEntry(Number(line) - 1, Number(col) - 1);
      } catch {}
      if (!at || typeof at.originalLine !== 'number') return all;
      return `<cell-${n}>:${at.originalLine + 1}:${at.originalColumn + 1}`;
    });
  }

  function errorOf(e) {
    if (e instanceof Error || (e && typeof e === 'object' && 'stack' in e && 'message' in e)) {
      let name = 'Error';
      let value = '';
      try {
        name = String(e.name || (e.constructor && e.constructor.name) || 'Error');
        value = String(e.message);
      } catch {}
      if (e.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED') return interrupted();
      return { name, value, traceback: traceback(e) };
    }
    // throw 42, throw "text", a rejection with a plain value.
    return { name: 'Uncaught', value: show(e), traceback: '' };
  }

  function interrupted() {
    return { name: 'KeyboardInterrupt', value: 'the cell was interrupted', traceback: '' };
  }

  function answer(obj) {
    if (obj.result !== undefined && obj.result !== null) obj.result = cut(obj.result);
    if (obj.error) {
      obj.error.value = cut(obj.error.value);
      obj.error.traceback = cut(obj.error.traceback);
    }
    const text = stringify(obj) + '\n';
    const buf = Buffer.from(text);
    for (let off = 0; off < buf.length; ) off += writeSync(REPLY_FD, buf, off);
  }

  // Per-call environment and working directory: applied for one cell, then put back.
  function applyCall(req) {
    const saved = { env: null, cwd: null };
    if (req.env && typeof req.env === 'object') {
      saved.env = {};
      for (const [k, v] of Object.entries(req.env)) {
        saved.env[k] = Object.prototype.hasOwnProperty.call(process.env, k) ? process.env[k] : undefined;
        process.env[k] = String(v);
      }
    }
    if (typeof req.cwd === 'string') {
      saved.cwd = process.cwd();
      process.chdir(req.cwd);
    }
    return saved;
  }

  function restoreCall(saved) {
    if (saved.env)
      for (const [k, v] of Object.entries(saved.env)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    if (saved.cwd !== null) {
      try {
        process.chdir(saved.cwd);
      } catch {}
    }
  }

  // import() in a cell: Node's own loader where this Node has it (20.12 and later; relative
  // specifiers resolve against the working directory). Node 18 has no way without
  // --experimental-vm-modules, so there import() fails with Node's message and require() works.
  const importer = vm.constants && vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER;
  if (importer) {
    // Its ExperimentalWarning would land in the first cell that imports, as user output.
    const emitWarning = process.emitWarning;
    process.emitWarning = function (w, ...rest) {
      if (String((w && w.message) || w).includes('USE_MAIN_CONTEXT_DEFAULT_LOADER')) return;
      return emitWarning.call(this, w, ...rest);
    };
  }

  // The error a cell's own code causes before it runs, shown as V8 would show it.
  function cellError(name, message) {
    const e = new Error(message);
    e.name = name;
    e.stack = `${name}: ${message}`;
    return e;
  }

  // TypeScript to JavaScript, with types and interfaces erased and imports kept as written (for
  // moduleImports). Only syntax errors fail a cell: the compiler checks no types here.
  function transpile(code, filename) {
    if (!ts) {
      try {
        ts = require(TS_PATH);
      } catch (e) {
        throw cellError('Error', `typescript needs Debian's TypeScript compiler (${TS_PATH}, apt-get install node-typescript), which this profile's root filesystem lacks: ${e.message}`);
      }
    }
    const out = ts.transpileModule(code, {
      fileName: 'cell.ts',
      reportDiagnostics: true,
      compilerOptions: {
        sourceMap: true,
        target: ts.ScriptTarget.ES2022,
        module: ts.ModuleKind.ESNext,
        moduleDetection: ts.ModuleDetectionKind.Force,
        preserveValueImports: true,
        isolatedModules: true,
        esModuleInterop: true,
        jsx: ts.JsxEmit.Preserve,
      },
    });
    const bad = (out.diagnostics || []).find((d) => d.category === ts.DiagnosticCategory.Error);
    if (bad) {
      let where = '';
      if (bad.file && typeof bad.start === 'number') {
        const { line, character } = bad.file.getLineAndCharacterOfPosition(bad.start);
        where = ` (${filename}:${line + 1}:${character + 1})`;
      }
      throw cellError('SyntaxError', ts.flattenDiagnosticMessageText(bad.messageText, '\n') + where);
    }
    let map = null;
    try {
      map = new Module.SourceMap(parse(out.sourceMapText));
    } catch {}
    return { code: out.outputText.replace(/\n?\/\/# sourceMappingURL=.*$/, ''), map };
  }

  // code with [start, end) replaced by text padded to the same length, its newlines kept, so that
  // the cell's other lines and columns stay where the user wrote them.
  function splice(code, start, end, text = '') {
    let fill = text;
    for (let i = start + text.length; i < end; i++) fill += code[i] === '\n' ? '\n' : ' ';
    return code.slice(0, start) + fill + code.slice(end);
  }

  // The cell without its import declarations and export keywords, and the imports it asked for:
  // [{source, names: [[local, imported | '*' | 'default']]}]. A cell that does not parse as a
  // module is left alone (V8 then says what is wrong, or the cell was sloppy-mode script).
  function moduleImports(code) {
    const imports = [];
    if (!/\b(import|export)\b/.test(code)) return { code, imports };
    let tree;
    try {
      tree = acorn.parse(code, { ecmaVersion: 'latest', sourceType: 'module', allowHashBang: true, allowAwaitOutsideFunction: true });
    } catch {
      return { code, imports };
    }
    // Last to first, so that the positions of the earlier statements stay valid.
    for (const node of tree.body.slice().reverse()) {
      if (node.type === 'ImportDeclaration') {
        const names = node.specifiers.map((sp) =>
          sp.type === 'ImportDefaultSpecifier' ? [sp.local.name, 'default']
            : sp.type === 'ImportNamespaceSpecifier' ? [sp.local.name, '*']
              : [sp.local.name, sp.imported.type === 'Literal' ? sp.imported.value : sp.imported.name]);
        imports.unshift({ source: node.source.value, names });
        code = splice(code, node.start, node.end);
      } else if (node.type === 'ExportAllDeclaration' || (node.type === 'ExportNamedDeclaration' && node.source)) {
        throw cellError('SyntaxError', `a cell cannot re-export from '${node.source.value}': import what it needs instead`);
      } else if (node.type === 'ExportNamedDeclaration') {
        code = node.declaration ? splice(code, node.start, node.declaration.start) : splice(code, node.start, node.end);
      } else if (node.type === 'ExportDefaultDeclaration') {
        const d = node.declaration;
        const named = (d.type === 'FunctionDeclaration' || d.type === 'ClassDeclaration') && d.id;
        // The expression stays the cell's value: `void 0, {a: 1}` is not a block.
        code = splice(code, node.start, d.start, named ? '' : 'void 0,');
      }
    }
    return { code, imports };
  }

  // import(specifier) as the cell's own import would do it: Node's loader first (node: built-ins,
  // node_modules from the working directory up), then, for a package it does not find, the
  // folders require() searches (NODE_PATH, the global ones).
  async function load(source) {
    try {
      return await import(source);
    } catch (e) {
      if (e && e.code === 'ERR_MODULE_NOT_FOUND' && !/^[./]|^[a-z]+:/i.test(source)) {
        let found = null;
        try {
          found = Module.createRequire(path.join(process.cwd(), '<repl>')).resolve(source);
        } catch {}
        if (found) return import(pathToFileURL(found).href);
        // Node's message names an internal referrer ("imported from /work/[eval]").
        throw cellError('Error', `Cannot find package '${source}': it is not a Node built-in, nor in the node_modules of ${process.cwd()} or a folder above it, nor in NODE_PATH or the global folders`);
      }
      throw e;
    }
  }

  // Loads a cell's imports and declares their bindings in the session's scope, as var: a name a
  // let or const of an earlier cell holds is refused by V8 ("has already been declared").
  async function bindImports(imports, filename) {
    const values = [];
    const decls = [];
    for (const imp of imports) {
      const mod = await load(imp.source);
      for (const [local, imported] of imp.names) {
        let v;
        if (imported === '*') v = mod;
        else if (imported in mod) v = mod[imported];
        else if (imported !== 'default' && mod.default && typeof mod.default === 'object' && imported in mod.default) v = mod.default[imported];
        else throw cellError('SyntaxError', `The requested module '${imp.source}' does not provide an export named '${imported}'`);
        decls.push(`${local} = globalThis[Symbol.for('airlock.imports')][${values.length}]`);
        values.push(v);
      }
    }
    if (!decls.length) return;
    const key = Symbol.for('airlock.imports');
    globalThis[key] = values;
    try {
      new vm.Script(`var ${decls.join(', ')};`, { filename }).runInThisContext();
    } finally {
      delete globalThis[key];
    }
  }

  async function run(req) {
    const filename = `<cell-${req.cell}>`;
    let code = String(req.code);
    let wrapped = null;
    let value;

    try {
      if (req.ts) {
        const t = transpile(code, filename);
        code = t.code;
        if (t.map) {
          tsMaps.set(Number(req.cell), t.map);
          if (tsMaps.size > TS_MAPS_MAX) tsMaps.delete(tsMaps.keys().next().value);
        }
      }
      const cell = moduleImports(code);
      code = cell.code;
      if (cell.imports.length) await bindImports(cell.imports, filename);
    } catch (e) {
      return { status: 'error', result: null, error: errorOf(e) };
    }
    if (/\bawait\b/.test(code)) {
      try {
        wrapped = processTopLevelAwait(code);
      } catch (e) {
        return { status: 'error', result: null, error: errorOf(e) };
      }
    }
    try {
      const script = new vm.Script(wrapped || code, importer ? { filename, importModuleDynamically: importer } : { filename });
      value = script.runInThisContext({ breakOnSigint: true, displayErrors: false });
      if (wrapped) {
        // The rewritten cell is an async function's promise: {value} of its last expression.
        const settled = await new Promise((resolve) => {
          pending = resolve;
          value.then(
            (v) => resolve({ ok: true, v }),
            (e) => resolve({ ok: false, e })
          );
        });
        pending = null;
        if (settled.interrupted) return { status: 'error', result: null, error: interrupted() };
        if (!settled.ok) throw settled.e;
        value = settled.v && typeof settled.v === 'object' ? settled.v.value : undefined;
      }
    } catch (e) {
      pending = null;
      return { status: 'error', result: null, error: errorOf(e) };
    }
    return { status: 'ok', result: value === undefined ? null : show(value), error: null };
  }

  // A SIGINT while a cell waits for its promise ends the wait (the promise itself runs on);
  // one between cells is ignored rather than ending the REPL.
  process.on('SIGINT', () => {
    if (pending) pending({ interrupted: true });
  });
  // What user code leaves running must not end the REPL: it is reported on stderr.
  process.on('uncaughtException', (e) => {
    process.stderr.write(`Uncaught ${traceback(e) || show(e)}\n`);
  });
  process.on('unhandledRejection', (e) => {
    process.stderr.write(`Uncaught (in promise) ${e instanceof Error ? traceback(e) : show(e)}\n`);
  });

  const input = new net.Socket({ fd: 3, readable: true, writable: false });
  let buffered = '';
  let queue = Promise.resolve();
  input.setEncoding('utf8');
  input.on('data', (chunk) => {
    buffered += chunk;
    let nl;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      queue = queue.then(async () => {
        let req;
        try {
          req = parse(line);
        } catch {
          process.exit(70); // the runner never sends this: nothing to answer
        }
        let saved = { env: null, cwd: null };
        let out;
        try {
          saved = applyCall(req);
          out = await run(req);
        } catch (e) {
          out = { status: 'error', result: null, error: errorOf(e) };
        } finally {
          restoreCall(saved);
        }
        answer(out);
      });
    }
  });
  input.on('end', () => process.exit(0));
  // The REPL stays alive for the pipe alone: timers the user left do not decide.
  answer({ status: 'ready' });
})();
