// Builds Pagoda's Grafana dashboards with Grafana's own SDK (@grafana/grafana-foundation-sdk)
// into deploy/grafana/ (the JSON files operators import), and lists every panel's queries
// so a test can evaluate them against a real Prometheus (tests/dashboards_test.sh).
//   node grafana_dashboards.mjs write DIR     writes pagoda-replica.json and pagoda-fleet.json
//   node grafana_dashboards.mjs check DIR     exit 1 when DIR's files differ from a fresh build
//   node grafana_dashboards.mjs queries DIR   one line per query of DIR's files: FILE<TAB>PANEL<TAB>EXPR
// Every query names only metrics the replicas and the router export (docs/metrics.md).
import { readFileSync, writeFileSync } from "node:fs";
import { DashboardBuilder, DatasourceVariableBuilder, QueryVariableBuilder, RowBuilder, DashboardCursorSync, VariableRefresh } from "@grafana/grafana-foundation-sdk/dashboard";
import { PanelBuilder as TimeSeries } from "@grafana/grafana-foundation-sdk/timeseries";
import { PanelBuilder as Stat } from "@grafana/grafana-foundation-sdk/stat";
import { DataqueryBuilder } from "@grafana/grafana-foundation-sdk/prometheus";
import { VizLegendOptionsBuilder, LegendDisplayMode, LegendPlacement } from "@grafana/grafana-foundation-sdk/common";

const DS = { type: "prometheus", uid: "${datasource}" };
const RATE = "[$__rate_interval]";
const q = (expr, legend) => new DataqueryBuilder().expr(expr).legendFormat(legend ?? "__auto").datasource(DS);
function ts(title, unit, desc, ...queries) {
  const p = new TimeSeries().title(title).unit(unit).description(desc).datasource(DS).height(8).span(8)
    .legend(new VizLegendOptionsBuilder().displayMode(LegendDisplayMode.List).placement(LegendPlacement.Bottom).showLegend(true));
  for (const x of queries) p.withTarget(x);
  return p;
}
function stat(title, unit, desc, query) {
  return new Stat().title(title).unit(unit).description(desc).datasource(DS).height(4).span(4).withTarget(query);
}
const quantile = (p, metric, sel, by) => `histogram_quantile(${p}, sum by (le${by ? ", " + by : ""}) (rate(${metric}_bucket${sel}${RATE})))`;
function base(uid, title, description) {
  return new DashboardBuilder(title).uid(uid).description(description).tags(["pagoda", "llm"]).refresh("10s")
    .time({ from: "now-1h", to: "now" }).tooltip(DashboardCursorSync.Crosshair)
    .withVariable(new DatasourceVariableBuilder("datasource").label("Prometheus").type("prometheus"));
}

