// Validates `pagoda fleet render --target kubernetes` output against the Kubernetes schemas
// offline, object by object (tests/fleet_test.sh): kubernetes-models for the core kinds,
// @kubernetes-models/keda for ScaledObject, @kubernetes-models/prometheus-operator for
// ServiceMonitor.
// Usage: node validate_k8s.mjs MANIFESTS.yaml [ROUTER_TOML_OUT] [--also MORE.yaml ...]
// Writes the router ConfigMap's router.toml to ROUTER_TOML_OUT when given. Across the files:
// every autoscaler's scaleTargetRef names a workload of that kind, and KEDA triggers carry
// what their scaler needs (cron: timezone, start, end, desiredReplicas; prometheus:
// serverAddress, query, threshold), which KEDA's schema leaves free-form.
import { readFileSync, writeFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";
import { Deployment, StatefulSet } from "kubernetes-models/apps/v1";
import { ConfigMap, Secret, Service } from "kubernetes-models/v1";
import { HorizontalPodAutoscaler } from "kubernetes-models/autoscaling/v2";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import { ScaledObject } from "@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject";
import { ServiceMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor";

const argv = process.argv.slice(2);
const also = [];
for (let i = argv.indexOf("--also"); i >= 0; i = argv.indexOf("--also")) also.push(...argv.splice(i, 2).slice(1));
const [file, tomlOut] = argv;
const TRIGGER_NEEDS = { cron: ["timezone", "start", "end", "desiredReplicas"], prometheus: ["serverAddress", "query", "threshold"] };
const kinds = {
  "apps/v1/Deployment": Deployment, "apps/v1/StatefulSet": StatefulSet, "v1/Service": Service,
  "v1/ConfigMap": ConfigMap, "v1/Secret": Secret, "policy/v1/PodDisruptionBudget": PodDisruptionBudget,
  "autoscaling/v2/HorizontalPodAutoscaler": HorizontalPodAutoscaler, "keda.sh/v1alpha1/ScaledObject": ScaledObject,
  "monitoring.coreos.com/v1/ServiceMonitor": ServiceMonitor,
};
const docs = [file, ...also].flatMap((f) => parseAllDocuments(readFileSync(f, "utf8")).filter((d) => d.contents !== null));
const workloads = new Set();
const targets = [];
const counts = {};
let failed = 0;
for (const doc of docs) {
  if (doc.errors.length) {
    console.log(`FAIL yaml: ${doc.errors[0].message}`);
    failed++;
    continue;
  }
  const obj = doc.toJS();
  if (obj === null) continue;  // a document of comments only
  const Model = kinds[`${obj.apiVersion}/${obj.kind}`];
  if (!Model) {
    console.log(`FAIL ${obj.apiVersion} ${obj.kind}: no schema checked for this kind`);
    failed++;
    continue;
  }
  if (["Deployment", "StatefulSet"].includes(obj.kind)) workloads.add(`${obj.kind}/${obj.metadata?.namespace}/${obj.metadata?.name}`);
  const ref = obj.spec?.scaleTargetRef;
  if (ref) targets.push([obj, `${ref.kind ?? "Deployment"}/${obj.metadata?.namespace}/${ref.name}`]);
  try {
    for (const t of obj.kind === "ScaledObject" ? obj.spec?.triggers ?? [] : []) {
      const missing = (TRIGGER_NEEDS[t.type] ?? []).filter((k) => t.metadata?.[k] === undefined || t.metadata?.[k] === "");
      if (missing.length) throw new Error(`a ${t.type} trigger needs ${missing.join(", ")}`);
    }
    new Model(obj).validate();
    counts[obj.kind] = (counts[obj.kind] ?? 0) + 1;
  } catch (e) {
    console.log(`FAIL ${obj.kind} ${obj.metadata?.name}: ${e.message}`);
    failed++;
  }
  if (obj.kind === "ConfigMap" && tomlOut) writeFileSync(tomlOut, obj.data["router.toml"]);
}
for (const [obj, want] of targets) {
  if (!workloads.has(want)) {
    console.log(`FAIL ${obj.kind} ${obj.metadata?.name}: scaleTargetRef ${want} is not among the manifests (${[...workloads].join(", ")})`);
    failed++;
  }
}
console.log(`${failed ? "FAIL" : "ok"} ${JSON.stringify(counts)}`);
process.exit(failed ? 1 : 0);
