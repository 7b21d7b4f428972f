// The Jinja subset's statements: parsing pieces into a tree of nodes (if/for/set/output)
// and running the tree against a scope. Expressions are in jinja_expr.cpp, values and their
// operations in jinja_value.cpp, lexing in jinja_lexer.cpp.
#include "server/jinja.h"

#include <cctype>

#include "server/jinja_internal.h"

namespace pagoda::server::jinja {

struct Template::Node {
    enum Kind { kText, kOutput, kIf, kFor, kSet, kBlock } kind = kBlock;
    std::string text;                                          // kText
    Expr expr;                                                 // kOutput, kSet value, kFor iterable
    std::vector<std::pair<Expr, std::vector<Node>>> branches;  // kIf: (condition or empty, body)
    std::vector<std::string> vars;                             // kFor targets
    std::string set_name, set_attr;                            // kSet
    std::vector<Node> body, else_body;                         // kFor / kBlock
    int line = 0;
};

namespace {

using Node = Template::Node;

std::string trim(const std::string& s) {
    size_t b = 0, e = s.size();
    while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
    while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
    return s.substr(b, e - b);
}

std::string first_word(const std::string& s) {
    size_t e = 0;
    while (e < s.size() && (std::isalnum(static_cast<unsigned char>(s[e])) || s[e] == '_')) ++e;
    return s.substr(0, e);
}

// Recursive descent over the pieces; each parse_* starts after its opening statement.
class StatementParser {
  public:
    explicit StatementParser(const std::vector<Piece>& pieces) : pieces_(pieces) {}

    // Parses until one of `stops` (a statement keyword); returns the stop found ("" at the
    // end), leaving pos_ on it.
    std::string body(std::vector<Node>& out, const std::vector<std::string>& stops, int depth);
    int line_here() const { return pos_ < pieces_.size() ? pieces_[pos_].line : 0; }

  private:
    Node parse_if(const std::string& rest, int line, int depth);
    Node parse_for(const std::string& rest, int line, int depth);
    Node parse_set(const std::string& rest, int line);
    // Parses a body that must end with `end`; consumes it.
    void body_until(std::vector<Node>& out, const char* end, const char* what, int line,
                    int depth) {
        if (body(out, {end}, depth).empty())
            fail(line, fmt::format("'{}' without '{}'", what, end));
        ++pos_;
    }

