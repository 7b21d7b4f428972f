// `pagoda fleet render --target kubernetes`: the fleet file as manifests. Per pool with a
// profile: a StatefulSet (a PersistentVolumeClaim per replica for its state directory:
// config versions, audit log, weight cache; resource requests and limits from the model and
// the KV cache; readiness on /ready, liveness on /health, a preStop pause so the router sees
// the pod leave before it drains, termination grace for the drain; scrape annotations), a
// headless Service whose DNS name the router re-resolves, a PodDisruptionBudget, and its
// autoscaler (fleet_render_scaling.cpp). The router: a ConfigMap with its TOML (pools by
// DNS, the schedule: schedules run in the router), a Deployment and a Service. The keys in a
// Secret, never in the ConfigMap; a ServiceMonitor for the Prometheus operator.
#include <fmt/format.h>

#include <filesystem>
#include <optional>

#include "apps/fleet_render_yaml.h"
#include "base/units.h"

namespace pagoda::app {

namespace render {

std::string q(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out + "\"";
}

std::string indent(const std::string& text, const char* pad) {
    std::string out;
    size_t b = 0;
    while (b < text.size()) {
        size_t e = text.find('\n', b);
        if (e == std::string::npos) e = text.size();
        out += pad + text.substr(b, e - b) + "\n";
        b = e + 1;
    }
    return out;
}

std::string pool_object(const FleetFile& f, const router::PoolConfig& p) {
    return f.name + "-" + p.name;
}

}  // namespace render

namespace {

using render::indent;
using render::q;

constexpr int64_t kMiB = int64_t(1) << 20;

std::string args_yaml(const std::vector<std::string>& args, const char* pad) {
    std::string out;
    for (const auto& a : args) out += fmt::format("{}- {}\n", pad, q(a));
    return out;
}

// The value of a profile's flag ("--kv-cache-memory" "4GiB"), if given.
std::optional<std::string> flag(const Profile& prof, std::string_view name) {
    for (size_t i = 0; i + 1 < prof.args.size(); ++i) {
        if (prof.args[i] == name) return prof.args[i + 1];
    }
    return std::nullopt;
}

// What a replica of the profile asks for. CPU engine: the model file (mapped) + its packed
// copy in the weight cache's pages + the KV cache + 512 MiB for the process, CPUs for its
// threads; the simulated backend models the GPU and needs little of the node. The state
// volume holds the weight cache (the model's size again) and the database.
struct Sizing {
    std::string resources;
    int64_t state_bytes = 1024 * kMiB;
    std::string note;
};

Sizing pod_sizing(const Profile& prof) {
    Sizing s;
    if (flag(prof, "--backend").value_or("cpu") == "sim") {
        s.resources = "requests: {cpu: \"1\", memory: 1Gi}\nlimits: {memory: 2Gi}\n";
        s.note = fmt::format("simulated {} on {}: no GPU asked for",
                             flag(prof, "--sim-model").value_or("model"),
                             flag(prof, "--sim-gpu").value_or("a GPU"));
        return s;
    }
    int64_t model = 0;
    std::error_code ec;
    if (auto m = flag(prof, "--model")) model = int64_t(std::filesystem::file_size(*m, ec));
    if (ec) model = 0;
    int64_t kv = 256 * kMiB;  // --kv-cache-memory's default
    if (auto k = flag(prof, "--kv-cache-memory")) {
        if (auto b = parse_memory(*k); b && *b > 0) kv = *b;
    }
    const int64_t mem = 2 * model + kv + 512 * kMiB;
    const std::string cpus = flag(prof, "--threads").value_or("2");
    s.resources = fmt::format("requests: {{cpu: \"{}\", memory: {}Mi}}\nlimits: {{memory: {}Mi}}\n",
                              cpus, mem / kMiB, mem / kMiB);
    s.state_bytes += model;
    s.note = fmt::format("model {} MiB x 2 (mapped and packed) + KV {} MiB + 512 MiB", model / kMiB,
                         kv / kMiB);
    return s;
}

// The keys the fleet file holds, as a Secret's entries (nothing when it holds none).
std::vector<std::pair<std::string, std::string>> keys(const FleetFile& f) {
    std::vector<std::pair<std::string, std::string>> k;
    const auto& c = f.router;
    std::string admin = c.backend_admin_key;
    if (admin.empty() && !c.admin_api_keys.empty()) admin = c.admin_api_keys[0];
    if (!admin.empty()) k.emplace_back("admin-api-key", admin);
    if (!c.api_keys.empty()) k.emplace_back("api-key", c.api_keys[0]);
    return k;
}

std::string secret(const FleetFile& f, const std::string& ns) {
    const auto k = keys(f);
    std::string data;
    for (const auto& [name, value] : k) data += fmt::format("  {}: {}\n", name, q(value));
    if (k.empty()) {
        return fmt::format(
            "# No keys in {}: create them before exposing the fleet, e.g.\n#   kubectl -n "
            "{} create secret generic {}-keys --from-literal=admin-api-key=$(openssl rand -hex "
            "16)\n# (the pods read the Secret when it exists).\n",
            f.path, ns, f.name);
    }
    return fmt::format(R"(---
apiVersion: v1
kind: Secret
metadata:
  name: {fleet}-keys
  namespace: {ns}
  labels: {{app.kubernetes.io/name: {fleet}}}
type: Opaque
stringData:
{data})",
                       fmt::arg("fleet", f.name), fmt::arg("ns", ns), fmt::arg("data", data));
}

// Environment from the keys' Secret (optional: a fleet without keys runs without it).
std::string key_env(const FleetFile& f, bool router) {
    std::string env =
        "env:\n"
        "  - name: PAGODA_ADMIN_API_KEY\n"
        "    valueFrom: {secretKeyRef: {name: " +
        f.name + "-keys, key: admin-api-key, optional: true}}\n";
    if (router) {
        env +=
            "  - name: PAGODA_BACKEND_ADMIN_KEY\n"
            "    valueFrom: {secretKeyRef: {name: " +
            f.name +
            "-keys, key: admin-api-key, optional: true}}\n"
            "  - name: PAGODA_API_KEY\n"
            "    valueFrom: {secretKeyRef: {name: " +
            f.name + "-keys, key: api-key, optional: true}}\n";
    }
    return env;
}

std::string pool_manifests(const FleetFile& f, const router::PoolConfig& p, const std::string& ns) {
    const std::string name = render::pool_object(f, p);
    const Profile& prof = f.profiles.at(p.profile);
    std::vector<std::string> args = {"serve", "--host",      "0.0.0.0",        "--port",
                                     "8000",  "--state-dir", "/var/lib/pagoda"};
    args.insert(args.end(), prof.args.begin(), prof.args.end());
    const int grace = int(f.drain_timeout_s) + 15;
    const Sizing sz = pod_sizing(prof);
    const int start = render::start_replicas(f, p);
    return fmt::format(
        R"(---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {name}
  namespace: {ns}
  labels: {{app.kubernetes.io/name: {fleet}, pagoda.dev/pool: {pool}, pagoda.dev/profile: {profile}}}
spec:
  serviceName: {name}
  replicas: {replicas}{start_note}
  podManagementPolicy: Parallel
  selector:
    matchLabels: {{app.kubernetes.io/name: {fleet}, pagoda.dev/pool: {pool}}}
  template:
    metadata:
      labels: {{app.kubernetes.io/name: {fleet}, pagoda.dev/pool: {pool}, pagoda.dev/profile: {profile}}}
      annotations: {{prometheus.io/scrape: "true", prometheus.io/port: "8000", prometheus.io/path: /metrics}}
    spec:
      terminationGracePeriodSeconds: {grace}
      containers:
        - name: pagoda
          image: {image}
          args:
{args}          ports:
            - {{name: http, containerPort: 8000}}
{env}          # {note}
          resources:
{resources}          readinessProbe:
            httpGet: {{path: /ready, port: 8000}}
            periodSeconds: 2
            failureThreshold: 1
          livenessProbe:
            httpGet: {{path: /health, port: 8000}}
            periodSeconds: 10
            failureThreshold: 3
          lifecycle:
            preStop:
              sleep: {{seconds: 5}}
          volumeMounts:
            - {{name: state, mountPath: /var/lib/pagoda}}
  volumeClaimTemplates:
    - metadata:
        name: state
      spec:
        accessModes: [ReadWriteOnce]
        resources:
          requests: {{storage: {state}Mi}}
---
apiVersion: v1
kind: Service
metadata:
  name: {name}
  namespace: {ns}
  labels: {{app.kubernetes.io/name: {fleet}, pagoda.dev/pool: {pool}}}
spec:
  clusterIP: None
  publishNotReadyAddresses: false
  selector: {{app.kubernetes.io/name: {fleet}, pagoda.dev/pool: {pool}}}
  ports:
    - {{name: http, port: 8000, targetPort: 8000}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {name}
  namespace: {ns}
spec:
  maxUnavailable: 1
  selector:
    matchLabels: {{app.kubernetes.io/name: {fleet}, pagoda.dev/pool: {pool}}}
)",
        fmt::arg("name", name), fmt::arg("ns", ns), fmt::arg("fleet", f.name),
        fmt::arg("pool", p.name), fmt::arg("profile", p.profile), fmt::arg("replicas", start),
        fmt::arg("start_note",
                 start == p.replicas ? "" : "  # at zero until the schedule pre-warms it"),
        fmt::arg("grace", grace), fmt::arg("image", q(f.image)),
        fmt::arg("args", args_yaml(args, "            ")),
        fmt::arg("env", indent(key_env(f, false), "          ")), fmt::arg("note", sz.note),
        fmt::arg("resources", indent(sz.resources, "            ")),
        fmt::arg("state", sz.state_bytes / kMiB));
}

// Prometheus operator: every replica and the router, with the pool label the exported
// rules aggregate by.
std::string service_monitor(const FleetFile& f, const std::string& ns) {
    return fmt::format(R"(---
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: {fleet}
  namespace: {ns}
  labels: {{app.kubernetes.io/name: {fleet}}}
spec:
  selector:
    matchLabels: {{app.kubernetes.io/name: {fleet}}}
  endpoints:
    - port: http
      path: /metrics
      interval: 15s
      relabelings:
        - sourceLabels: [__meta_kubernetes_pod_label_pagoda_dev_pool]
          targetLabel: pool
)",
                       fmt::arg("fleet", f.name), fmt::arg("ns", ns));
}

