// ControlService (admin.h): the control plane's tick thread and its admin route families.
#include "control/admin.h"

#include <condition_variable>
#include <mutex>
#include <thread>

#include "base/log.h"

namespace pagoda::control {

namespace {

using server::AdminReply;

int status_of(ErrorCode code) {
    switch (code) {
        case ErrorCode::kInvalidArgument:
        case ErrorCode::kInvalidFile:
        case ErrorCode::kOutOfRange: return 400;
        case ErrorCode::kNotFound: return 404;
        case ErrorCode::kConflict: return 409;
        case ErrorCode::kUnsupported: return 501;
        default: return 500;
    }
}

AdminReply failure(const Error& e, const ConfigVersion& current) {
    const int status = status_of(e.code);
    const char* type = status == 409   ? "conflict_error"
                       : status == 404 ? "not_found_error"
                       : status < 500  ? "invalid_request_error"
                                       : "server_error";
    nlohmann::json err = {
        {"message", e.message}, {"type", type}, {"param", nullptr}, {"code", status}};
    return {status, {{"error", err}, {"current_version", current.id}}};
}

class Service final : public ControlService,
                      public server::ConfigRoutes,
                      public server::ControlRoutes,
                      public server::AlertRoutes,
                      public server::WarmRoutes,
                      public std::enable_shared_from_this<Service> {
  public:
    Service(std::unique_ptr<ControlPlane> cp, std::unique_ptr<Alerting> al)
        : cp_(std::move(cp)), m_(&cp_->config()), alerting_(std::move(al)) {
        if (Alerting* a = alerting_.get()) {
            cp_->set_warm_suspender([a] { return a->shedding() || a->critical_firing(); });
        }
    }
    ~Service() override { stop(); }

    server::AdminRoutes routes() override {
        auto self = shared_from_this();
        server::AdminRoutes r;
        r.config = std::shared_ptr<server::ConfigRoutes>(self, this);
        r.control = std::shared_ptr<server::ControlRoutes>(self, this);
        if (alerting_) r.alerts = std::shared_ptr<server::AlertRoutes>(self, this);
        r.warm = std::shared_ptr<server::WarmRoutes>(self, this);
        r.metrics_text = [self](const std::string& model) { return self->metrics_text(model); };
        return r;
    }

    void start_ticking() override {
        if (!ticker_.joinable()) ticker_ = std::thread([this] { tick_loop(); });
        if (alerting_) alerting_->start();
    }
    void stop() override {
        {
            std::lock_guard<std::mutex> lock(mu_);
            stop_ = true;
        }
        cv_.notify_all();
        if (ticker_.joinable()) ticker_.join();
        cp_->set_warm_suspender({});
        alerting_.reset();
    }
    void note_startup_warmup(double seconds, const std::string& mode, int requests_ok,
                             int requests) override {
        cp_->note_startup_warmup(seconds, mode, requests_ok, requests);
    }

    AdminReply get() override { return {200, m_->current().to_json()}; }

    AdminReply history(int limit) override {
        auto h = m_->history(limit);
        if (!h.ok()) return failure(h.error(), m_->current());
        nlohmann::json versions = nlohmann::json::array();
        for (const auto& v : *h) versions.push_back(v.to_json());
        return {200, {{"current_version", m_->current().id}, {"versions", versions}}};
    }

    AdminReply put(const nlohmann::json& patch, std::optional<int64_t> base,
                   const std::string& reason) override {
        ChangeRequest r;
        r.patch = patch;
        r.base_version = base;
        r.reason = reason;
        auto v = m_->change(r);
        audit_manual("config_change", {{"patch", patch}, {"reason", reason}}, v);
        if (!v.ok()) return failure(v.error(), m_->current());
        return {200, v->to_json()};
    }

    AdminReply rollback(std::optional<int64_t> to, const std::string& reason) override {
        auto v = m_->rollback(to, reason);
        audit_manual(
            "config_rollback",
            {{"to", to ? nlohmann::json(*to) : nlohmann::json(nullptr)}, {"reason", reason}}, v);
        if (!v.ok()) return failure(v.error(), m_->current());
        return {200, v->to_json()};
    }

    AdminReply block_size(bool decide_now) override {
        if (decide_now) cp_->decide_block_size(unix_ms_now());
        return {200, cp_->block_size_report()};
    }

    AdminReply oom_guard() override { return {200, cp_->guard_report()}; }

    AdminReply automation(const std::optional<nlohmann::json>& put) override {
        if (put) {
            const auto mode = put->find("mode");
            if (mode == put->end() || !mode->is_string()) {
                return failure(Error{ErrorCode::kInvalidArgument,
                                     "body must be {\"mode\": \"on\" | \"dry-run\" | \"paused\", "
                                     "\"reason\": \"...\"}"},
                               m_->current());
            }
            auto a = parse_automation(mode->get<std::string>());
            if (!a.ok()) return failure(a.error(), m_->current());
            const std::string reason = put->value("reason", std::string("admin API"));
            if (Status st = cp_->set_automation(*a, reason); !st.ok()) {
                return failure(st.error(), m_->current());
            }
        }
        return {200, {{"mode", automation_name(cp_->automation())}}};
    }

    AdminReply events(const std::string& kind, int limit) override {
        auto ev = cp_->events(kind, limit);
        if (!ev.ok()) return failure(ev.error(), m_->current());
        return {200, {{"events", *ev}}};
    }

    std::string metrics_text(const std::string& model_name) {
        std::string text = cp_->metrics_text(model_name);
        if (alerting_) text += alerting_->metrics_text(model_name);
        return text;
    }

    AdminReply alerts() override {
        if (!alerting_) return stopped();
        return {200, alerting_->status()};
    }

    AdminReply rules(bool reload) override {
        if (!alerting_) return stopped();
        if (reload) {
            if (Status st = alerting_->reload(); !st.ok())
                return failure(st.error(), m_->current());
        }
        return {200, alerting_->rules_json()};
    }

    AdminReply alert_webhook(const nlohmann::json& payload) override {
        if (!alerting_) return stopped();
        auto r = alerting_->alertmanager(payload, unix_ms_now());
        if (!r.ok()) return failure(r.error(), m_->current());
        return {200, *r};
    }

    AdminReply warmup(const std::optional<nlohmann::json>& post) override {
        if (post) {
            const auto level = post->find("level");
            if (!post->is_object() || level == post->end() || !level->is_string()) {
                return failure(Error{ErrorCode::kInvalidArgument,
                                     "body must be {\"level\": \"off\" | \"low\" | \"medium\" | "
                                     "\"high\" | \"full\", \"duration\": \"60s\"}"},
                               m_->current());
            }
            auto l = parse_warm_level(level->get<std::string>());
            if (!l.ok()) return failure(l.error(), m_->current());
            auto d = parse_duration_ms(post->value("duration", std::string("5m")));
            if (!d.ok()) return failure(d.error(), m_->current());
            if (Status st = cp_->set_warm_level(*l, *d, unix_ms_now()); !st.ok()) {
                return failure(st.error(), m_->current());
            }
            // Full runs on a thread of its own: accepted now, GET /admin/warmup says when done.
            if (*l == WarmLevel::kFull) return {202, cp_->warmup_report()};
        }
        return {200, cp_->warmup_report()};
    }

    AdminReply forecast() override {
        ForecastTier* f = cp_->forecast();
        if (f == nullptr) {
            return {404,
                    {{"error",
                      {{"message", "forecasting is off on this server (--no-forecast)"},
                       {"type", "not_found_error"},
                       {"param", nullptr},
                       {"code", 404}}}}};
        }
        return {200, f->report(unix_ms_now())};
    }

    // pause: a person takes over (automatic actions stop, everything is still recorded);
    // resume: back to the mode before the pause.
    AdminReply control(const std::string& verb) override {
        std::lock_guard<std::mutex> lock(mode_mu_);
        const Automation now = cp_->automation();
        if (verb == "pause" && now != Automation::kPaused) {
            before_pause_ = now;
            if (Status st = cp_->set_automation(Automation::kPaused, "POST /admin/control/pause");
                !st.ok()) {
                return failure(st.error(), m_->current());
            }
        } else if (verb == "resume" && now == Automation::kPaused) {
            if (Status st = cp_->set_automation(before_pause_, "POST /admin/control/resume");
                !st.ok()) {
                return failure(st.error(), m_->current());
            }
        }
        const Automation mode = cp_->automation();
        return {200,
                {{"mode", automation_name(mode)},
                 {"paused", mode == Automation::kPaused},
                 {"shedding", alerting_ && alerting_->shedding()}}};
    }

  private:
    // Alerting after stop(): shutting down.
    static AdminReply stopped() {
        return {503,
                {{"error",
                  {{"message", "the server is shutting down"},
                   {"type", "server_error"},
                   {"param", nullptr},
                   {"code", 503}}}}};
    }

    // A person's change through the admin API (PUT /admin/config, rollback), in the audit
    // log with its outcome, as every automatic action is.
    void audit_manual(const std::string& kind, nlohmann::json d, const Result<ConfigVersion>& v) {
        d["outcome"] = v.ok() ? "ok" : "refused";
        if (v.ok()) d["version"] = v->id;
        if (!v.ok()) d["error"] = v.error().message;
        const int64_t now = unix_ms_now();
        Status st = m_->with_db([&](StateDb& db) { return db.record_event(kind, d, now); });
        if (!st.ok()) log_warn("audit_log_failed kind={} error=\"{}\"", kind, st.error().message);
    }

    void tick_loop() {
        std::unique_lock<std::mutex> lock(mu_);
        while (!cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; })) {
            cp_->tick(unix_ms_now());
        }
    }

    std::unique_ptr<ControlPlane> cp_;
    ConfigManager* m_;
    std::unique_ptr<Alerting> alerting_;  // reset by stop()
    std::mutex mode_mu_;
    Automation before_pause_ = Automation::kOn;  // guarded by mode_mu_
    std::mutex mu_;
    std::condition_variable cv_;
    bool stop_ = false;  // guarded by mu_
    std::thread ticker_;
};

}  // namespace

std::shared_ptr<ControlService> start_control_service(std::unique_ptr<ControlPlane> plane,
                                                      std::unique_ptr<Alerting> alerting) {
    return std::make_shared<Service>(std::move(plane), std::move(alerting));
}

}  // namespace pagoda::control
