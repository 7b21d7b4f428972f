// Pagoda's operator console: polls /metrics every two seconds into charts and tiles, and the
// GET /admin/* routes into tables; actions (rollback, pause) go to the admin routes with the
// key typed in the header (kept in this tab's sessionStorage only). Everything a chart shows
// is kept in window.pagodaConsole for tests and the curious.
"use strict";

const KIND = document.body.dataset.kind;  // "replica" or "router"
const POLL_MS = 2000, KEEP_POINTS = 300, WINDOW_S = 30;
const C = {
  key: sessionStorage.getItem("pagoda-admin-key") || "",
  scrapes: [],  // [{t, samples: [{name, labels, value}]}], newest last, WINDOW_S and more
  charts: {},   // id -> {title, unit, t: [], series: {label: []}, plot}
  scrapeCount: 0,
};
window.pagodaConsole = C;

// ---- HTTP ----
async function api(path, init = {}) {
  const headers = Object.assign({}, init.headers || {});
  if (C.key) headers.Authorization = "Bearer " + C.key;
  const r = await fetch(path, Object.assign({}, init, { headers }));
  const text = await r.text();
  let body = text;
  try { body = JSON.parse(text); } catch (_) { /* /metrics and plain text */ }
  return { ok: r.ok, status: r.status, body };
}
function say(text, cls) {
  const m = document.getElementById("message");
  m.textContent = text;
  m.className = cls || "";
}
function errorText(r) {
  const e = r.body && r.body.error;
  return `HTTP ${r.status}: ${e ? e.message : String(r.body).slice(0, 200)}`;
}

// ---- Prometheus text ----
function parseProm(text) {
  const out = [];
  const line = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/;
  const label = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
  for (const l of text.split("\n")) {
    if (!l || l[0] === "#") continue;
    const m = line.exec(l);
    if (!m) continue;
    const labels = {};
    if (m[3]) for (const x of m[3].matchAll(label)) labels[x[1]] = x[2].replace(/\\(.)/g, "$1");
    out.push({ name: m[1], labels, value: Number(m[4]) });
  }
  return out;
}
function matches(s, name, where) {
  if (s.name !== name) return false;
  for (const k in where || {}) if (s.labels[k] !== where[k]) return false;
  return true;
}
function sum(scrape, name, where) {
  let v = null;
  for (const s of scrape.samples) if (matches(s, name, where)) v = (v || 0) + s.value;
  return v;
}
function labelsOf(scrape, name, key) {
  const seen = new Set();
  for (const s of scrape.samples) if (s.name === name && s.labels[key] !== undefined) seen.add(s.labels[key]);
  return [...seen].sort();
}
// The scrape about WINDOW_S before the newest (or the oldest kept).
function windowStart() {
  const last = C.scrapes[C.scrapes.length - 1];
  for (const s of C.scrapes) if (last.t - s.t <= WINDOW_S * 1000) return s;
  return C.scrapes[0];
}
function rate(name, where, prev, cur) {
  const a = sum(prev, name, where), b = sum(cur, name, where);
  if (a === null || b === null || cur.t <= prev.t) return null;
  return Math.max(0, b - a) / ((cur.t - prev.t) / 1000);
}
function meanOver(name, where, prev, cur) {  // a histogram's mean over the window
  const dn = sum(cur, name + "_count", where) - sum(prev, name + "_count", where);
  const ds = sum(cur, name + "_sum", where) - sum(prev, name + "_sum", where);
  return dn > 0 ? ds / dn : null;
}
// histogram_quantile over the window, buckets summed across series (as Prometheus does).
function quantile(q, name, prev, cur) {
  const acc = new Map();
  for (const [scrape, sign] of [[cur, 1], [prev, -1]]) {
    for (const s of scrape.samples) {
      if (s.name !== name + "_bucket") continue;
      const le = s.labels.le === "+Inf" ? Infinity : Number(s.labels.le);
      acc.set(le, (acc.get(le) || 0) + sign * s.value);
    }
  }
  const bounds = [...acc.keys()].sort((a, b) => a - b);
  const total = acc.get(Infinity) || 0;
  if (total <= 0) return null;
  const want = q * total;
  let below = 0, lower = 0;
  for (const le of bounds) {
    const c = acc.get(le);
    if (c >= want) {
      if (le === Infinity) return lower;
      return lower + (le - lower) * ((want - below) / Math.max(c - below, 1e-12));
    }
    below = c;
    lower = le;
  }
  return lower;
}

