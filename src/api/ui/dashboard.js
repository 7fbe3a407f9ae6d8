// airlock's dashboard (docs/DASHBOARD.md): polls the daemon's JSON API with the token the
// operator typed, and draws what it gets. Two rules hold everywhere below:
//  - the token lives in this closure's variable only: never in localStorage, sessionStorage,
//    a cookie, the URL or the DOM (the input is cleared once it is read);
//  - every string that came from the API (code, output, ids, profile names, metadata, file
//    names) reaches the page through textContent or a canvas, never parsed as HTML, so a cell
//    that prints markup shows markup. The Content-Security-Policy of /ui is the second wall.
"use strict";
(() => {
  let token = null;
  let timer = null;
  let polls = 0;
  let polling = false; // a poll is in flight; again: another is due right after it
  let again = false;
  let pending = null; // the action waiting for its confirm: {method, path, label}
  const history = new Map(); // session id -> [{t, cpu, mem}] from successive polls
  const HISTORY_MAX = 60;
  const params = new URLSearchParams(location.search);
  const INTERVAL_MS = Math.max(500, Number(params.get("interval_ms")) || 2000);
  const $ = (id) => document.getElementById(id);

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }

  async function api(method, path) {
    const r = await fetch(path, {
      method,
      headers: { Authorization: "Bearer " + token },
      credentials: "omit",
      cache: "no-store",
      referrerPolicy: "no-referrer",
    });
    let body = null;
    try {
      body = await r.json();
    } catch (e) {
      body = null;
    }
    if (r.status === 401) {
      disconnect("the daemon refused the token: " + ((body && body.error) || "401"));
      throw new Error("unauthorized");
    }
    if (!r.ok) throw new Error((body && body.error) || method + " " + path + ": HTTP " + r.status);
    return body;
  }

  function disconnect(why) {
    token = null;
    if (timer) clearTimeout(timer);
    timer = null;
    history.clear();
    $("board").hidden = true;
    $("login").hidden = false;
    $("login-error").textContent = why || "";
    $("status").textContent = "not connected";
  }

  function connect() {
    const t = $("token").value.trim();
    $("token").value = "";
    if (!t) {
      $("login-error").textContent = "type the daemon's API token first";
      return;
    }
    token = t;
    $("login").hidden = true;
    $("board").hidden = false;
    pollNow();
  }

  // ---- formatting -------------------------------------------------------------------------

  function age(iso) {
    const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
    if (!isFinite(s)) return "?";
    if (s < 60) return Math.floor(s) + " s";
    if (s < 3600) return Math.floor(s / 60) + " min";
    if (s < 86400) return (s / 3600).toFixed(1) + " h";
    return (s / 86400).toFixed(1) + " d";
  }

  function bytes(n) {
    if (typeof n !== "number") return "?";
    const u = ["B", "KiB", "MiB", "GiB"];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) {
      n /= 1024;
      i++;
    }
    return n.toFixed(i ? 1 : 0) + " " + u[i];
  }

  function ms(n) {
    if (typeof n !== "number") return "?";
    return n < 10 ? n.toFixed(2) + " ms" : n < 1000 ? n.toFixed(1) + " ms" : (n / 1000).toFixed(2) + " s";
  }

  // ---- sparklines ------------------------------------------------------------------------

  function record(sessions) {
    const now = Date.now();
    const seen = new Set();
    for (const s of sessions) {
      seen.add(s.id);
      const u = s.usage || {};
      const h = history.get(s.id) || [];
      h.push({ t: now, cpu: u.cpu_total_ms, mem: u.memory_current_bytes });
      while (h.length > HISTORY_MAX) h.shift();
      history.set(s.id, h);
    }
    for (const id of [...history.keys()]) if (!seen.has(id)) history.delete(id);
  }

  // CPU as a share of one core between successive polls; memory as it was at each poll.
  function series(id) {
    const h = history.get(id) || [];
    const cpu = [];
    const mem = [];
    for (let i = 0; i < h.length; i++) {
      if (typeof h[i].mem === "number") mem.push(h[i].mem);
      if (i > 0 && typeof h[i].cpu === "number" && typeof h[i - 1].cpu === "number") {
        const dt = h[i].t - h[i - 1].t;
        if (dt > 0) cpu.push(Math.max(0, (100 * (h[i].cpu - h[i - 1].cpu)) / dt));
      }
    }
    return { cpu, mem };
  }

  function sparkline(values, max, color) {
    const c = el("canvas", null, "spark");
    c.width = 120;
    c.height = 28;
    c.dataset.points = String(values.length);
    const g = c.getContext("2d");
    if (values.length === 0) return c;
    const top = Math.max(max || 0, ...values, 1e-9);
    const step = values.length > 1 ? (c.width - 2) / (values.length - 1) : 0;
    g.strokeStyle = color;
    g.fillStyle = color;
    g.lineWidth = 1.5;
    g.beginPath();
    values.forEach((v, i) => {
      const x = 1 + i * step;
      const y = c.height - 2 - (v / top) * (c.height - 4);
      if (i === 0) g.moveTo(x, y);
      else g.lineTo(x, y);
    });
    if (values.length === 1) g.fillRect(1, c.height - 3 - (values[0] / top) * (c.height - 4), 3, 3);
    g.stroke();
    return c;
  }

  // ---- tables ----------------------------------------------------------------------------

  function sessionRow(s) {
    const tr = el("tr");
    tr.dataset.id = s.id;
    tr.append(el("td", s.id), el("td", s.profile), el("td", s.state, "state-" + s.state),
      el("td", age(s.created_at), "num"), el("td", s.execution_count, "num"));
    const sr = series(s.id);
    const u = s.usage || {};
    const cpuTd = el("td", null, "num");
    cpuTd.append(sparkline(sr.cpu, 100, "#2f6fde"),
      el("span", sr.cpu.length ? sr.cpu[sr.cpu.length - 1].toFixed(0) + "%" : "", "muted"));
    const memTd = el("td", null, "num");
    memTd.append(sparkline(sr.mem, u.memory_limit_bytes, "#1f8a4c"),
      el("span", typeof u.memory_current_bytes === "number" ? bytes(u.memory_current_bytes) : "", "muted"));
    const md = el("td");
    for (const [k, v] of Object.entries(s.metadata || {})) md.append(el("div", k + "=" + v));
    const actions = el("td", null, "actions");
    const live = s.state === "idle" || s.state === "busy";
    if (live) actions.append(button("interrupt", s.id, "POST", "/interrupt"));
    if (live) actions.append(button("stop", s.id, "POST", "/stop"));
    actions.append(button("delete", s.id, "DELETE", ""));
    tr.append(cpuTd, memTd, md, actions);
    return tr;
  }

  function button(label, id, method, suffix) {
    const b = el("button", label, label === "delete" ? "danger" : "");
    b.type = "button";
    b.dataset.action = label;
    b.addEventListener("click", () => ask(label, id, method, suffix));
    return b;
  }

  function ask(label, id, method, suffix) {
    pending = { method, path: "/v1/sessions/" + encodeURIComponent(id) + suffix, label, id };
    $("confirm-text").textContent = label + " session " + id + "?";
    $("confirm").hidden = false;
  }

  async function confirmed() {
    const p = pending;
    pending = null;
    $("confirm").hidden = true;
    if (!p || !token) return;
    try {
      await api(p.method, p.path);
      $("action-result").textContent = p.label + " " + p.id + ": done";
    } catch (e) {
      $("action-result").textContent = p.label + " " + p.id + ": " + e.message;
    }
    pollNow();
  }

  function fill(tbody, rows) {
    tbody.replaceChildren(...rows);
  }

  function executionRow(x) {
    const tr = el("tr");
    tr.dataset.seq = String(x.seq);
    const when = new Date(Date.parse(x.finished_at));
    const code = el("td");
    code.append(el("pre", x.code + (x.code_truncated ? " …" : "")));
    const out = el("td");
    if (x.stdout) out.append(el("pre", x.stdout + (x.stdout_truncated ? " …" : "")));
    if (x.stderr) out.append(el("pre", x.stderr + (x.stderr_truncated ? " …" : ""), "stderr"));
    if (x.error) out.append(el("pre", x.error, "stderr"));
    if (x.files) out.append(el("div", "files: " + x.files, "muted"));
    tr.append(el("td", isNaN(when) ? x.finished_at : when.toLocaleTimeString(), "num"),
      el("td", x.one_shot ? "one-shot" : x.session_id),
      el("td", x.status, "status-" + x.status), el("td", ms(x.wall_ms), "num"),
      el("td", ms(x.cpu_ms), "num"), code, out);
    return tr;
  }

  function poolRow(p) {
    const pool = p.pool || {};
    const c = pool.creates || {};
    const tr = el("tr");
    tr.append(el("td", p.name), el("td", p.start),
      el("td", (pool.ready ?? "?") + "/" + (pool.size ?? "?"), "num"),
      el("td", pool.warm ?? "?", "num"), el("td", pool.starting ?? "?", "num"),
      el("td", pool.zygote_generation ?? "-", "num"),
      el("td", (c.warm ?? 0) + " / " + (c.cold ?? 0) + " / " + (c.started_on_request ?? 0), "num"));
    return tr;
  }

  // ---- latency histogram -----------------------------------------------------------------

  const BOUNDS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, Infinity];
  const LABELS = ["1ms", "2", "5", "10", "20", "50", "100", "200", "500", "1s", "2s", "5s", ">5s"];

  function quantile(sorted, q) {
    if (!sorted.length) return NaN;
    return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  }

  function histogram(executions) {
    const c = $("histogram");
    const g = c.getContext("2d");
    const walls = executions.map((x) => x.wall_ms).filter((v) => typeof v === "number");
    const counts = BOUNDS.map(() => 0);
    for (const v of walls) counts[BOUNDS.findIndex((b) => v <= b)]++;
    g.clearRect(0, 0, c.width, c.height);
    const top = Math.max(1, ...counts);
    const w = (c.width - 20) / counts.length;
    g.font = "10px sans-serif";
    counts.forEach((n, i) => {
      const h = (n / top) * (c.height - 40);
      g.fillStyle = "#2f6fde";
      g.fillRect(10 + i * w + 2, c.height - 20 - h, w - 4, h);
      g.fillStyle = "#6b7385";
      g.fillText(LABELS[i], 10 + i * w + 2, c.height - 6);
      if (n) g.fillText(String(n), 10 + i * w + 2, c.height - 24 - h);
    });
    c.dataset.total = String(walls.length);
    const sorted = [...walls].sort((a, b) => a - b);
    $("latency-summary").textContent = walls.length
      ? "last " + walls.length + ": p50 " + ms(quantile(sorted, 0.5)) + ", p90 " +
        ms(quantile(sorted, 0.9)) + ", p99 " + ms(quantile(sorted, 0.99))
      : "no executions yet";
  }

  // ---- the poll --------------------------------------------------------------------------

  function pollNow() {
    if (timer) clearTimeout(timer);
    timer = null;
    poll();
  }

  async function poll() {
    timer = null;
    if (!token) return;
    if (polling) {
      again = true;
      return;
    }
    polling = true;
    try {
      const [health, sessions, executions, profiles] = await Promise.all([
        fetch("/healthz", { cache: "no-store", credentials: "omit" }).then((r) => r.json()),
        api("GET", "/v1/sessions?usage=live"),
        api("GET", "/v1/executions?limit=100"),
        api("GET", "/v1/profiles"),
      ]);
      if (!token) return;
      $("daemon").textContent = "version " + health.version + ", isolation " + health.isolation;
      const list = sessions.sessions || [];
      record(list.filter((s) => s.state !== "stopped"));
      fill($("sessions").tBodies[0], list.map(sessionRow));
      $("session-count").textContent = list.length + " (" +
        list.filter((s) => s.state !== "stopped").length + " live)";
      const xs = executions.executions || [];
      fill($("executions").tBodies[0], xs.slice(0, 30).map(executionRow));
      histogram(xs);
      fill($("pools").tBodies[0], (profiles.profiles || []).map(poolRow));
      polls++;
      document.body.dataset.polls = String(polls);
      $("status").textContent = "updated " + new Date().toLocaleTimeString();
      $("status").className = "muted";
    } catch (e) {
      if (!token) return;
      $("status").textContent = "cannot reach the daemon: " + e.message;
      $("status").className = "error";
    } finally {
      polling = false;
    }
    if (token) timer = setTimeout(poll, again ? 0 : INTERVAL_MS);
    again = false;
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("connect").addEventListener("click", connect);
    $("token").addEventListener("keydown", (e) => {
      if (e.key === "Enter") connect();
    });
    $("confirm-yes").addEventListener("click", confirmed);
    $("confirm-no").addEventListener("click", () => {
      pending = null;
      $("confirm").hidden = true;
    });
  });
})();
