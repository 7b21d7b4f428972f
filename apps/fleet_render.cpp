// `pagoda fleet render --target kubernetes`: the fleet file as manifests. Per pool with a
// profile: a Deployment (readiness on /ready, liveness on /health, a preStop pause so the
// router sees the pod leave before it drains, termination grace for the drain) and a
// headless Service, whose DNS name the router re-resolves. The router: a ConfigMap with
// its TOML (pools by DNS, the schedule: schedules run in the router), a Deployment and a
// Service.
#include <fmt/format.h>

#include "apps/fleet_file.h"

namespace pagoda::app {

namespace {

// A YAML double-quoted scalar.
std::string q(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out + "\"";
}

std::string args_yaml(const std::vector<std::string>& args, const char* indent) {
    std::string out;
    for (const auto& a : args) out += fmt::format("{}- {}\n", indent, q(a));
    return out;
}

std::string pool_manifests(const FleetFile& f, const router::PoolConfig& p, const std::string& ns) {
    const std::string name = f.name + "-" + p.name;
    std::vector<std::string> args = {"serve", "--host", "0.0.0.0", "--port", "8000"};
    const auto& prof = f.profiles.at(p.profile).args;
    args.insert(args.end(), prof.begin(), prof.end());
    const int grace = int(f.drain_timeout_s) + 15;
    return fmt::format(R"(---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: {ns}
  labels: {{app.kubernetes.io/name: {fleet}, pagoda.dev/pool: {pool}, pagoda.dev/profile: {profile}}}
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app.kubernetes.io/name: {fleet}, pagoda.dev/pool: {pool}}}
  template:
    metadata:
      labels: {{app.kubernetes.io/name: {fleet}, pagoda.dev/pool: {pool}, pagoda.dev/profile: {profile}}}
    spec:
      terminationGracePeriodSeconds: {grace}
      containers:
        - name: pagoda
          image: {image}
          args:
{args}          ports:
            - {{name: http, containerPort: 8000}}
          readinessProbe:
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
)",
                       fmt::arg("name", name), fmt::arg("ns", ns), fmt::arg("fleet", f.name),
                       fmt::arg("pool", p.name), fmt::arg("profile", p.profile),
                       fmt::arg("replicas", p.replicas), fmt::arg("grace", grace),
                       fmt::arg("image", q(f.image)),
                       fmt::arg("args", args_yaml(args, "            ")));
}

// The router's TOML inside the cluster: profile pools become DNS pools.
std::string router_toml(const FleetFile& f, const std::string& ns) {
    const router::RouterConfig& c = f.router;
    std::string t = fmt::format(
        "[router]\nhost = \"0.0.0.0\"\nport = 9000\nmax_retries = {}\nmax_resumes = {}\n"
        "breaker_threshold = {}\nbreaker_window_s = {}\nbreaker_min_samples = {}\n"
        "breaker_rollback_windows = {}\ncanary_tolerance = {}\ncanary_min_samples = {}\n",
        c.max_retries, c.max_resumes, c.breaker_threshold, c.breaker_window_s,
        c.breaker_min_samples, c.breaker_rollback_windows, c.canary_tolerance,
        c.canary_min_samples);
    for (const auto& p : c.pools) {
        t += fmt::format("[[router.pools]]\nname = {}\nrole = \"{}\"\n", q(p.name),
                         router::role_name(p.role));
        if (p.weight >= 0) t += fmt::format("weight = {}\n", p.weight);
        if (!p.profile.empty()) {
            t += fmt::format("dns = \"http://{}-{}.{}.svc.cluster.local:8000\"\n", f.name, p.name,
                             ns);
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
    spec:
      containers:
        - name: router
          image: {image}
          args: ["router", "--config", "/etc/pagoda/router.toml"]
          ports:
            - {{name: http, containerPort: 9000}}
          readinessProbe:
            httpGet: {{path: /ready, port: 9000}}
            periodSeconds: 2
          livenessProbe:
            httpGet: {{path: /health, port: 9000}}
            periodSeconds: 10
          volumeMounts:
            - {{name: config, mountPath: /etc/pagoda}}
      volumes:
        - name: config
          configMap: {{name: {fleet}-router}}
---
apiVersion: v1
kind: Service
metadata:
  name: {fleet}-router
  namespace: {ns}
spec:
  selector: {{app.kubernetes.io/name: {fleet}, app.kubernetes.io/component: router}}
  ports:
    - {{name: http, port: 9000, targetPort: 9000}}
)",
                       fmt::arg("fleet", f.name), fmt::arg("ns", ns),
                       fmt::arg("toml", indent(router_toml(f, ns), "    ")),
                       fmt::arg("image", q(f.image)));
}