function replica() {
  const I = '{instance=~"$instance"}';
  const by = (labels) => `{instance=~"$instance", ${labels}}`;
  return base("pagoda-replica", "Pagoda replica", "One Pagoda replica: resources, scheduler stages, SLOs and the control plane (pagoda_* metrics).")
    .withVariable(new QueryVariableBuilder("instance").label("Replica").datasource(DS).query("label_values(pagoda_ready, instance)")
      .refresh(VariableRefresh.OnTimeRangeChanged).multi(true).includeAll(true))
    .withRow(new RowBuilder("Service level"))
    .withPanel(stat("Ready", "none", "1 when the replica takes traffic (/ready 200).", q(`min(pagoda_ready${I})`)))
    .withPanel(stat("Requests/s", "reqps", "Finished requests per second.", q(`sum(rate(pagoda_requests_total${I}${RATE}))`)))
    .withPanel(stat("Error ratio", "percentunit", "Errors (rejected, timeout, internal) over finished requests.",
      q(`sum(rate(pagoda_request_errors_total${I}${RATE})) / clamp_min(sum(rate(pagoda_requests_total${I}${RATE})), 1e-9)`)))
    .withPanel(ts("Time to first token", "s", "p50 and p99 over the rate window.",
      q(quantile(0.5, "pagoda_time_to_first_token_seconds", I, "instance"), "p50 {{instance}}"),
      q(quantile(0.99, "pagoda_time_to_first_token_seconds", I, "instance"), "p99 {{instance}}")))
    .withPanel(ts("End-to-end latency", "s", "p50 and p99 of whole requests.",
      q(quantile(0.5, "pagoda_e2e_request_latency_seconds", I, "instance"), "p50 {{instance}}"),
      q(quantile(0.99, "pagoda_e2e_request_latency_seconds", I, "instance"), "p99 {{instance}}")))
    .withPanel(ts("Inter-token latency", "s", "p50 and p99 between streamed tokens.",
      q(quantile(0.5, "pagoda_inter_token_latency_seconds", I, "instance"), "p50 {{instance}}"),
      q(quantile(0.99, "pagoda_inter_token_latency_seconds", I, "instance"), "p99 {{instance}}")))
    .withPanel(ts("Errors by kind", "reqps", "Rejected (queue full, too long), timed out, internal.",
      q(`sum by (kind) (rate(pagoda_request_errors_total${I}${RATE}))`, "{{kind}}")))
    .withPanel(ts("Tokens/s", "short", "Prompt tokens prefilled and tokens generated per second.",
      q(`sum(rate(pagoda_prompt_tokens_total${I}${RATE}))`, "prompt"), q(`sum(rate(pagoda_generation_tokens_total${I}${RATE}))`, "generated")))
    .withPanel(ts("TTFT p99 by request length", "s", "The business layer: short and long requests apart.",
      q(quantile(0.99, "pagoda_time_to_first_token_by_length_seconds", I, "length"), "{{length}}")))
    .withRow(new RowBuilder("Scheduler stages"))
    .withPanel(ts("Sequences", "short", "Running and waiting sequences.",
      q(`sum(pagoda_num_requests_running${I})`, "running"), q(`sum(pagoda_num_requests_waiting${I})`, "waiting")))
    .withPanel(ts("Waiting, by reason", "short", "Why waiting requests wait (batch full, KV blocks, token budget).",
      q(`sum by (reason) (pagoda_requests_waiting_by_reason${I})`, "{{reason}}")))
    .withPanel(ts("Mean time per stage", "s", "Queue, prefill, decode and the step's phases per request.",
      q(`sum by (stage) (rate(pagoda_request_stage_seconds_sum${I}${RATE})) / sum by (stage) (rate(pagoda_request_stage_seconds_count${I}${RATE}))`, "{{stage}}")))
    .withPanel(ts("Engine step", "s", "Mean step time and steps per second.",
      q(`sum(rate(pagoda_step_seconds_sum${I}${RATE})) / sum(rate(pagoda_step_seconds_count${I}${RATE}))`, "mean step"),
      q(`sum(rate(pagoda_engine_steps_total${I}${RATE}))`, "steps/s")))
    .withPanel(ts("Preemptions", "short", "Sequences preempted (recomputed) per second.",
      q(`sum(rate(pagoda_num_preemptions_total${I}${RATE}))`, "preemptions/s")))
    .withPanel(ts("Prefix cache hit ratio", "percentunit", "Prompt tokens found in the prefix cache.",
      q(`sum(rate(pagoda_prefix_cache_hits_total${I}${RATE})) / clamp_min(sum(rate(pagoda_prefix_cache_queries_total${I}${RATE})), 1)`, "hits")))
    .withRow(new RowBuilder("Resources"))
    .withPanel(ts("Memory", "percentunit", "Accelerator (or process) memory in use and the KV cache's share used.",
      q(`pagoda_memory_usage_perc${I}`, "memory {{instance}}"), q(`pagoda_kv_cache_usage_perc${I}`, "KV cache {{instance}}")))
    .withPanel(ts("Compute busy", "percentunit", "Fraction of time the engine computes (modelled GPU time on sim).",
      q(`rate(pagoda_compute_busy_seconds_total${I}${RATE})`, "{{instance}}")))
    .withPanel(ts("Process", "bytes", "Resident memory of the process.",
      q(`pagoda_process_resident_memory_bytes${I}`, "RSS {{instance}}")))
    .withPanel(ts("CPU", "percentunit", "CPU seconds per second of the process.",
      q(`rate(pagoda_process_cpu_seconds_total${I}${RATE})`, "{{instance}}")))
    .withPanel(ts("Memory traffic", "Bps", "Bytes moved to and from memory per second.",
      q(`sum by (instance) (rate(pagoda_memory_traffic_bytes_total${I}${RATE}))`, "{{instance}}")))
    .withPanel(ts("Open connections", "short", "HTTP connections held open.",
      q(`pagoda_http_open_connections${I}`, "{{instance}}")))
    .withRow(new RowBuilder("Control plane"))
    .withPanel(ts("Config version", "none", "The live configuration's version (PUT /admin/config, rollbacks).",
      q(`pagoda_config_version${I}`, "{{instance}}")))
    .withPanel(ts("KV block size", "none", "The block size in use (the block-size policy may change it).",
      q(`max by (instance, block_size) (pagoda_cache_config_info${I})`, "{{block_size}} {{instance}}")))
    .withPanel(ts("Warm level", "none", "0 off, 1 low, 2 medium, 3 high, 4 full.", q(`pagoda_warm_level${I}`, "{{instance}}")))
    .withPanel(ts("Forecast", "reqps", "Observed request rate against the forecaster's replicas advice.",
      q(`pagoda_forecast_observed_requests_per_second${I}`, "observed {{instance}}"),
      q(`pagoda_forecast_recommended_replicas${I}`, "recommended replicas {{instance}}")))
    .withPanel(ts("Automation paused", "none", "1 while a human paused automatic actions.", q(`pagoda_automation_paused${I}`, "{{instance}}")))
    .withPanel(ts("Config refusals", "short", "Changes refused by validation or the OOM guard.",
      q(`sum by (instance) (increase(pagoda_config_refusals_total${I}${RATE}))`, "{{instance}}")))
    .build();
}