// The router's TOML inside the cluster: profile pools become DNS pools. Keys come from the
// environment (the Secret), never from this ConfigMap.
std::string router_toml(const FleetFile& f, const std::string& ns) {
    const router::RouterConfig& c = f.router;
    std::string t = fmt::format(
        "[router]\nhost = \"0.0.0.0\"\nport = 9000\nmax_retries = {}\nmax_resumes = {}\n"
        "breaker_threshold = {}\nbreaker_window_s = {}\nbreaker_min_samples = {}\n"
        "breaker_rollback_windows = {}\ncanary_tolerance = {}\ncanary_min_samples = {}\n"
        "hold_timeout_s = {}\n",
        c.max_retries, c.max_resumes, c.breaker_threshold, c.breaker_window_s,
        c.breaker_min_samples, c.breaker_rollback_windows, c.canary_tolerance, c.canary_min_samples,
        c.hold_timeout_s);
    for (const auto& p : c.pools) {
        t += fmt::format("[[router.pools]]\nname = {}\nrole = \"{}\"\n", q(p.name),
                         router::role_name(p.role));
        if (p.weight >= 0) t += fmt::format("weight = {}\n", p.weight);
        if (!p.profile.empty()) {
            t += fmt::format("dns = \"http://{}.{}.svc.cluster.local:8000\"\n",
                             render::pool_object(f, p), ns);
        } else if (!p.dns.empty()) {
            t += fmt::format("dns = {}\n", q(p.dns));
        } else {
            t += "backends = [";
            for (size_t i = 0; i < p.backends.size(); ++i) {
                t += (i ? ", " : "") + q(p.backends[i]);
            }
            t += "]\n";
        }
    }
    if (!c.schedule.empty()) {
        t += fmt::format("[schedule]\ntime_zone = {}\nentries = [", q(c.schedule_time_zone));
        for (size_t i = 0; i < c.schedule.size(); ++i) t += (i ? ", " : "") + q(c.schedule[i]);
        t += "]\n";
    }
    return t;
}