// ---- Charts: each returns [label, value] pairs from (previous, current, window start) ----
const ms = (v) => (v === null ? null : v * 1000);
const pct = (v) => (v === null ? null : v * 100);
const REPLICA_CHARTS = [
  { id: "resources", title: "Resources (%)", f: (p, c) => [
    ["memory", pct(sum(c, "pagoda_memory_usage_perc"))],
    ["KV cache", pct(sum(c, "pagoda_kv_cache_usage_perc"))],
    ["compute busy", pct(rate("pagoda_compute_busy_seconds_total", {}, p, c))]] },
  { id: "scheduler", title: "Scheduler: sequences", f: (p, c) => [
    ["running", sum(c, "pagoda_num_requests_running")],
    ["waiting", sum(c, "pagoda_num_requests_waiting")]] },
  { id: "stages", title: "Stages: mean ms per request (30 s)", f: (p, c, w) =>
    ["queue", "prefill", "decode", "forward", "network_write"].map((s) =>
      [s, ms(meanOver("pagoda_request_stage_seconds", { stage: s }, w, c))]) },
  { id: "slo", title: "SLOs: p99 ms (30 s)", f: (p, c, w) => [
    ["TTFT p99", ms(quantile(0.99, "pagoda_time_to_first_token_seconds", w, c))],
    ["latency p99", ms(quantile(0.99, "pagoda_e2e_request_latency_seconds", w, c))],
    ["inter-token p99", ms(quantile(0.99, "pagoda_inter_token_latency_seconds", w, c))]] },
  { id: "traffic", title: "Requests/s: actual, forecast, errors", f: (p, c) => [
    ["requests/s", rate("pagoda_requests_total", {}, p, c)],
    ["observed (forecaster)", sum(c, "pagoda_forecast_observed_requests_per_second")],
    ["forecast 15m", sum(c, "pagoda_forecast_requests_per_second", { horizon: "15m" })],
    ["errors/s", rate("pagoda_request_errors_total", {}, p, c)]] },
  { id: "warm", title: "Warm level (0 off … 4 full)", range: [0, 4], f: (p, c) => [
    ["warm level", sum(c, "pagoda_warm_level")]] },
];
const ROUTER_CHARTS = [
  { id: "traffic", title: "Requests/s by pool", f: (p, c) => [
    ...labelsOf(c, "pagoda_router_requests_total", "pool").map((pool) =>
      [pool, rate("pagoda_router_requests_total", { pool }, p, c)]),
    ["failed/s", rate("pagoda_router_failed_requests_total", {}, p, c)]] },
  { id: "backends", title: "Backends: up, outstanding, held", f: (p, c) => [
    ["up", sum(c, "pagoda_router_backend_up")],
    ["outstanding", sum(c, "pagoda_router_backend_outstanding_requests")],
    ["held", sum(c, "pagoda_router_held_requests")]] },
  { id: "slo", title: "SLOs: p99 ms (30 s)", f: (p, c, w) => [
    ["TTFT p99", ms(quantile(0.99, "pagoda_router_time_to_first_token_seconds", w, c))],
    ["latency p99", ms(quantile(0.99, "pagoda_router_e2e_request_latency_seconds", w, c))]] },
  { id: "weights", title: "Traffic weight by pool (%)", f: (p, c) =>
    labelsOf(c, "pagoda_router_traffic_weight", "pool").map((pool) =>
      [pool, sum(c, "pagoda_router_traffic_weight", { pool })]) },
];
const COLORS = ["#0969da", "#cf222e", "#1a7f37", "#9a6700", "#8250df", "#bf3989", "#57606a"];

