// The official E2B SDK (@e2b/code-interpreter, unmodified) against airlock's /e2b surface for
// what E2B's server adds to IPython's results: result.data for a pandas DataFrame, result.chart
// for a matplotlib figure (line, scatter, bar, pie, box and whisker, superchart, unknown),
// result.json, result.extra and isMainResult, also through onResult as the cell displays them;
// and /home/user as the sandbox's working directory and HOME (a mount of the workspace), kept
// across pause and connect, while a native session keeps /work. The daemon is this file's own
// (lib/e2b-sandbox.mjs), stopped by its pid at the end, the sandboxes killed.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';

import { startE2bSandbox } from './lib/e2b-sandbox.mjs';

describe('the E2B SDK: results and home', () => {
  let env;
  let sbx;

  before(async () => {
    env = await startE2bSandbox();
    sbx = env.sbx;
  });
  after(async () => {
    await env?.stop();
  });

  describe('results: data, charts, json, extra', () => {
    async function chartOf(code) {
      const ex = await sbx.runCode(`import matplotlib.pyplot as plt\n${code}`);
      assert.equal(ex.error, undefined, JSON.stringify(ex.error));
      const charts = ex.results.filter((r) => r.chart);
      assert.equal(charts.length, 1, JSON.stringify(ex.results.map((r) => r.formats())));
      assert.ok(charts[0].png, 'the figure is a PNG too');
      return charts[0].chart;
    }

    test('a DataFrame value has data (its columns), html and text, as the main result', async () => {
      const ex = await sbx.runCode(
        "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y'], 'c': [0.5, None]})");
      const main = ex.results.filter((r) => r.isMainResult);
      assert.equal(main.length, 1);
      assert.deepEqual(main[0].data, { a: [1, 2], b: ['x', 'y'], c: [0.5, null] });
      assert.match(main[0].html, /<table/);
      assert.match(main[0].text, /a\s+b\s+c/);
      assert.ok(main[0].formats().includes('data'));
    });

    test('line chart with its elements, labels, units, ticks and scale', async () => {
      const chart = await chartOf(
        "plt.plot([1, 2, 3], [1, 4, 9], label='sq')\nplt.title('growth')\n" +
        "plt.xlabel('time (s)')\nplt.ylabel('size')\nplt.show()");
      assert.equal(chart.type, 'line');
      assert.equal(chart.title, 'growth');
      assert.equal(chart.x_label, 'time (s)');
      assert.equal(chart.x_unit, 's');
      assert.equal(chart.y_unit, null);
      assert.equal(chart.x_scale, 'linear');
      assert.ok(chart.x_ticks.length > 0 && chart.x_ticks.length === chart.x_tick_labels.length);
      assert.deepEqual(chart.elements, [{ label: 'sq', points: [[1, 1], [2, 4], [3, 9]] }]);
    });

    test('scatter, bar, pie and box-and-whisker charts', async () => {
      const scatter = await chartOf("plt.scatter([1, 2], [3, 4], label='pts')");
      assert.equal(scatter.type, 'scatter');
      assert.deepEqual(scatter.elements, [{ label: 'pts', points: [[1, 3], [2, 4]] }]);

      const bar = await chartOf("plt.bar(['a', 'b'], [3, 1], label='n')\nplt.ylabel('count')");
      assert.equal(bar.type, 'bar');
      assert.equal(bar.y_label, 'count');
      assert.deepEqual(bar.elements,
        [{ label: 'a', value: 3, group: 'n' }, { label: 'b', value: 1, group: 'n' }]);

      const pie = await chartOf("plt.pie([1, 1, 2], labels=['p', 'q', 'r'])");
      assert.equal(pie.type, 'pie');
      assert.deepEqual(pie.elements.map((e) => [e.label, e.angle, e.radius]),
        [['p', 90, 1], ['q', 90, 1], ['r', 180, 1]]);

      const box = await chartOf(
        "plt.boxplot([[1, 2, 3, 4, 5], [2, 4, 6, 8, 10, 40]], labels=['a', 'b'], " +
        "patch_artist=True)\nplt.xlabel('group')\nplt.ylabel('score')");
      assert.equal(box.type, 'box_and_whisker');
      assert.deepEqual([box.x_label, box.y_label], ['group', 'score']);
      assert.deepEqual(box.elements[0], { label: 'a', min: 1, first_quartile: 2, median: 3,
        third_quartile: 4, max: 5, outliers: [] });
      assert.deepEqual(box.elements[1].outliers, [40]);
    });

    test('several axes are a superchart; an image axes is unknown', async () => {
      const chart = await chartOf(
        "fig, (a, b) = plt.subplots(1, 2)\nfig.suptitle('two')\na.plot([1, 2])\n" +
        "b.imshow([[1, 2], [3, 4]])\nfig");
      assert.equal(chart.type, 'superchart');
      assert.equal(chart.title, 'two');
      assert.deepEqual(chart.elements.map((c) => c.type), ['line', 'unknown']);
    });

    test('a chart extraction that raises leaves the PNG and the cell ok', async () => {
      const ex = await sbx.runCode(
        'import matplotlib.pyplot as plt\nfrom matplotlib.figure import Figure\n' +
        'class Weird(Figure):\n    armed = False\n    def get_axes(self):\n' +
        "        if self.armed:\n            raise RuntimeError('hostile')\n" +
        '        return super().get_axes()\n' +
        'fig = plt.figure(FigureClass=Weird)\nfig.add_subplot().plot([1, 2])\n' +
        'fig.armed = True\nplt.show()\n7');
      assert.equal(ex.error, undefined);
      assert.equal(ex.text, '7');
      const figs = ex.results.filter((r) => r.png);
      assert.equal(figs.length, 1);
      assert.equal(figs[0].chart, undefined);
      assert.match(ex.logs.stderr.join(''), /no chart for this figure: RuntimeError: hostile/);
    });

    test('display() results reach onResult as they happen, with data and chart', async () => {
      const seen = [];
      const ex = await sbx.runCode(
        'import pandas as pd, matplotlib.pyplot as plt, time\n' +
        "display(pd.DataFrame({'k': [1]}))\nfig = plt.figure()\nplt.plot([0, 1])\n" +
        "display(fig)\nplt.close(fig)\nprint('shown', flush=True)\ntime.sleep(0.5)\n" +
        "print('end')",
        {
          onResult: (r) => seen.push({ at: Date.now(), data: r.data, chart: r.chart?.type }),
          onStdout: (m) => seen.push({ at: Date.now(), line: m.line }),
        });
      assert.equal(ex.error, undefined);
      assert.deepEqual(seen.filter((s) => !s.line).map((s) => [s.data, s.chart]),
        [[{ k: [1] }, undefined], [undefined, 'line']]);
      const end = seen.find((s) => s.line === 'end\n');
      const results = seen.filter((s) => !s.line);
      assert.ok(results.every((r) => r.at <= end.at - 300), 'both came before the cell ended');
    });

    test('json is the parsed object; other MIME types are in extra; isMainResult', async () => {
      const ex = await sbx.runCode(
        "from IPython.display import JSON, display\ndisplay(JSON({'k': [1, 2]}))\n" +
        "class X:\n    def _repr_mimebundle_(self, **kw):\n" +
        "        return {'application/x-thing': 'thing', 'text/plain': 'X!'}\nX()");
      assert.equal(ex.error, undefined);
      const [shown, main] = ex.results;
      assert.equal(shown.isMainResult, false);
      assert.deepEqual(shown.json, { k: [1, 2] });
      assert.equal(main.isMainResult, true);
      assert.equal(main.text, 'X!');
      assert.deepEqual(main.extra, { 'application/x-thing': 'thing' });
      assert.deepEqual(main.raw.extra, { 'application/x-thing': 'thing' },
        "E2B's own extra, which the Python SDK reads");
      assert.equal(ex.text, 'X!');
    });
  });

  describe('sandboxes live in /home/user', () => {

    async function text(code, opts) {
      const ex = await sbx.runCode(code, opts);
      assert.equal(ex.error, undefined, JSON.stringify(ex.error));
      return opts?.language === 'bash' ? ex.logs.stdout.join('') : ex.text;
    }

    async function native(method, path, body) {
      const r = await fetch(`${env.daemon.url}${path}`, {
        method,
        headers: { Authorization: `Bearer ${env.daemon.token}`, 'Content-Type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      assert.ok(r.ok, `${method} ${path}: ${r.status} ${await r.clone().text()}`);
      return r;
    }

    test('os.getcwd(), pwd, HOME and process.cwd() say /home/user', async () => {
      assert.equal(await text('import os\nos.getcwd() + " " + os.environ["HOME"]'),
        '/home/user /home/user');
      assert.equal(await text('pwd; pwd -P; echo $HOME; cd ~ && pwd', { language: 'bash' }),
        '/home/user\n/home/user\n/home/user\n/home/user\n');
      const cmd = await sbx.commands.run('pwd; echo $HOME');
      assert.equal(cmd.stdout, '/home/user\n/home/user\n');
      assert.equal(await text('process.cwd() + " " + process.env.HOME', { language: 'js' }),
        '/home/user /home/user');
    });

    test('files written by runCode, by files.write and the native files API are the same', async () => {
      const id = `s-${sbx.sandboxId}`;
      await text('open("by-code.txt", "w").write("from code")');
      assert.equal(await sbx.files.read('/home/user/by-code.txt'), 'from code');
      assert.equal(await (await native('GET', `/v1/sessions/${id}/files/by-code.txt`)).text(),
        'from code');
      await sbx.files.write('/home/user/sub/by-sdk.txt', 'from the sdk');
      assert.equal(await text('open("/work/sub/by-sdk.txt").read()'), 'from the sdk');
      assert.equal(await text('open("sub/by-sdk.txt").read()'), 'from the sdk');
    });

    test('a chdir stays for the next cell, a context cwd is below /home/user', async () => {
      await text('import os\nos.makedirs("deep/er", exist_ok=True)\nos.chdir("deep")');
      assert.equal(await text('os.getcwd()'), '/home/user/deep');
      const ctx = await sbx.createCodeContext({ cwd: '/home/user/deep/er' });
      // A created context is an interpreter of its own: it imports os itself.
      assert.equal(await text('import os\nos.getcwd()', { context: ctx }), '/home/user/deep/er');
      await text('os.chdir("/home/user")');
    });

    test('pause and connect keep /home/user', async () => {
      const { Sandbox } = await import('@e2b/code-interpreter');
      await text('x = 42');
      await text('cd ~', { language: 'bash' }); // the shell's state is saved too
      assert.equal(await sbx.pause(), true);
      const again = await Sandbox.connect(sbx.sandboxId);
      const ex = await again.runCode('import os\n(x, os.getcwd(), os.environ["HOME"])');
      assert.equal(ex.error, undefined, JSON.stringify(ex.error));
      assert.equal(ex.text, "(42, '/home/user', '/home/user')");
      const sh = await again.runCode('pwd; echo $HOME', { language: 'bash' });
      assert.equal(sh.logs.stdout.join(''), '/home/user\n/home/user\n');
    });

    test('an image saved to a path is also displayed, as E2B\'s kernels do', async () => {
      const ex = await sbx.runCode('from PIL import Image\n' +
        "im = Image.new('RGBA', (16, 16), 'blue')\nim.save('saved.png')\nprint('done')");
      assert.equal(ex.error, undefined, JSON.stringify(ex.error));
      assert.equal(ex.results.length, 1);
      assert.ok(Buffer.from(ex.results[0].png, 'base64').subarray(1, 4).toString() === 'PNG');
      assert.equal(await sbx.files.exists('/home/user/saved.png'), true);
    });

    test('a native session keeps /work, and an image save is only a save there', async () => {
      const made = await (await native('POST', '/v1/sessions', {})).json();
      try {
        const out = await (await native('POST', `/v1/sessions/${made.id}/execute`,
          { code: 'import os\nos.getcwd() + " " + os.environ["HOME"]' })).json();
        assert.equal(out.result, "'/work /work'");
        const saved = await (await native('POST', `/v1/sessions/${made.id}/execute`,
          { code: "from PIL import Image\nImage.new('RGB', (4, 4)).save('s.png')" })).json();
        assert.equal(saved.status, 'ok', JSON.stringify(saved.error));
        assert.deepEqual(saved.outputs, []);
      } finally {
        await native('DELETE', `/v1/sessions/${made.id}`);
      }
    });
  });
});
