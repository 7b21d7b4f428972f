// Jinja statements: the pieces of a template (jinja_lexer.cpp) parsed into a tree of Nodes.
// Each statement's body is lexed into expression tokens and read with the expression parser.
// Errors name the line, the column and the tag.
#include <algorithm>
#include <cctype>

#include "template/jinja_internal.h"

namespace pagoda::jinja {

namespace {

std::string trim(const std::string& s) {
    size_t b = 0, e = s.size();
    while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
    while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
    return s.substr(b, e - b);
}

// The filters of {% set x | f %} and {% filter f %}, applied to the rendered body (held in a
// variable no template can name while the chain runs).
std::function<json(Scope&, const json&)> body_filter(ExprParser& p) {
    Expr chain = p.filter_chain([](Scope& s) { return *s.find("\x01"); });
    return [chain](Scope& s, const json& v) {
        s.frames.back()["\x01"] = v;
        json r = chain(s);
        s.frames.back().erase("\x01");
        return r;
    };
}

class StatementParser {
  public:
    explicit StatementParser(const std::vector<Piece>& pieces) : pieces_(pieces) {}

    // Parses until a statement whose keyword is one of `stops`; returns it ("" at the end),
    // leaving pos_ on it.
    std::string body(std::vector<Node>& out, const std::vector<std::string>& stops, int depth);
    const Piece* here() const { return pos_ < pieces_.size() ? &pieces_[pos_] : nullptr; }
    // The tag an error on `line` comes from: the latest one read on that line.
    const Piece* tag_on(int line) const {
        for (size_t i = std::min(cur_ + 1, pieces_.size()); i > 0; --i) {
            const Piece& p = pieces_[i - 1];
            if (p.kind != Piece::kText && p.line == line) return &p;
        }
        return nullptr;
    }

  private:
    Node statement(const std::string& kw, ExprParser& p, int line, int depth);
    Node parse_if(ExprParser& p, int line, int depth);
    Node parse_for(ExprParser& p, int line, int depth);
    Node parse_set(ExprParser& p, int line, int depth);
    Node parse_macro(ExprParser& p, int line, int depth);
    Node parse_call(ExprParser& p, int line, int depth);
    Node parse_filter(ExprParser& p, int line, int depth);
    // Parses a body that must end with `end`; consumes it.
    void body_until(std::vector<Node>& out, const char* end, const char* what, int line,
                    int depth) {
        if (body(out, {end}, depth).empty())
            fail(line, fmt::format("'{}' without '{}'", what, end));
        ++pos_;
    }
    ExprParser parser_at(size_t pos) const {  // the tokens of the statement at `pos`
        const Piece& p = pieces_[pos];
        ExprParser e(lex_expr(p.s, p.line), p.line);
        e.name();  // its keyword
        return e;
    }