function fleet() {
  const P = '{pool=~"$pool"}';
  return base("pagoda-fleet", "Pagoda fleet", "The router and every replica behind it: traffic by pool, failover, rollout and the fleet's SLOs.")
    .withVariable(new QueryVariableBuilder("pool").label("Pool").datasource(DS).query("label_values(pagoda_router_traffic_weight, pool)")
      .refresh(VariableRefresh.OnTimeRangeChanged).multi(true).includeAll(true))
    .withRow(new RowBuilder("Traffic"))
    .withPanel(stat("Backends up", "none", "Healthy backends in the selected pools.", q(`sum(pagoda_router_backend_up${P})`)))
    .withPanel(stat("Requests/s", "reqps", "Through the router.", q(`sum(rate(pagoda_router_requests_total${P}${RATE}))`)))
    .withPanel(stat("Held now", "none", "Requests waiting for a pool that wakes from zero.", q("sum(pagoda_router_held_requests)")))
    .withPanel(ts("Requests/s by pool", "reqps", "Answered requests per pool.",
      q(`sum by (pool) (rate(pagoda_router_requests_total${P}${RATE}))`, "{{pool}}")))
    .withPanel(ts("Responses by code", "reqps", "Status codes the router answered with.",
      q(`sum by (code) (rate(pagoda_router_requests_total${P}${RATE}))`, "{{code}}")))
    .withPanel(ts("Traffic weight", "percent", "Each pool's share (rollouts, schedules, canaries).",
      q(`pagoda_router_traffic_weight${P}`, "{{pool}}")))
    .withRow(new RowBuilder("Service level"))
    .withPanel(ts("TTFT p99 by pool (router)", "s", "Time to first token as clients see it.",
      q(quantile(0.99, "pagoda_router_time_to_first_token_seconds", P, "pool"), "{{pool}}")))
    .withPanel(ts("Latency p99 by pool (router)", "s", "Whole requests as clients see them.",
      q(quantile(0.99, "pagoda_router_e2e_request_latency_seconds", P, "pool"), "{{pool}}")))
    .withPanel(ts("TTFT p99 per replica", "s", "From the replicas' own histograms.",
      q(quantile(0.99, "pagoda_time_to_first_token_seconds", "", "instance"), "{{instance}}")))
    .withRow(new RowBuilder("Failover"))
    .withPanel(ts("Failed requests", "reqps", "No backend, retries exhausted, streams broken.",
      q(`sum by (reason) (rate(pagoda_router_failed_requests_total${RATE}))`, "{{reason}}")))
    .withPanel(ts("Retries and resumed streams", "reqps", "Retried before the first byte; streams resumed on another replica.",
      q(`sum(rate(pagoda_router_retries_total${P}${RATE}))`, "retries"), q(`sum(rate(pagoda_router_resumptions_total${P}${RATE}))`, "resumed")))
    .withPanel(ts("Ejections", "short", "Backends ejected after failures.", q(`sum by (backend) (increase(pagoda_router_ejections_total${P}${RATE}))`, "{{backend}}")))
    .withPanel(ts("Outstanding per backend", "short", "Requests in flight from the router.",
      q(`pagoda_router_backend_outstanding_requests${P}`, "{{backend}}")))
    .withPanel(ts("DR and shedding", "short", "DR pool forced or chosen; requests shed.",
      q("pagoda_router_dr_active", "DR active"), q(`sum(rate(pagoda_router_shed_requests_total${RATE}))`, "shed/s")))
    .withPanel(ts("Rollout state", "none", "1 on the current mode and state of the rollout controller.",
      q("pagoda_router_rollout_state", "{{mode}} {{state}} {{target}}")))
    .withRow(new RowBuilder("Replicas"))
    .withPanel(ts("Waiting per replica", "short", "Queue depth on each replica.", q("pagoda_num_requests_waiting", "{{instance}}")))
    .withPanel(ts("KV cache used per replica", "percentunit", "", q("pagoda_kv_cache_usage_perc", "{{instance}}")))
    .withPanel(ts("Forecast and advice", "short", "The fleet's observed rate and the replicas advised.",
      q("sum(pagoda_forecast_observed_requests_per_second)", "observed req/s"), q("max(pagoda_forecast_recommended_replicas)", "recommended replicas")))
    .build();
}