std::string router_manifests(const FleetFile& f, const std::string& ns) {
    return fmt::format(R"(---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {fleet}-router
  namespace: {ns}
data:
  router.toml: |
{toml}---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {fleet}-router
  namespace: {ns}
  labels: {{app.kubernetes.io/name: {fleet}, app.kubernetes.io/component: router}}
spec:
  replicas: 1
  selector:
    matchLabels: {{app.kubernetes.io/name: {fleet}, app.kubernetes.io/component: router}}
  template:
    metadata:
      labels: {{app.kubernetes.io/name: {fleet}, app.kubernetes.io/component: router}}
      annotations: {{prometheus.io/scrape: "true", prometheus.io/port: "9000", prometheus.io/path: /metrics}}
    spec:
      containers:
        - name: router
          image: {image}
          args: ["router", "--config", "/etc/pagoda/router.toml", "--state-dir", "/var/lib/pagoda"]
          ports:
            - {{name: http, containerPort: 9000}}
{env}          resources:
            requests: {{cpu: 500m, memory: 256Mi}}
            limits: {{memory: 1Gi}}
          readinessProbe:
            httpGet: {{path: /ready, port: 9000}}
            periodSeconds: 2
          livenessProbe:
            httpGet: {{path: /health, port: 9000}}
            periodSeconds: 10
          volumeMounts:
            - {{name: config, mountPath: /etc/pagoda}}
            - {{name: state, mountPath: /var/lib/pagoda}}
      volumes:
        - name: config
          configMap: {{name: {fleet}-router}}
        - name: state
          emptyDir: {{}}
---
apiVersion: v1
kind: Service
metadata:
  name: {fleet}-router
  namespace: {ns}
  labels: {{app.kubernetes.io/name: {fleet}, app.kubernetes.io/component: router}}
spec:
  selector: {{app.kubernetes.io/name: {fleet}, app.kubernetes.io/component: router}}
  ports:
    - {{name: http, port: 9000, targetPort: 9000}}
)",
                       fmt::arg("fleet", f.name), fmt::arg("ns", ns),
                       fmt::arg("toml", indent(router_toml(f, ns), "    ")),
                       fmt::arg("env", indent(key_env(f, true), "          ")),
                       fmt::arg("image", q(f.image)));
}

}  // namespace

std::string render_kubernetes(const FleetFile& f, const std::string& ns) {
    std::string out =
        fmt::format("# Rendered by `pagoda fleet render --target kubernetes` from {} (image {}).\n",
                    f.path, f.image);
    out += secret(f, ns);
    for (const auto& p : f.router.pools) {
        if (p.profile.empty()) continue;
        out += pool_manifests(f, p, ns);
        out += render::autoscaler(f, p, ns);
    }
    return out + router_manifests(f, ns) + service_monitor(f, ns);
}

}  // namespace pagoda::app
