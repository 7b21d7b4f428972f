// Validates `pagoda fleet render --target kubernetes` output against the Kubernetes schemas
// offline (the kubernetes-models package), object by object (tests/fleet_test.sh).
// Usage: node validate_k8s.mjs MANIFESTS.yaml [ROUTER_TOML_OUT]
// Writes the router ConfigMap's router.toml to ROUTER_TOML_OUT when given.
import { readFileSync, writeFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";
import { Deployment } from "kubernetes-models/apps/v1";
import { ConfigMap, Service } from "kubernetes-models/v1";
import { HorizontalPodAutoscaler } from "kubernetes-models/autoscaling/v2";

// KEDA's ScaledObject is a custom resource kubernetes-models has no schema for: the fields
// KEDA requires, checked by hand (keda.sh/v1alpha1 ScaledObject spec).
class ScaledObject {
  constructor(o) { this.o = o; }
  validate() {
    const s = this.o.spec ?? {};
    if (!s.scaleTargetRef?.name) throw new Error("spec.scaleTargetRef.name is required");
    if (!Number.isInteger(s.minReplicaCount) || !Number.isInteger(s.maxReplicaCount) || s.minReplicaCount > s.maxReplicaCount)
      throw new Error("minReplicaCount <= maxReplicaCount, integers");
    if (!Array.isArray(s.triggers) || !s.triggers.length) throw new Error("spec.triggers must be a non-empty array");
    for (const t of s.triggers) {
      if (t.type !== "prometheus" || !t.metadata?.serverAddress || !t.metadata?.query || typeof t.metadata?.threshold !== "string")
        throw new Error("each prometheus trigger needs serverAddress, query and a string threshold");
    }
  }
}

const [file, tomlOut] = process.argv.slice(2);
const kinds = {
  "apps/v1/Deployment": Deployment, "v1/Service": Service, "v1/ConfigMap": ConfigMap,
  "autoscaling/v2/HorizontalPodAutoscaler": HorizontalPodAutoscaler, "keda.sh/v1alpha1/ScaledObject": ScaledObject,
};
const docs = parseAllDocuments(readFileSync(file, "utf8")).filter((d) => d.contents !== null);
const counts = {};
let failed = 0;
for (const doc of docs) {
  if (doc.errors.length) {
    console.log(`FAIL yaml: ${doc.errors[0].message}`);
    failed++;
    continue;
  }
  const obj = doc.toJS();
  const Model = kinds[`${obj.apiVersion}/${obj.kind}`];
  if (!Model) {
    console.log(`FAIL ${obj.apiVersion} ${obj.kind}: no schema checked for this kind`);
    failed++;
    continue;
  }
  try {
    new Model(obj).validate();
    counts[obj.kind] = (counts[obj.kind] ?? 0) + 1;
  } catch (e) {
    console.log(`FAIL ${obj.kind} ${obj.metadata?.name}: ${e.message}`);
    failed++;
  }
  if (obj.kind === "ConfigMap" && tomlOut) writeFileSync(tomlOut, obj.data["router.toml"]);
}
console.log(`${failed ? "FAIL" : "ok"} ${JSON.stringify(counts)}`);
process.exit(failed ? 1 : 0);
