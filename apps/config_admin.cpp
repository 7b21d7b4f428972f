#include "apps/config_admin.h"

#include <condition_variable>
#include <mutex>
#include <thread>

#include "base/log.h"

namespace pagoda::app {

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

AdminReply failure(const Error& e, const control::ConfigVersion& current) {
    const int status = status_of(e.code);
    const char* type = status == 409   ? "conflict_error"
                       : status == 404 ? "not_found_error"
                       : status < 500  ? "invalid_request_error"
                                       : "server_error";
    nlohmann::json err = {
        {"message", e.message}, {"type", type}, {"param", nullptr}, {"code", status}};
    return {status, {{"error", err}, {"current_version", current.id}}};
}

class Admin : public ControlAdmin {
  public:
    Admin(std::unique_ptr<control::ControlPlane> cp, std::unique_ptr<control::Alerting> al)
        : cp_(std::move(cp)), m_(&cp_->config()), alerting_(std::move(al)) {
        if (control::Alerting* a = alerting_.get()) {
            cp_->set_warm_suspender([a] { return a->shedding() || a->critical_firing(); });
        }
    }
    ~Admin() override { stop(); }

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
    void note_startup_warmup(double seconds) override { cp_->note_startup_warmup(seconds); }

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
        control::ChangeRequest r;
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
        if (decide_now) cp_->decide_block_size(control::unix_ms_now());
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
            auto a = control::parse_automation(mode->get<std::string>());
            if (!a.ok()) return failure(a.error(), m_->current());
            const std::string reason = put->value("reason", std::string("admin API"));
            if (Status st = cp_->set_automation(*a, reason); !st.ok()) {
                return failure(st.error(), m_->current());
            }
        }
        return {200, {{"mode", control::automation_name(cp_->automation())}}};
    }

    AdminReply events(const std::string& kind, int limit) override {
        auto ev = cp_->events(kind, limit);
        if (!ev.ok()) return failure(ev.error(), m_->current());
        return {200, {{"events", *ev}}};
    }

    std::string metrics_text(const std::string& model_name) override {
        std::string text = cp_->metrics_text(model_name);
        if (alerting_) text += alerting_->metrics_text(model_name);
        return text;
    }

    AdminReply alerts() override {
        if (!alerting_) return ConfigAdmin::alerts();
        return {200, alerting_->status()};
    }

    AdminReply rules(bool reload) override {
        if (!alerting_) return ConfigAdmin::rules(reload);
        if (reload) {
            if (Status st = alerting_->reload(); !st.ok())
                return failure(st.error(), m_->current());
        }
        return {200, alerting_->rules_json()};
    }

    AdminReply alert_webhook(const nlohmann::json& payload) override {
        if (!alerting_) return ConfigAdmin::alert_webhook(payload);
        auto r = alerting_->alertmanager(payload, control::unix_ms_now());
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
            auto l = control::parse_warm_level(level->get<std::string>());
            if (!l.ok()) return failure(l.error(), m_->current());
            auto d = control::parse_duration_ms(post->value("duration", std::string("5m")));
            if (!d.ok()) return failure(d.error(), m_->current());
            if (Status st = cp_->set_warm_level(*l, *d, control::unix_ms_now()); !st.ok()) {
                return failure(st.error(), m_->current());
            }
            // Full runs on a thread of its own: accepted now, GET /admin/warmup says when done.
            if (*l == control::WarmLevel::kFull) return {202, cp_->warmup_report()};
        }
        return {200, cp_->warmup_report()};
    }

    AdminReply forecast() override {
        control::ForecastTier* f = cp_->forecast();
        if (f == nullptr) {
            return {404,
                    {{"error",
                      {{"message", "forecasting is off on this server (--no-forecast)"},
                       {"type", "not_found_error"},
                       {"param", nullptr},
                       {"code", 404}}}}};
        }
        return {200, f->report(control::unix_ms_now())};
    }

    // pause: a person takes over (automatic actions stop, everything is still recorded);
    // resume: back to the mode before the pause.
    AdminReply control(const std::string& verb) override {
        std::lock_guard<std::mutex> lock(mode_mu_);
        const control::Automation now = cp_->automation();
        if (verb == "pause" && now != control::Automation::kPaused) {
            before_pause_ = now;
            if (Status st =
                    cp_->set_automation(control::Automation::kPaused, "POST /admin/control/pause");
                !st.ok()) {
                return failure(st.error(), m_->current());
            }
        } else if (verb == "resume" && now == control::Automation::kPaused) {
            if (Status st = cp_->set_automation(before_pause_, "POST /admin/control/resume");
                !st.ok()) {
                return failure(st.error(), m_->current());
            }
        }
        const control::Automation mode = cp_->automation();
        return {200,
                {{"mode", control::automation_name(mode)},
                 {"paused", mode == control::Automation::kPaused},
                 {"shedding", alerting_ && alerting_->shedding()}}};
    }

  private:
    // A person's change through the admin API (PUT /admin/config, rollback), in the audit
    // log with its outcome, as every automatic action is.
    void audit_manual(const std::string& kind, nlohmann::json d,
                      const Result<control::ConfigVersion>& v) {
        d["outcome"] = v.ok() ? "ok" : "refused";
        if (v.ok()) d["version"] = v->id;
        if (!v.ok()) d["error"] = v.error().message;
        const int64_t now = control::unix_ms_now();
        Status st =
            m_->with_db([&](control::StateDb& db) { return db.record_event(kind, d, now); });
        if (!st.ok()) log_warn("audit_log_failed kind={} error=\"{}\"", kind, st.error().message);
    }

    void tick_loop() {
        std::unique_lock<std::mutex> lock(mu_);
        while (!cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; })) {
            cp_->tick(control::unix_ms_now());
        }
    }

    std::unique_ptr<control::ControlPlane> cp_;
    control::ConfigManager* m_;
    std::unique_ptr<control::Alerting> alerting_;  // reset by stop()
    std::mutex mode_mu_;
    control::Automation before_pause_ = control::Automation::kOn;  // guarded by mode_mu_
    std::mutex mu_;
    std::condition_variable cv_;
    bool stop_ = false;  // guarded by mu_
    std::thread ticker_;
};

}  // namespace

std::shared_ptr<ControlAdmin> make_config_admin(std::unique_ptr<control::ControlPlane> plane,
                                                std::unique_ptr<control::Alerting> alerting) {
    return std::make_shared<Admin>(std::move(plane), std::move(alerting));
}

}  // namespace pagoda::app