const files = { "pagoda-replica.json": replica, "pagoda-fleet.json": fleet };
const [mode, dir] = process.argv.slice(2);
// Panels get ids in order (Grafana links and shares panels by id).
const text = (f) => {
  const d = f();
  d.panels.forEach((p, i) => { p.id = i + 1; });
  return JSON.stringify(d, null, 2) + "\n";
};
if (mode === "write") {
  for (const [name, f] of Object.entries(files)) writeFileSync(`${dir}/${name}`, text(f));
} else if (mode === "check") {
  let bad = 0;
  for (const [name, f] of Object.entries(files)) {
    if (readFileSync(`${dir}/${name}`, "utf8") !== text(f)) { console.log(`FAIL ${dir}/${name} differs from a fresh build (node grafana_dashboards.mjs write ${dir})`); bad++; }
  }
  process.exit(bad ? 1 : 0);
} else if (mode === "queries") {
  for (const name of Object.keys(files)) {
    const d = JSON.parse(readFileSync(`${dir}/${name}`, "utf8"));
    for (const p of d.panels ?? []) for (const t of p.targets ?? []) console.log(`${name}\t${p.title}\t${t.expr}`);
  }
} else {
  console.error("usage: node grafana_dashboards.mjs write|check|queries DIR");
  process.exit(2);
}
