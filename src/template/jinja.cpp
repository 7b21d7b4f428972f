// The Jinja evaluator: runs the statement tree (jinja_parse.cpp) against a scope, with
// macros, caller(), loops with loop.* and break/continue, block set and filter blocks; and
// the public Template API.
#include "template/jinja.h"

#include <algorithm>

#include "template/jinja_internal.h"

namespace pagoda::jinja {

struct Template::Impl {
    std::vector<Node> root;
};

namespace {

enum class Flow { kNormal, kBreak, kContinue };

Flow run(const std::vector<Node>& nodes, Scope& s, std::string& out);

std::string render_body(const std::vector<Node>& body, Scope& s) {
    std::string out;
    run(body, s, out);
    return out;
}

json make_macro(Scope& s, const Node* node, const std::string& name,
                std::optional<json> caller = std::nullopt) {
    auto m = std::make_shared<Macro>();
    m->name = name;
    m->node = node;
    m->visible = s.frames.size();
    m->caller = std::move(caller);
    s.macros.push_back(std::move(m));
    if (s.macros.size() > 100000) fail(node->line, "more than 100000 macro definitions");
    return json::binary({}, s.macros.size() - 1);
}

void assign(const Node& n, Scope& s, json v) {
    if (!n.attr.empty()) {
        json* ns = s.find(n.targets[0]);
        if (ns == nullptr || !ns->is_object()) {
            fail(n.line,
                 fmt::format("cannot assign attribute on non-namespace object '{}'", n.targets[0]));
        }
        (*ns)[n.attr] = std::move(v);
        return;
    }
    if (n.targets.size() == 1) {
        s.set(n.targets[0]) = std::move(v);
        return;
    }
    if (!v.is_array() || v.size() != n.targets.size()) {
        fail(n.line, fmt::format("cannot unpack into {} names", n.targets.size()));
    }
    for (size_t i = 0; i < n.targets.size(); ++i) s.set(n.targets[i]) = v[i];
}

json loop_object(const json& items, size_t i) {
    const size_t len = items.size();
    return {{"index", i + 1},
            {"index0", i},
            {"first", i == 0},
            {"last", i + 1 == len},
            {"length", len},
            {"revindex", len - i},
            {"revindex0", len - i - 1},
            {"previtem", i > 0 ? items[i - 1] : undefined()},
            {"nextitem", i + 1 < len ? items[i + 1] : undefined()},
            {"depth", 1},
            {"depth0", 0}};
}

void bind_targets(const Node& n, std::map<std::string, json>& f, const json& item) {
    if (n.targets.size() == 1) {
        f[n.targets[0]] = item;
        return;
    }
    const json pair = item.is_array() ? item : json::array();
    if (pair.size() != n.targets.size()) {
        fail(n.line, fmt::format("cannot unpack {} into {} names",
                                 item.is_array() ? std::to_string(item.size()) : type_name(item),
                                 n.targets.size()));
    }
    for (size_t k = 0; k < n.targets.size(); ++k) f[n.targets[k]] = pair[k];
}

void run_for(const Node& n, Scope& s, std::string& out) {
    json items = iterate(n.expr(s), n.line);
    if (n.cond) {  // for x in xs if cond: the loop sees only the items that pass
        json kept = json::array();
        for (const auto& item : items) {
            bind_targets(n, s.frames.emplace_back(), item);
            const bool keep = truthy(n.cond(s));
            s.frames.pop_back();
            if (keep) kept.push_back(item);
        }
        items = std::move(kept);
    }
    if (items.empty()) {
        run(n.else_body, s, out);
        return;
    }
    for (size_t i = 0; i < items.size(); ++i) {
        if (++s.iterations > 1000000) fail(n.line, "more than 1000000 loop iterations");
        auto& f = s.frames.emplace_back();
        bind_targets(n, f, items[i]);
        f["loop"] = loop_object(items, i);
        const Flow flow = run(n.body, s, out);
        s.frames.pop_back();  // a plain `set` inside a loop stays in its iteration, as in Jinja
        if (flow == Flow::kBreak) break;
    }
}

Flow run_node(const Node& n, Scope& s, std::string& out) {
    switch (n.kind) {
        case Node::kText: out += n.text; break;
        case Node::kOutput: out += to_str(n.expr(s)); break;
        case Node::kIf:
            for (const auto& [cond, body] : n.branches) {
                if (!cond || truthy(cond(s))) return run(body, s, out);
            }
            break;
        case Node::kSet: assign(n, s, n.expr(s)); break;
        case Node::kSetBlock: {
            json v = render_body(n.body, s);
            assign(n, s, n.filter ? n.filter(s, v) : v);
            break;
        }
        case Node::kFor: run_for(n, s, out); break;
        case Node::kMacro: s.set(n.text) = make_macro(s, &n, n.text); break;
        case Node::kCall: {
            const json caller = make_macro(s, &n, "caller");
            s.frames.emplace_back()
                ["\x02"
                 "caller"] = caller;  // read by call_macro
            json r = n.expr(s);
            s.frames.pop_back();
            out += to_str(r);
            break;
        }
        case Node::kFilter: out += to_str(n.filter(s, render_body(n.body, s))); break;
        case Node::kBreak: return Flow::kBreak;
        case Node::kContinue: return Flow::kContinue;
        case Node::kBlock: return run(n.body, s, out);
    }
    return Flow::kNormal;
}

Flow run(const std::vector<Node>& nodes, Scope& s, std::string& out) {
    for (const Node& n : nodes) {
        if (out.size() > (4u << 20)) fail(n.line, "the rendered prompt is larger than 4 MiB");
        const Flow f = run_node(n, s, out);
        if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
}

}  // namespace

json call_macro(Scope& s, const json& v, const Args& a, int line) {
    if (auto g = global_name(v)) return *call_global(s, *g, a, line);
    if (!is_macro(v) || !v.get_binary().has_subtype() ||
        v.get_binary().subtype() >= s.macros.size()) {
        fail(line, fmt::format("'{}' object is not callable", type_name(v)));
    }
    const auto m = s.macros[size_t(v.get_binary().subtype())];
    if (++s.calls > 200) fail(line, "macros nested more than 200 deep");
    // The caller of a {% call %} block, if this call is the block's.
    const json* pending = s.find(
        "\x02"
        "caller");
    const json caller = pending != nullptr ? *pending : undefined();
    std::map<std::string, json> frame;
    std::vector<std::string> names;
    for (const auto& [p, def] : m->node->params) names.push_back(p);
    Args extra = a;  // what the parameters do not take: varargs, kwargs
    extra.pos.erase(extra.pos.begin(), extra.pos.begin() + std::min(a.pos.size(), names.size()));
    for (const auto& p : names) extra.kw.erase(p);
    Args own{std::vector<json>(a.pos.begin(),
                               a.pos.begin() + long(std::min(a.pos.size(), names.size()))),
             json::object()};
    for (const auto& [k, x] : a.kw.items()) {
        if (std::find(names.begin(), names.end(), k) != names.end()) own.kw[k] = x;
    }
    const std::vector<json> bound = bind_args(own, names, fmt::format("macro '{}'", m->name), line);
    const size_t saved_barrier = s.barrier, saved_base = s.macro_base;
    s.barrier = s.frames.size();
    s.macro_base = m->visible;
    auto& f = s.frames.emplace_back();
    f["varargs"] = json(extra.pos);
    f["kwargs"] = extra.kw;
    if (m->node->kind == Node::kMacro && !is_undef(caller)) f["caller"] = caller;
    for (size_t i = 0; i < names.size(); ++i) {
        const Expr& def = m->node->params[i].second;
        f[names[i]] = !is_undef(bound[i]) ? bound[i] : def ? def(s) : undefined();
    }
    std::string out;
    try {
        run(m->node->body, s, out);
    } catch (...) {
        s.frames.pop_back();
        s.barrier = saved_barrier;
        s.macro_base = saved_base;
        --s.calls;
        throw;
    }
    s.frames.pop_back();
    s.barrier = saved_barrier;
    s.macro_base = saved_base;
    --s.calls;
    return out;
}

Template::Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;
Template::~Template() = default;

Result<Template> Template::parse(const std::string& source_in) {
    try {
        // As Jinja (keep_trailing_newline off): one trailing newline of the source is dropped.
        std::string source = source_in;
        if (!source.empty() && source.back() == '\n') source.pop_back();
        auto impl = std::make_shared<Impl>();
        impl->root = parse_statements(split_template(source));
        Template t;
        t.impl_ = std::move(impl);
        return t;
    } catch (const std::exception& e) {  // JinjaError, json::exception: a template error
        return make_error(ErrorCode::kInvalidArgument, "{}", e.what());
    }
}

Result<std::string> Template::render(const nlohmann::ordered_json& context,
                                     const RenderOptions& opts) const {
    try {
        Scope s;
        s.now = opts.now;
        s.frames.emplace_back();
        if (context.is_object()) {
            for (const auto& [k, v] : context.items()) s.frames.back()[k] = v;
        }
        std::string out;
        run(impl_->root, s, out);
        return out;
    } catch (const TemplateRaised& e) {
        return make_error(ErrorCode::kInvalidArgument, "the chat template raised an error: {}",
                          e.what());
    } catch (const std::exception& e) {
        return make_error(ErrorCode::kInvalidArgument, "{}", e.what());
    }
}

Result<std::string> Template::render(const nlohmann::json& context,
                                     const RenderOptions& opts) const {
    return render(nlohmann::ordered_json(context), opts);
}

}  // namespace pagoda::jinja