function chartWidth(el) { return Math.max(240, el.clientWidth - 4); }
function buildPlot(ch) {
  const labels = Object.keys(ch.series);
  const opts = {
    width: chartWidth(ch.el), height: 180,
    scales: { x: { time: true }, y: ch.range ? { range: ch.range } : {} },
    legend: { live: false },
    axes: [{}, { size: 50, values: (u, vals) => vals.map((v) => +v.toPrecision(3)) }],
    series: [{}, ...labels.map((l, i) => ({ label: l, stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: true }))],
  };
  if (ch.plot) ch.plot.destroy();
  ch.plot = new uPlot(opts, plotData(ch), ch.el);
}
function plotData(ch) { return [ch.t.map((t) => t / 1000), ...Object.values(ch.series)]; }
function addPoint(def, t, pairs) {
  let ch = C.charts[def.id];
  if (!ch) {
    const box = document.createElement("div");
    box.className = "chart";
    box.id = "chart-" + def.id;
    box.innerHTML = `<h3>${def.title}</h3>`;
    const el = document.createElement("div");
    box.appendChild(el);
    document.getElementById("charts").appendChild(box);
    ch = C.charts[def.id] = { title: def.title, range: def.range, t: [], series: {}, el, plot: null };
  }
  let rebuild = !ch.plot;
  for (const [label, v] of pairs) {
    if (!(label in ch.series)) {
      ch.series[label] = ch.t.map(() => null);
      rebuild = true;
    }
  }
  ch.t.push(t);
  for (const label in ch.series) {
    const hit = pairs.find((x) => x[0] === label);
    ch.series[label].push(hit && hit[1] !== null && isFinite(hit[1]) ? hit[1] : null);
  }
  if (ch.t.length > KEEP_POINTS) {
    ch.t.shift();
    for (const l in ch.series) ch.series[l].shift();
  }
  if (rebuild) buildPlot(ch); else ch.plot.setData(plotData(ch));
}

// ---- Tiles ----
function tiles(c) {
  const stateOf = () => { for (const s of c.samples) if (s.name === "pagoda_replica_state" && s.value === 1) return s.labels.state; return "?"; };
  const cache = c.samples.find((s) => s.name === "pagoda_cache_config_info");
  const t = KIND === "router" ? [
    ["backends up", `${sum(c, "pagoda_router_backend_up") ?? 0} / ${labelsOf(c, "pagoda_router_backend_up", "backend").length}`],
    ["requests", sum(c, "pagoda_router_requests_total") ?? 0],
    ["failed", sum(c, "pagoda_router_failed_requests_total") ?? 0],
    ["held now", sum(c, "pagoda_router_held_requests") ?? 0],
    ["resumed streams", sum(c, "pagoda_router_resumptions_total") ?? 0],
    ["DR active", sum(c, "pagoda_router_dr_active") ? "yes" : "no"],
  ] : [
    ["state", stateOf()],
    ["requests", sum(c, "pagoda_requests_total") ?? 0],
    ["errors", sum(c, "pagoda_request_errors_total") ?? 0],
    ["running", sum(c, "pagoda_num_requests_running") ?? 0],
    ["waiting", sum(c, "pagoda_num_requests_waiting") ?? 0],
    ["config version", sum(c, "pagoda_config_version") ?? "?"],
    ["block size", cache ? cache.labels.block_size : "?"],
    ["automation", sum(c, "pagoda_automation_paused") ? "paused" : "on"],
  ];
  document.getElementById("tiles").innerHTML = t.map(([k, v]) =>
    `<div class="tile" data-tile="${k}"><b>${esc(String(v))}</b><span>${k}</span></div>`).join("");
}

async function pollMetrics() {
  const r = await api("/metrics");
  const pill = document.getElementById("status");
  if (!r.ok) { pill.textContent = "metrics " + r.status; pill.className = "pill bad"; return; }
  const cur = { t: Date.now(), samples: parseProm(r.body) };
  C.scrapes.push(cur);
  while (C.scrapes.length > 2 && cur.t - C.scrapes[1].t > WINDOW_S * 1000) C.scrapes.shift();
  C.scrapeCount++;
  if (!C.first) C.first = cur;
  C.last = cur;
  tiles(cur);
  const ready = KIND === "router" ? (sum(cur, "pagoda_router_backend_up") || 0) > 0 : sum(cur, "pagoda_ready") === 1;
  pill.textContent = ready ? "ready" : "not ready";
  pill.className = "pill " + (ready ? "ok" : "warn");
  if (C.scrapes.length < 2) return;
  const prev = C.scrapes[C.scrapes.length - 2], w = windowStart();
  for (const def of KIND === "router" ? ROUTER_CHARTS : REPLICA_CHARTS) addPoint(def, cur.t, def.f(prev, cur, w));
}