    const std::vector<Piece>& pieces_;
    size_t pos_ = 0;
};

std::string StatementParser::body(std::vector<Node>& out, const std::vector<std::string>& stops,
                                  int depth) {
    if (depth > 64) fail(line_here(), "statements nested too deeply (limit 64)");
    while (pos_ < pieces_.size()) {
        const Piece& p = pieces_[pos_];
        if (p.kind != Piece::kStmt) {
            Node n;
            n.line = p.line;
            if (p.kind == Piece::kText) {
                n.kind = Node::kText;
                n.text = p.s;
            } else {
                n.kind = Node::kOutput;
                n.expr = compile_expr(p.s, p.line);
            }
            out.push_back(std::move(n));
            ++pos_;
            continue;
        }
        const std::string st = trim(p.s);
        const std::string kw = first_word(st);
        const std::string rest = trim(st.substr(kw.size()));
        for (const auto& s : stops) {
            if (kw == s) return kw;
        }
        ++pos_;
        if (kw == "if") {
            out.push_back(parse_if(rest, p.line, depth));
        } else if (kw == "for") {
            out.push_back(parse_for(rest, p.line, depth));
        } else if (kw == "set") {
            out.push_back(parse_set(rest, p.line));
        } else if (kw != "generation" && kw != "endgeneration") {
            // (generation/endgeneration: Hugging Face's assistant-mask markers, no output.)
            fail(p.line, fmt::format("unsupported statement '{}'", kw.empty() ? st : kw));
        }
    }
    return "";
}

Node StatementParser::parse_if(const std::string& rest, int line, int depth) {
    Node n;
    n.kind = Node::kIf;
    n.line = line;
    Expr cond = compile_expr(rest, line);
    for (;;) {
        std::vector<Node> branch;
        const std::string stop = body(branch, {"elif", "else", "endif"}, depth + 1);
        if (stop.empty()) fail(line, "'if' without 'endif'");
        n.branches.emplace_back(cond, std::move(branch));
        const Piece& sp = pieces_[pos_++];
        if (stop == "endif") break;
        if (stop == "else") {
            std::vector<Node> else_branch;
            body_until(else_branch, "endif", "if", line, depth + 1);
            n.branches.emplace_back(Expr{}, std::move(else_branch));
            break;
        }
        cond = compile_expr(trim(trim(sp.s).substr(4)), sp.line);  // after "elif"
    }
    return n;
}

Node StatementParser::parse_for(const std::string& rest, int line, int depth) {
    Node n;
    n.kind = Node::kFor;
    n.line = line;
    const size_t in = rest.find(" in ");
    if (in == std::string::npos) fail(line, "expected 'for x in ...'");
    std::string vars = rest.substr(0, in);
    size_t c;
    while ((c = vars.find(',')) != std::string::npos) {
        n.vars.push_back(trim(vars.substr(0, c)));
        vars = vars.substr(c + 1);
    }
    n.vars.push_back(trim(vars));
    const std::string iter = trim(rest.substr(in + 4));
    if (iter.size() > 10 && iter.find(" recursive") == iter.size() - 10) {
        fail(line, "recursive loops are not supported");
    }
    n.expr = compile_expr(iter, line);
    const std::string stop = body(n.body, {"else", "endfor"}, depth + 1);
    if (stop.empty()) fail(line, "'for' without 'endfor'");
    ++pos_;
    if (stop == "else") body_until(n.else_body, "endfor", "for", line, depth + 1);
    return n;
}

Node StatementParser::parse_set(const std::string& rest, int line) {
    Node n;
    n.kind = Node::kSet;
    n.line = line;
    const size_t eq = rest.find('=');
    if (eq == std::string::npos) fail(line, "block 'set' is not supported; use 'set x = value'");
    const std::string target = trim(rest.substr(0, eq));
    const size_t dot = target.find('.');
    n.set_name = trim(target.substr(0, dot));
    if (dot != std::string::npos) n.set_attr = trim(target.substr(dot + 1));
    n.expr = compile_expr(rest.substr(eq + 1), line);
    return n;
}

// ---------------------------------------------------------------------------------------
// Running

void run(const std::vector<Node>& nodes, Scope& s, std::string& out);

void run_set(const Node& n, Scope& s) {
    json v = n.expr(s);
    if (n.set_attr.empty()) {
        s.frames.back()[n.set_name] = std::move(v);
        return;
    }
    json* ns = s.find(n.set_name);
    if (ns == nullptr || !ns->is_object()) {
        fail(n.line, fmt::format("'{}' is not a namespace", n.set_name));
    }
    (*ns)[n.set_attr] = std::move(v);
}

// What a for loop iterates: list items, dict keys, string characters; none for undefined.
json loop_items(const json& it, int line) {
    json items = json::array();
    if (it.is_array()) {
        items = it;
    } else if (it.is_object()) {
        for (const auto& [k, v] : it.items()) items.push_back(k);
    } else if (it.is_string()) {
        for (char c : it.get<std::string>()) items.push_back(std::string(1, c));
    } else if (!is_undef(it) && !it.is_null()) {
        fail(line, fmt::format("cannot loop over a {}", it.type_name()));
    }
    return items;
}

void run_for(const Node& n, Scope& s, std::string& out) {
    const json items = loop_items(n.expr(s), n.line);
    if (items.empty()) return run(n.else_body, s, out);
    const size_t len = items.size();
    for (size_t i = 0; i < len; ++i) {
        if (++s.iterations > 1000000) fail(n.line, "more than 1000000 loop iterations");
        auto& f = s.frames.emplace_back();
        if (n.vars.size() == 1) {
            f[n.vars[0]] = items[i];
        } else {
            for (size_t k = 0; k < n.vars.size(); ++k) {
                f[n.vars[k]] =
                    items[i].is_array() && k < items[i].size() ? items[i][k] : undefined();
            }
        }
        f["loop"] = {{"index", i + 1},
                     {"index0", i},
                     {"first", i == 0},
                     {"last", i + 1 == len},
                     {"length", len},
                     {"revindex", len - i},
                     {"revindex0", len - i - 1},
                     {"previtem", i > 0 ? items[i - 1] : undefined()},
                     {"nextitem", i + 1 < len ? items[i + 1] : undefined()}};
        run(n.body, s, out);
        // Namespace changes made inside the loop live in outer frames already; plain `set`
        // inside a loop stays local, as in Jinja.
        s.frames.pop_back();
    }
}

void run(const std::vector<Node>& nodes, Scope& s, std::string& out) {
    for (const Node& n : nodes) {
        if (out.size() > (4u << 20)) fail(n.line, "the rendered prompt is larger than 4 MiB");
        switch (n.kind) {
            case Node::kText: out += n.text; break;
            case Node::kOutput: out += to_str(n.expr(s)); break;
            case Node::kIf:
                for (const auto& [cond, body] : n.branches) {
                    if (!cond || truthy(cond(s))) {
                        run(body, s, out);
                        break;
                    }
                }
                break;
            case Node::kSet: run_set(n, s); break;
            case Node::kFor: run_for(n, s, out); break;
            case Node::kBlock: run(n.body, s, out); break;
        }
    }
}

}  // namespace

Template::Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;
Template::~Template() = default;

Result<Template> Template::parse(const std::string& source_in) {
    try {
        // As Jinja (keep_trailing_newline off): one trailing newline of the source is dropped.
        std::string source = source_in;
        if (!source.empty() && source.back() == '\n') source.pop_back();
        const auto pieces = split_template(source);
        auto root = std::make_shared<Node>();
        root->kind = Node::kBlock;
        StatementParser parser(pieces);
        const std::string stop = parser.body(root->body, {"endif", "endfor", "elif", "else"}, 0);
        if (!stop.empty()) {
            fail(parser.line_here(), fmt::format("'{}' without its opening statement", stop));
        }
        Template t;
        t.root_ = std::move(root);
        return t;
    } catch (const JinjaError& e) {
        return make_error(ErrorCode::kInvalidArgument, "{}", e.what());
    } catch (const std::exception& e) {  // json::exception and anything else: a template error
        return make_error(ErrorCode::kInvalidArgument, "chat template: {}", e.what());
    }
}

Result<std::string> Template::render(const json& context) const {
    try {
        Scope s;
        s.frames.emplace_back();
        if (context.is_object()) {
            for (const auto& [k, v] : context.items()) s.frames.back()[k] = v;
        }
        std::string out;
        run(root_->body, s, out);
        return out;
    } catch (const JinjaError& e) {
        return make_error(ErrorCode::kInvalidArgument, "{}", e.what());
    } catch (const std::exception& e) {
        return make_error(ErrorCode::kInvalidArgument, "chat template: {}", e.what());
    }
}

}  // namespace pagoda::server::jinja
