#pragma once
// What the two halves of `pagoda fleet render` share (fleet_render.cpp: replicas, router,
// keys, monitoring; fleet_render_scaling.cpp: autoscalers and schedules).
#include <string>

#include "apps/fleet_file.h"

namespace pagoda::app::render {

// A YAML double-quoted scalar.
std::string q(const std::string& s);
// `text` with `pad` before every line.
std::string indent(const std::string& text, const char* pad);
// "{fleet}-{pool}": the pool's StatefulSet, headless Service, PDB and autoscaler.
std::string pool_object(const FleetFile& f, const router::PoolConfig& p);
// The replicas a pool's StatefulSet starts with: 0 for a pool a schedule pre-warms.
int start_replicas(const FleetFile& f, const router::PoolConfig& p);
// The pool's autoscaler, if any: HPA or KEDA ScaledObject for a sized pool, a KEDA cron
// trigger for a pool a schedule pre-warms (both in one ScaledObject when both apply).
std::string autoscaler(const FleetFile& f, const router::PoolConfig& p, const std::string& ns);

}  // namespace pagoda::app::render
