// `pagoda fleet render`: each pool's autoscaler. A sized pool (min/max_replicas) gets an
// autoscaling/v2 HorizontalPodAutoscaler on the replicas' metrics (Pods metrics through a
// Prometheus adapter) when it never goes below one replica, a KEDA ScaledObject (Prometheus
// triggers, scale to zero) when it may. A pool that a schedule pre-warms starts at zero and
// gets a KEDA cron trigger from the pre-warm to a few minutes after the traffic goes back,
// in the schedule's time zone; with sizing too, both kinds of trigger share one ScaledObject.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "apps/fleet_render_yaml.h"
#include "router/schedule.h"

namespace pagoda::app::render {

namespace {

struct Window {
    int start_minute = 0, end_minute = 0;  // local minutes of day
    std::string time_zone;
};

// From the pool's pre-warm to the next "reverse" (the traffic goes back) plus the drain.
std::optional<Window> prewarm_window(const FleetFile& f, const router::PoolConfig& p) {
    const auto& c = f.router;
    if (p.start != "prewarm" || c.schedule.empty()) return std::nullopt;
    auto s = router::parse_schedule(c.schedule_time_zone, c.schedule);
    if (!s) return std::nullopt;
    using A = router::ScheduleEntry::Action;
    const auto& e = s->entries;
    const auto warm = std::find_if(e.begin(), e.end(), [&](const router::ScheduleEntry& x) {
        return x.action == A::kPrewarm && x.pool == p.name;
    });
    if (warm == e.end()) return std::nullopt;
    Window w{warm->minute_of_day, -1, s->time_zone};
    for (size_t i = 1; i <= e.size() && w.end_minute < 0; ++i) {  // the next reverse, cyclically
        const auto& x = e[(size_t(warm - e.begin()) + i) % e.size()];
        if (x.action == A::kReverse) w.end_minute = x.minute_of_day;
    }
    if (w.end_minute < 0) return std::nullopt;
    const int margin = int(f.drain_timeout_s + 59) / 60 + 5;  // the last streams drain first
    w.end_minute = (w.end_minute + margin) % (24 * 60);
    return w;
}

std::string cron(int minute_of_day) {
    return fmt::format("{} {} * * *", minute_of_day % 60, minute_of_day / 60);
}

std::string behavior(const router::PoolConfig::Sizing& z, const char* pad) {
    return indent(fmt::format(R"(behavior:
  scaleUp:
    stabilizationWindowSeconds: 0
    policies: [{{type: Pods, value: 4, periodSeconds: {}}}]
  scaleDown:
    stabilizationWindowSeconds: {}
    policies: [{{type: Pods, value: 1, periodSeconds: {}}}]
)",
                              std::max(1, int(z.up_cooldown_s)), int(z.down_stabilisation_s),
                              std::max(1, int(z.down_cooldown_s))),
                  pad);
}

std::string hpa(const FleetFile& f, const router::PoolConfig& p, const std::string& ns) {
    const auto& z = p.sizing;
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
  scaleTargetRef: {{apiVersion: apps/v1, kind: StatefulSet, name: {name}}}
  minReplicas: {min}
  maxReplicas: {max}
  metrics:
{metrics}{behavior})",
                       fmt::arg("pool", p.name), fmt::arg("name", pool_object(f, p)),
                       fmt::arg("ns", ns), fmt::arg("min", z.min_replicas),
                       fmt::arg("max", z.max_replicas), fmt::arg("metrics", metrics),
                       fmt::arg("behavior", behavior(z, "  ")));
}

std::string prometheus_triggers(const FleetFile& f, const router::PoolConfig& p) {
    return fmt::format(R"(    - type: prometheus
      metadata:
        serverAddress: {prom}
        query: sum(vllm:num_requests_waiting{{pool="{pool}"}})
        threshold: "{waiting}"
    - type: prometheus
      metadata:
        serverAddress: {prom}
        query: sum(pagoda_router_held_requests)
        threshold: "1"
        activationThreshold: "0"
)",
                       fmt::arg("prom", f.prometheus_url), fmt::arg("pool", p.name),
                       fmt::arg("waiting", p.sizing.target_waiting));
}

std::string cron_trigger(const Window& w, int replicas) {
    return fmt::format(R"(    - type: cron
      metadata:
        timezone: {tz}
        start: "{start}"
        end: "{end}"
        desiredReplicas: "{n}"
)",
                       fmt::arg("tz", q(w.time_zone)), fmt::arg("start", cron(w.start_minute)),
                       fmt::arg("end", cron(w.end_minute)), fmt::arg("n", replicas));
}

std::string scaled_object(const FleetFile& f, const router::PoolConfig& p, const std::string& ns,
                          const std::optional<Window>& w) {
    const auto& z = p.sizing;
    const int max = p.sized() ? z.max_replicas : p.replicas;
    std::string why = p.sized() ? fmt::format(
                                      "Pool sizing of {} with scale to zero: KEDA on the "
                                      "replicas' metrics in Prometheus. While the pool is at "
                                      "zero\n# the router holds requests (hold_timeout_s) and "
                                      "the trigger on its held requests wakes it.",
                                      p.name)
                                : "";
    if (w) {
        why += fmt::format(
            "{}The schedule pre-warms {} at {:02}:{:02} ({}): it runs from then "
            "until {:02}:{:02}, after the\n# traffic went back and the last "
            "streams drained, and is at zero the rest of the day.",
            why.empty() ? "" : "\n# ", p.name, w->start_minute / 60, w->start_minute % 60,
            w->time_zone, w->end_minute / 60, w->end_minute % 60);
    }
    std::string triggers = w ? cron_trigger(*w, std::max(1, p.replicas)) : "";
    if (p.sized()) triggers += prometheus_triggers(f, p);
    return fmt::format(R"(---
# {why}
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: {name}
  namespace: {ns}
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: StatefulSet, name: {name}}}
  minReplicaCount: {min}
  maxReplicaCount: {max}
  pollingInterval: 5
  cooldownPeriod: {idle}
  advanced:
    horizontalPodAutoscalerConfig:
{behavior}  triggers:
{triggers})",
                       fmt::arg("why", why), fmt::arg("name", pool_object(f, p)),
                       fmt::arg("ns", ns), fmt::arg("min", p.sized() ? z.min_replicas : 0),
                       fmt::arg("max", max),
                       fmt::arg("idle", int(p.sized() ? z.idle_to_zero_s : 300)),
                       fmt::arg("behavior", behavior(z, "      ")), fmt::arg("triggers", triggers));
}

}  // namespace

int start_replicas(const FleetFile& f, const router::PoolConfig& p) {
    return prewarm_window(f, p) ? 0 : p.replicas;
}

std::string autoscaler(const FleetFile& f, const router::PoolConfig& p, const std::string& ns) {
    const auto w = prewarm_window(f, p);
    if (!w && !p.sized()) return "";
    if (!w && p.sizing.min_replicas >= 1) return hpa(f, p, ns);
    return scaled_object(f, p, ns, w);
}

}  // namespace pagoda::app::render
