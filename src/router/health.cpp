// The health checker and backend discovery (router_core.h).
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <fstream>
#include <future>
#include <set>
#include <sstream>

#include "base/log.h"
#include "metrics/prom_text.h"
#include "router/router_core.h"

namespace pagoda::router {

namespace {

struct Fetched {
    bool ok = false;
    int status = 0;
    std::string body, error;
};

// GETs path from every client at once; each answer is bounded by the client's timeouts.
std::vector<Fetched> fetch_all(const std::vector<http::Client*>& clients, const std::string& path) {
    std::vector<std::shared_ptr<std::promise<Fetched>>> ps;
    std::vector<std::future<Fetched>> fs;
    for (http::Client* c : clients) {
        auto p = std::make_shared<std::promise<Fetched>>();
        fs.push_back(p->get_future());
        auto out = std::make_shared<Fetched>();
        http::ClientCallbacks cb;
        cb.on_status = [out](int s) { out->status = s; };
        cb.on_body = [out](std::string_view b) {
            if (out->body.size() < (4u << 20)) out->body.append(b);
        };
        cb.on_done = [out, p](const http::ClientError* e) {
            out->ok = e == nullptr;
            if (e) out->error = e->message;
            p->set_value(std::move(*out));
        };
        c->start({.method = "GET", .path = path, .body = {}, .content_type = {}, .headers = {}},
                 std::move(cb));
    }
    std::vector<Fetched> out;
    for (auto& f : fs) out.push_back(f.get());
    return out;
}

void read_metrics(const std::string& text, HealthState& h) {
    const metrics::ParsedText t = metrics::parse_text(text);
    double waiting = 0, kv = 0;
    for (const auto& s : t.samples) {
        if (s.name == "vllm:num_requests_waiting") waiting += s.value;
        if (s.name == "vllm:kv_cache_usage_perc") kv = std::max(kv, s.value);
        if (s.name.starts_with("pagoda_")) h.pagoda = true;
    }
    h.waiting = waiting;
    h.kv_usage = kv;
}

std::vector<std::string> file_urls(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
        const auto b = line.find_first_not_of(" \t\r");
        if (b == std::string::npos) continue;
        const auto e = line.find_last_not_of(" \t\r");
        std::string url = line.substr(b, e - b + 1);
        if (http::parse_url(url)) {
            out.push_back(url);
        } else {
            log_warn("router_backends_file bad_line=\"{}\"", url);
        }
    }
    return out;
}

Result<std::vector<std::string>> resolve(const std::string& dns_url) {
    PAGODA_ASSIGN_OR_RETURN(http::Url u, http::parse_url(dns_url));
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const int rc = getaddrinfo(u.host.c_str(), u.port.c_str(), &hints, &res);
    if (rc != 0) {
        return make_error(ErrorCode::kNotFound, "cannot resolve {}: {}", u.host, gai_strerror(rc));
    }
    std::set<std::string> urls;
    for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
        char buf[INET6_ADDRSTRLEN] = {};
        if (a->ai_family == AF_INET) {
            inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, buf,
                      sizeof(buf));
            urls.insert(fmt::format("http://{}:{}{}", buf, u.port, u.base_path));
        } else if (a->ai_family == AF_INET6) {
            inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr, buf,
                      sizeof(buf));
            urls.insert(fmt::format("http://[{}]:{}{}", buf, u.port, u.base_path));
        }
    }
    freeaddrinfo(res);
    return std::vector<std::string>(urls.begin(), urls.end());
}

void discover(Core& core) {
    for (const PoolConfig& p : core.pool_configs()) {
        if (!p.backends_file.empty()) {
            std::ifstream in(p.backends_file);
            std::stringstream ss;
            ss << in.rdbuf();
            const std::string sig = in ? ss.str() : std::string("\x01missing");
            if (sig == core.source_sig(p.name)) continue;
            if (!in) {
                log_warn(
                    "router_backends_file pool={} file={} error=\"cannot read it; keeping "
                    "the last backends\"",
                    p.name, p.backends_file);
                core.set_members(p.name, {}, sig);  // static backends stay
                continue;
            }
            core.set_members(p.name, file_urls(sig), sig);
        } else if (!p.dns.empty()) {
            auto urls = resolve(p.dns);
            if (!urls) {
                log_warn("router_dns pool={} error=\"{}\"", p.name, urls.error().message);
                continue;
            }
            std::string sig;
            for (const auto& u : *urls) sig += u + "\n";
            if (sig != core.source_sig(p.name)) core.set_members(p.name, *urls, sig);
        }
    }
}

}  // namespace

void check_all(Core& core) {
    discover(core);
    const auto backends = core.all_backends();
    std::vector<http::Client*> clients;
    for (const auto& b : backends) clients.push_back(&b->health_client());
    auto ready = fetch_all(clients, "/ready");
    // A backend without /ready (llama.cpp, vLLM) answers 404: its /health says ready.
    std::vector<http::Client*> no_ready;
    for (size_t i = 0; i < backends.size(); ++i) {
        if (ready[i].ok && ready[i].status == 404) no_ready.push_back(clients[i]);
    }
    auto health = fetch_all(no_ready, "/health");
    auto metrics_text = fetch_all(clients, "/metrics");
    size_t hi = 0;
    for (size_t i = 0; i < backends.size(); ++i) {
        HealthState h;
        h.checked = true;
        Fetched r = ready[i];
        if (r.ok && r.status == 404) r = health[hi++];
        h.up = r.ok;
        h.ready = r.ok && r.status == 200;
        h.shedding = r.ok && r.status == 503 && r.body.find("shedding") != std::string::npos;
        h.detail = !r.ok ? r.error : h.ready ? "" : fmt::format("HTTP {}: {}", r.status, r.body);
        if (metrics_text[i].ok && metrics_text[i].status == 200) {
            read_metrics(metrics_text[i].body, h);
        }
        const HealthState before = backends[i]->health();
        if (before.checked &&
            (before.ready != h.ready || before.up != h.up || before.shedding != h.shedding)) {
            log_info("router_backend pool={} backend={} up={} ready={} shedding={}",
                     backends[i]->pool(), backends[i]->url(), h.up, h.ready, h.shedding);
        }
        backends[i]->set_health(std::move(h));
    }
}

void health_loop(const std::shared_ptr<Core>& core) {
    while (!core->stopping.load()) {
        const auto next = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(int64_t(core->cfg.health_interval_s * 1000));
        check_all(*core);
        while (!core->stopping.load() && std::chrono::steady_clock::now() < next) {
            core->release_held();
            core->drop_retired();
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
    core->release_held();  // stopping: every held request gets its 503
}

}  // namespace pagoda::router