// A sized pool's autoscaler on the metrics its replicas export, with the fleet's bounds,
// cooldowns and stabilisation: an autoscaling/v2 HorizontalPodAutoscaler (Pods metrics
// through a Prometheus adapter) when min_replicas >= 1; a KEDA ScaledObject (Prometheus
// triggers, scale to zero) when min_replicas is 0.
std::string autoscaler(const FleetFile& f, const router::PoolConfig& p, const std::string& ns) {
    const std::string name = f.name + "-" + p.name;
    const auto& z = p.sizing;
    const std::string sel = fmt::format("pagoda_dev_pool=\"{}\"", p.name);
    const std::string behavior = fmt::format(R"(behavior:
  scaleUp:
    stabilizationWindowSeconds: 0
    policies: [{{type: Pods, value: 4, periodSeconds: {up}}}]
  scaleDown:
    stabilizationWindowSeconds: {stab}
    policies: [{{type: Pods, value: 1, periodSeconds: {down}}}]
)",
                                             fmt::arg("up", std::max(1, int(z.up_cooldown_s))),
                                             fmt::arg("stab", int(z.down_stabilisation_s)),
                                             fmt::arg("down", std::max(1, int(z.down_cooldown_s))));
    if (z.min_replicas >= 1) {
        std::string metrics = fmt::format(
            "    - type: Pods\n      pods:\n        metric: {{name: vllm_num_requests_waiting}}\n"
            "        target: {{type: AverageValue, averageValue: \"{}\"}}\n",
            z.target_waiting);
        if (z.replica_rps > 0) {
            metrics += fmt::format(
                "    - type: Pods\n      pods:\n        metric: {{name: "
                "vllm_request_success_per_second}}\n        target: {{type: AverageValue, "
                "averageValue: \"{:.3g}\"}}\n",
                z.replica_rps * 0.7);
        }
        return fmt::format(R"(---
# Pool sizing of {pool} (pagoda fleet's min/max_replicas): needs a Prometheus adapter that
# serves the replicas' vllm:num_requests_waiting (and the rate of vllm:request_success_total)
# as Pods metrics.
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {name}
  namespace: {ns}
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: {name}}}
  minReplicas: {min}
  maxReplicas: {max}
  metrics:
{metrics}{behavior})",
                           fmt::arg("pool", p.name), fmt::arg("name", name), fmt::arg("ns", ns),
                           fmt::arg("min", z.min_replicas), fmt::arg("max", z.max_replicas),
                           fmt::arg("metrics", metrics),
                           fmt::arg("behavior", indent(behavior, "  ")));
    }
    return fmt::format(R"(---
# Pool sizing of {pool} with scale to zero: KEDA (keda.sh) on the replicas' metrics in
# Prometheus. While the pool is at zero the router holds requests (hold_timeout_s) and
# KEDA's trigger on the router's held requests wakes it.
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: {name}
  namespace: {ns}
spec:
  scaleTargetRef: {{name: {name}}}
  minReplicaCount: 0
  maxReplicaCount: {max}
  pollingInterval: 5
  cooldownPeriod: {idle}
  advanced:
    horizontalPodAutoscalerConfig:
{behavior}  triggers:
    - type: prometheus
      metadata:
        serverAddress: {prom}
        query: sum(vllm:num_requests_waiting{{{sel}}})
        threshold: "{waiting}"
    - type: prometheus
      metadata:
        serverAddress: {prom}
        query: sum(pagoda_router_held_requests)
        threshold: "1"
        activationThreshold: "0"
)",
                       fmt::arg("pool", p.name), fmt::arg("name", name), fmt::arg("ns", ns),
                       fmt::arg("max", z.max_replicas), fmt::arg("idle", int(z.idle_to_zero_s)),
                       fmt::arg("behavior", indent(behavior, "      ")),
                       fmt::arg("prom", f.prometheus_url), fmt::arg("sel", sel),
                       fmt::arg("waiting", z.target_waiting));
}

}  // namespace

std::string render_kubernetes(const FleetFile& f, const std::string& ns) {
    std::string out = fmt::format(
        "# Rendered by `pagoda fleet render --target kubernetes` from "
        "{}.\n",
        f.path);
    for (const auto& p : f.router.pools) {
        if (!p.profile.empty()) out += pool_manifests(f, p, ns);
        if (!p.profile.empty() && p.sized()) out += autoscaler(f, p, ns);
    }
    return out + router_manifests(f, ns);
}

}  // namespace pagoda::app