    const std::vector<Piece>& pieces_;
    size_t pos_ = 0;
    size_t cur_ = 0;  // the piece being read
};

std::string keyword(const std::string& s) {
    const std::string t = trim(s);
    size_t e = 0;
    while (e < t.size() && (std::isalnum(static_cast<unsigned char>(t[e])) || t[e] == '_')) ++e;
    return t.substr(0, e);
}

std::string StatementParser::body(std::vector<Node>& out, const std::vector<std::string>& stops,
                                  int depth) {
    if (depth > 64) fail(here() ? here()->line : 0, "statements nested too deeply (limit 64)");
    while (pos_ < pieces_.size()) {
        const Piece& p = pieces_[pos_];
        cur_ = pos_;
        if (p.kind != Piece::kStmt) {
            Node n;
            n.line = p.line;
            n.kind = p.kind == Piece::kText ? Node::kText : Node::kOutput;
            if (p.kind == Piece::kText) {
                n.text = p.s;
            } else {
                n.expr = compile_expr(p.s, p.line);
            }
            out.push_back(std::move(n));
            ++pos_;
            continue;
        }
        const std::string kw = keyword(p.s);
        for (const auto& s : stops) {
            if (kw == s) return kw;
        }
        const size_t at = pos_++;
        ExprParser e = kw.empty() ? ExprParser(lex_expr(p.s, p.line), p.line) : parser_at(at);
        out.push_back(statement(kw, e, p.line, depth));
    }
    return "";
}

Node StatementParser::statement(const std::string& kw, ExprParser& p, int line, int depth) {
    if (kw == "if") return parse_if(p, line, depth);
    if (kw == "for") return parse_for(p, line, depth);
    if (kw == "set") return parse_set(p, line, depth);
    if (kw == "macro") return parse_macro(p, line, depth);
    if (kw == "call") return parse_call(p, line, depth);
    if (kw == "filter") return parse_filter(p, line, depth);
    Node n;
    n.line = line;
    if (kw == "break" || kw == "continue") {
        p.expect_end(kw.c_str());
        n.kind = kw == "break" ? Node::kBreak : Node::kContinue;
        return n;
    }
    if (kw == "generation") {  // Hugging Face's assistant-mask markers: no output of their own
        n.kind = Node::kBlock;
        body_until(n.body, "endgeneration", "generation", line, depth + 1);
        return n;
    }
    static const char* closers[] = {"endif",    "endfor",  "elif",      "else",         "endset",
                                    "endmacro", "endcall", "endfilter", "endgeneration"};
    for (const char* c : closers) {
        if (kw == c) fail(line, fmt::format("'{}' without its opening statement", kw));
    }
    fail(line, fmt::format("unsupported statement '{}' (supported: if, for, set, macro, call, "
                           "filter, break, continue, generation)",
                           kw.empty() ? trim(pieces_[pos_ - 1].s) : kw));
}

Node StatementParser::parse_if(ExprParser& p, int line, int depth) {
    Node n;
    n.kind = Node::kIf;
    n.line = line;
    Expr cond = p.expr();
    p.expect_end("'if'");
    for (;;) {
        std::vector<Node> branch;
        const std::string stop = body(branch, {"elif", "else", "endif"}, depth + 1);
        if (stop.empty()) fail(line, "'if' without 'endif'");
        n.branches.emplace_back(cond, std::move(branch));
        const size_t at = pos_++;
        if (stop == "endif") break;
        if (stop == "else") {
            std::vector<Node> else_branch;
            body_until(else_branch, "endif", "if", line, depth + 1);
            n.branches.emplace_back(Expr{}, std::move(else_branch));
            break;
        }
        ExprParser e = parser_at(at);
        cond = e.expr();
        e.expect_end("'elif'");
    }
    return n;
}

Node StatementParser::parse_for(ExprParser& p, int line, int depth) {
    Node n;
    n.kind = Node::kFor;
    n.line = line;
    do {
        if (!n.targets.empty()) p.expect_op(",");
        n.targets.push_back(p.name());
    } while (p.is_op(","));
    if (!p.is_name("in")) fail(line, "expected 'for x in ...'");
    p.name();
    n.expr = p.tuple_or_expr(false);
    if (p.is_name("if")) {
        p.name();
        n.cond = p.expr();
    }
    if (p.is_name("recursive")) fail(line, "recursive loops are not supported");
    p.expect_end("'for'");
    const std::string stop = body(n.body, {"else", "endfor"}, depth + 1);
    if (stop.empty()) fail(line, "'for' without 'endfor'");
    ++pos_;
    if (stop == "else") body_until(n.else_body, "endfor", "for", line, depth + 1);
    return n;
}

// set x = v | set a, b = v | set ns.attr = v | set x %}...{% endset (with filters)
Node StatementParser::parse_set(ExprParser& p, int line, int depth) {
    Node n;
    n.kind = Node::kSet;
    n.line = line;
    n.targets.push_back(p.name());
    if (p.is_op(".")) {
        p.expect_op(".");
        n.attr = p.name();
    }
    while (p.is_op(",") && n.attr.empty()) {
        p.expect_op(",");
        n.targets.push_back(p.name());
    }
    if (p.is_op("=")) {
        p.expect_op("=");
        n.expr = p.tuple_or_expr();
        p.expect_end("'set'");
        return n;
    }
    if (n.targets.size() > 1) fail(line, "expected '=' after the names to set");
    n.kind = Node::kSetBlock;
    if (p.is_op("|")) {
        p.expect_op("|");
        n.filter = body_filter(p);
    }
    p.expect_end("'set'");
    body_until(n.body, "endset", "set", line, depth + 1);
    return n;
}

Node StatementParser::parse_macro(ExprParser& p, int line, int depth) {
    Node n;
    n.kind = Node::kMacro;
    n.line = line;
    n.text = p.name();
    n.params = p.params();
    p.expect_end("'macro'");
    body_until(n.body, "endmacro", "macro", line, depth + 1);
    return n;
}

// {% call(params) m(args) %}body{% endcall %}: m is called with `caller` bound to the body.
Node StatementParser::parse_call(ExprParser& p, int line, int depth) {
    Node n;
    n.kind = Node::kCall;
    n.line = line;
    if (p.is_op("(")) n.params = p.params();
    n.expr = p.expr();
    p.expect_end("'call'");
    body_until(n.body, "endcall", "call", line, depth + 1);
    return n;
}

Node StatementParser::parse_filter(ExprParser& p, int line, int depth) {
    Node n;
    n.kind = Node::kFilter;
    n.line = line;
    n.filter = body_filter(p);
    p.expect_end("'filter'");
    body_until(n.body, "endfilter", "filter", line, depth + 1);
    return n;
}

}  // namespace

std::vector<Node> parse_statements(const std::vector<Piece>& pieces) {
    StatementParser parser(pieces);
    std::vector<Node> root;
    try {
        const std::string stop = parser.body(root, {}, 0);
        (void)stop;
    } catch (const JinjaError& e) {
        const Piece* p = parser.tag_on(e.line);
        if (p == nullptr) throw;
        std::string tag = trim(p->s);
        if (tag.size() > 60) tag = tag.substr(0, 57) + "...";
        const char* open = p->kind == Piece::kStmt ? "{%" : "{{";
        const char* close = p->kind == Piece::kStmt ? "%}" : "}}";
        throw JinjaError(e.line, e.detail,
                         fmt::format("chat template line {}, column {}: {} (in '{} {} {}')", e.line,
                                     p->column, e.detail, open, tag, close));
    }
    return root;
}

}  // namespace pagoda::jinja
