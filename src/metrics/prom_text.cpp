// The implementation of metrics/prom_text.h (the contract is there).
#include "metrics/prom_text.h"

#include <cmath>
#include <cstdlib>
#include <optional>

namespace pagoda::metrics {

namespace {

bool name_char(char c, bool first) {
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    return alpha || (!first && c >= '0' && c <= '9');
}

// The label set "{k="v",...}" starting at s[i] == '{'; i ends after the '}'.
std::optional<Labels> parse_labels(std::string_view s, size_t& i) {
    Labels out;
    ++i;
    while (true) {
        while (i < s.size() && s[i] == ' ') ++i;
        if (i < s.size() && s[i] == '}') {
            ++i;
            return out;
        }
        const size_t k0 = i;
        while (i < s.size() && name_char(s[i], i == k0)) ++i;
        if (i == k0 || i + 1 >= s.size() || s[i] != '=' || s[i + 1] != '"') return std::nullopt;
        std::string key(s.substr(k0, i - k0)), value;
        i += 2;
        while (i < s.size() && s[i] != '"') {
            if (s[i] == '\\' && i + 1 < s.size()) {
                const char e = s[++i];
                value += e == 'n' ? '\n' : e;
            } else {
                value += s[i];
            }
            ++i;
        }
        if (i >= s.size()) return std::nullopt;
        ++i;  // the closing quote
        out.emplace_back(std::move(key), std::move(value));
        while (i < s.size() && s[i] == ' ') ++i;
        if (i < s.size() && s[i] == ',')
            ++i;
        else if (i >= s.size() || s[i] != '}')
            return std::nullopt;
    }
}

std::optional<double> parse_value(std::string_view v) {
    if (v == "+Inf" || v == "Inf") return HUGE_VAL;
    if (v == "-Inf") return -HUGE_VAL;
    if (v == "NaN") return std::nan("");
    if (v.empty() || v.size() > 64) return std::nullopt;
    const std::string s(v);
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size()) return std::nullopt;
    return d;
}

std::optional<Sample> parse_line(std::string_view line) {
    size_t i = 0;
    while (i < line.size() && name_char(line[i], i == 0)) ++i;
    if (i == 0) return std::nullopt;
    Sample smp;
    smp.name = std::string(line.substr(0, i));
    if (i < line.size() && line[i] == '{') {
        auto labels = parse_labels(line, i);
        if (!labels) return std::nullopt;
        smp.labels = std::move(*labels);
    }
    while (i < line.size() && line[i] == ' ') ++i;
    size_t j = i;
    while (j < line.size() && line[j] != ' ') ++j;  // a timestamp may follow; ignored
    auto v = parse_value(line.substr(i, j - i));
    if (!v) return std::nullopt;
    smp.value = *v;
    return smp;
}

}  // namespace

std::string_view Sample::label(std::string_view key) const {
    for (const auto& [k, v] : labels) {
        if (k == key) return v;
    }
    return {};
}

ParsedText parse_text(std::string_view text) {
    ParsedText out;
    int64_t line_no = 0;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t nl = text.find('\n', pos);
        if (nl == std::string_view::npos) nl = text.size();
        std::string_view line = text.substr(pos, nl - pos);
        pos = nl + 1;
        ++line_no;
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
        if (line.empty() || line[0] == '#') continue;
        if (auto s = parse_line(line)) {
            out.samples.push_back(std::move(*s));
        } else {
            if (out.bad_lines++ == 0) out.first_bad_line = line_no;
        }
    }
    return out;
}

}  // namespace pagoda::metrics