// ---- Tables ----
function esc(s) { return String(s).replace(/[&<>"]/g, (ch) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[ch]); }
function when(msEpoch) { return msEpoch ? new Date(msEpoch).toLocaleString() : ""; }
function table(head, rows) {
  return `<table><tr>${head.map((h) => `<th>${h}</th>`).join("")}</tr>${rows.map((r) => `<tr>${r.map((x) => `<td>${x}</td>`).join("")}</tr>`).join("")}</table>`;
}
function put(id, html) { document.getElementById(id).innerHTML = html; }
async function section(id, path, render) {
  const r = await api(path);
  if (r.status === 404) return put(id, `<p>Not enabled here (${esc(path)}).</p>`);
  if (!r.ok) return put(id, `<p class="failed">${esc(errorText(r))}${r.status === 401 ? " (type the admin key above, or start with --admin-read-open)" : ""}</p>`);
  put(id, render(r.body));
}
function diffText(d) {
  return Object.entries(d || {}).map(([k, v]) => `${k}: ${JSON.stringify(v.from)} → ${JSON.stringify(v.to)}`).join("<br>");
}

let ruleActions = {};  // rule name -> its actions (GET /admin/rules)
const renderAlerts = (b) => {
  const rows = (b.alerts || []).map((a) => [esc(a.rule), `<span class="sev-${esc(a.severity)}">${esc(a.severity)}</span>`,
    `<span class="${a.state === "firing" ? "firing sev-" + esc(a.severity) : ""}">${esc(a.state)}</span>`,
    a.value === null || a.value === undefined ? "" : esc(+Number(a.value).toPrecision(4)),
    esc((ruleActions[a.rule] || []).join(", "))]);
  const buttons = KIND === "replica" ? `<p><button class="secondary" data-act="pause">Pause automatic actions</button>
    <button class="secondary" data-act="resume">Resume</button></p>` : "";
  return buttons + table(["rule", "severity", "state", "value", "actions"], rows) +
    '<p class="diff">What each action did is in the audit log (kind alert_action).</p>';
};
const renderConfig = (b) => table(["version", "when", "source", "reason", "change", ""], (b.versions || []).map((v) => [
  `v${v.id}${v.id === b.current_version ? " <b>(current)</b>" : ""}${v.stable ? ' <span class="ok">stable</span>' : ""}`,
  esc(when(v.created_at_ms)), esc(v.source), esc(v.reason || ""), `<span class="diff">${diffText(v.diff)}</span>`,
  v.id === b.current_version ? "" : `<button data-rollback="${v.id}">Roll back to v${v.id}</button>`]));
const round = (_, v) => (typeof v === "number" && !Number.isInteger(v) ? +v.toPrecision(4) : v);
const kv = (o, keys) => table(["", ""], keys.filter((k) => o[k] !== undefined).map((k) =>
  [esc(k), `<pre>${esc(typeof o[k] === "object" ? JSON.stringify(o[k], round, 1) : round(k, o[k]))}</pre>`]));
const renderBlock = (b) => kv(b, ["policy", "block_size", "automation", "lengths", "last_decision", "min_samples", "min_gain", "decide_every_s", "cooldown_s"]);
const renderWarm = (b) => kv(b, ["level", "manual", "dynamic", "predictive", "remaining_s", "full_warmup", "seconds_by_tier", "idle_spin_seconds_total"]);
const renderPools = (b) => table(["pool", "role", "weight", "backend", "up", "ready", "outstanding", "waiting", "KV"],
  (b.pools || []).flatMap((p) => (p.backends.length ? p.backends : [{}]).map((x) => [esc(p.name), esc(p.role), esc(p.weight),
    esc(x.url || "(none)"), x.up ? "yes" : "no", x.ready ? "yes" : (x.shedding ? "shedding" : "no"),
    esc(x.outstanding ?? ""), esc(x.waiting ?? ""), x.kv_usage === undefined ? "" : (100 * x.kv_usage).toFixed(1) + "%"])));
// A fleet's router (pagoda fleet up) adds its replicas and each sized pool's state.
const renderFleet = (b) => table(["pool", "replica", "state", "detail"], (b.replicas || []).map((r) =>
  [esc(r.pool ?? ""), esc(r.url ?? r.name ?? ""), esc(r.state ?? ""), `<pre>${esc(JSON.stringify(r, round))}</pre>`])) +
  (b.sizing ? `<h3>Pool sizing</h3><pre>${esc(JSON.stringify(b.sizing, round, 1))}</pre>` : "");
const renderRollout = (b) => kv(b, ["mode", "state", "target", "percent", "weights", "source", "dry_run", "last_verdict", "last_window", "windows_judged"]);
let auditEvents = [];
function renderAudit() {
  const f = document.getElementById("auditfilter").value.trim().toLowerCase();
  const rows = auditEvents.filter((e) => !f || e.kind.toLowerCase().includes(f) || JSON.stringify(e.detail).toLowerCase().includes(f))
    .map((e) => [esc(when(e.at_ms)), esc(e.kind), `<span class="${e.detail && e.detail.outcome === "failed" ? "failed" : ""}"><pre>${esc(JSON.stringify(e.detail))}</pre></span>`]);
  put("audit", rows.length ? table(["when", "kind", "detail"], rows) : "<p>No events" + (f ? " match." : " yet.") + "</p>");
}

async function pollTables() {
  if (KIND === "replica" && !Object.keys(ruleActions).length) {
    const r = await api("/admin/rules");
    if (r.ok) for (const x of r.body.rules || []) ruleActions[x.name] = x.actions || [];
  }
  const jobs = [];
  if (KIND === "replica") {  // a router has no alert routes: its replicas' consoles show theirs
    jobs.push(section("alerts", "/admin/alerts", renderAlerts),
      section("config", "/admin/config/history?limit=20", renderConfig),
      section("blocksize", "/admin/block-size", renderBlock), section("warm", "/admin/warmup", renderWarm));
  } else {
    jobs.push(section("pools", "/admin/pools", renderPools), section("rollout", "/admin/rollout", renderRollout),
      section("fleet", "/admin/fleet", renderFleet));
  }
  const ev = await api("/admin/events?limit=200");
  if (ev.ok) { auditEvents = ev.body.events || []; renderAudit(); }
  else put("audit", `<p>${ev.status === 404 ? "No audit log on this process." : esc(errorText(ev))}</p>`);
  await Promise.all(jobs);
}

// ---- Actions ----
async function act(path, body, what) {
  say(`${what}…`);
  const r = await api(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  if (r.ok) say(`${what}: done`, "ok");
  else say(`${what}: refused, ${errorText(r)}${r.status === 401 ? " (type the admin key above)" : ""}`, "bad");
  await pollTables();
}
document.addEventListener("click", (e) => {
  const b = e.target.closest("button");
  if (!b) return;
  if (b.dataset.rollback) act("/admin/config/rollback", { to: Number(b.dataset.rollback), reason: "rolled back from the console" }, `Roll back to v${b.dataset.rollback}`);
  if (b.dataset.act) act("/admin/control/" + b.dataset.act, {}, b.dataset.act === "pause" ? "Pause" : "Resume");
});
document.getElementById("keyform").addEventListener("submit", (e) => {
  e.preventDefault();
  C.key = document.getElementById("key").value.trim();
  sessionStorage.setItem("pagoda-admin-key", C.key);
  say(C.key ? "Admin key set for this tab." : "Admin key cleared.", "ok");
  pollTables();
});
document.getElementById("auditfilter").addEventListener("input", renderAudit);
window.addEventListener("resize", () => { for (const ch of Object.values(C.charts)) if (ch.plot) ch.plot.setSize({ width: chartWidth(ch.el), height: 180 }); });

document.body.classList.add("body-" + KIND);
document.getElementById("kind").textContent = KIND === "router" ? "router" : "replica";
document.getElementById("key").value = C.key;
async function loop(f, every) { for (;;) { try { await f(); } catch (err) { say(String(err), "bad"); } await new Promise((r) => setTimeout(r, every)); } }
loop(pollMetrics, POLL_MS);
loop(pollTables, 2 * POLL_MS);
