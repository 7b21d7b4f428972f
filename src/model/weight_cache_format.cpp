// The weight cache file's header: parsing (a fuzz target) and writing. No kernels here.
#include <fmt/format.h>

#include <cstring>
#include <set>

#include "base/hash.h"
#include "model/weight_cache.h"
#include "model/weight_cache_internal.h"

namespace pagoda::model {

namespace {

constexpr char kMagic[8] = {'P', 'A', 'G', 'O', 'D', 'A', 'W', 'C'};
constexpr size_t kFixed = 8 + 4 + 4 + 8 + 8;  // magic, version, count, header bytes, hash
constexpr uint32_t kMaxEntries = 1u << 20;
constexpr uint32_t kMaxName = 4096, kMaxKey = 1u << 16;

// Bounds-checked little-endian reads; the first failure sticks.
class Reader {
  public:
    Reader(std::span<const uint8_t> b, size_t pos) : b_(b), pos_(pos) {}
    template <typename T>
    T get() {
        T v{};
        if (!ok_ || b_.size() - pos_ < sizeof(T)) {
            ok_ = false;
            return v;
        }
        std::memcpy(&v, b_.data() + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }
    std::string str(size_t n) {
        if (!ok_ || b_.size() - pos_ < n) {
            ok_ = false;
            return {};
        }
        std::string s(reinterpret_cast<const char*>(b_.data() + pos_), n);
        pos_ += n;
        return s;
    }
    bool ok() const { return ok_; }
    size_t pos() const { return pos_; }

  private:
    std::span<const uint8_t> b_;
    size_t pos_;
    bool ok_ = true;
};

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
    const size_t n = out.size();
    out.resize(n + sizeof(T));
    std::memcpy(out.data() + n, &v, sizeof(T));
}

Error bad(const std::string& what) {
    return make_error(ErrorCode::kInvalidFile, "weight cache file: {}", what);
}

Result<PackedEntry> parse_entry(Reader& r, std::span<const uint8_t> bytes, uint64_t header_bytes) {
    PackedEntry e;
    const uint32_t name_len = r.get<uint32_t>();
    if (name_len == 0 || name_len > kMaxName)
        return bad(fmt::format("entry name of {} bytes", name_len));
    e.name = r.str(name_len);
    const uint32_t kind = r.get<uint32_t>(), type = r.get<uint32_t>();
    e.rows = r.get<int64_t>();
    e.cols = r.get<int64_t>();
    e.offset = r.get<uint64_t>();
    e.size = r.get<uint64_t>();
    if (!r.ok()) return bad("the header is cut short in an entry");
    if (kind != uint32_t(PackedKind::kQuant) && kind != uint32_t(PackedKind::kDense))
        return bad(fmt::format("entry '{}' has kind {} (1 or 2 allowed)", e.name, kind));
    if (!formats::tensor_type_traits(type))
        return bad(fmt::format("entry '{}' has tensor type {}, not a ggml type", e.name, type));
    e.kind = PackedKind(kind);
    e.type = formats::TensorType(type);
    if (e.size == 0) return bad(fmt::format("entry '{}' has no bytes", e.name));
    if (e.rows <= 0 || e.cols <= 0 || e.rows > (int64_t(1) << 32) || e.cols > (int64_t(1) << 32))
        return bad(fmt::format("entry '{}' has shape {}x{}", e.name, e.rows, e.cols));
    if (e.offset % kWeightCacheAlign != 0) {
        return bad(fmt::format("entry '{}' at offset {} is not {}-byte aligned", e.name, e.offset,
                               kWeightCacheAlign));
    }
    if (e.offset < header_bytes || e.offset > bytes.size() || e.size > bytes.size() - e.offset) {
        return bad(
            fmt::format("entry '{}' at offset {} of {} bytes lies outside the data of a "
                        "{}-byte file",
                        e.name, e.offset, e.size, bytes.size()));
    }
    return e;
}

}  // namespace

uint64_t weight_cache_hash(std::span<const uint8_t> b, uint64_t seed) {
    uint64_t h = splitmix64(seed ^ b.size());
    size_t i = 0;
    for (; i + 8 <= b.size(); i += 8) {
        uint64_t w;
        std::memcpy(&w, b.data() + i, 8);
        h = splitmix64(h ^ w);
    }
    uint64_t tail = 0;
    if (i < b.size()) std::memcpy(&tail, b.data() + i, b.size() - i);
    return splitmix64(h ^ tail ^ (uint64_t(b.size() - i) << 56));
}

Result<WeightCacheHeader> parse_weight_cache(std::span<const uint8_t> bytes) {
    if (bytes.size() < kFixed || std::memcmp(bytes.data(), kMagic, 8) != 0)
        return bad("not a Pagoda weight cache (no PAGODAWC magic)");
    Reader r(bytes, 8);
    const uint32_t version = r.get<uint32_t>(), count = r.get<uint32_t>();
    const uint64_t header_bytes = r.get<uint64_t>(), hash = r.get<uint64_t>();
    if (version != kWeightCacheVersion)
        return bad(fmt::format("version {}; this build reads {}", version, kWeightCacheVersion));
    if (count > kMaxEntries) return bad(fmt::format("{} entries (at most {})", count, kMaxEntries));
    if (header_bytes < kFixed || header_bytes > bytes.size())
        return bad(fmt::format("header of {} bytes in a {}-byte file", header_bytes, bytes.size()));
    const auto rest = bytes.subspan(kFixed, size_t(header_bytes) - kFixed);
    if (weight_cache_hash(rest, kWeightCacheVersion) != hash)
        return bad("the header's hash does not match (damaged)");
    const auto header = bytes.first(size_t(header_bytes));
    Reader hr(header, kFixed);
    WeightCacheHeader h;
    h.header_bytes = header_bytes;
    const uint32_t key_len = hr.get<uint32_t>();
    if (key_len > kMaxKey) return bad(fmt::format("key of {} bytes", key_len));
    h.key = hr.str(key_len);
    if (!hr.ok()) return bad("the header is cut short in the key");
    std::set<std::string> names;
    for (uint32_t i = 0; i < count; ++i) {
        PAGODA_ASSIGN_OR_RETURN(PackedEntry e, parse_entry(hr, bytes, header_bytes));
        if (!names.insert(e.name).second) return bad(fmt::format("entry '{}' twice", e.name));
        h.entries.push_back(std::move(e));
    }
    if (hr.pos() != header_bytes) return bad("bytes left over after the header's entries");
    return h;
}

std::vector<uint8_t> weight_cache_header(const std::string& key,
                                         std::vector<PackedEntry>& entries) {
    size_t bytes = kFixed + 4 + key.size();
    for (const PackedEntry& e : entries) bytes += 4 + e.name.size() + 4 + 4 + 8 * 4;
    uint64_t offset = bytes;
    for (PackedEntry& e : entries) {
        const uint64_t a = weight_cache_entry_align(e.size);
        e.offset = (offset + a - 1) / a * a;
        offset = e.offset + weight_cache_entry_span(e.size);
    }
    std::vector<uint8_t> body;  // everything after the fixed fields
    put(body, uint32_t(key.size()));
    body.insert(body.end(), key.begin(), key.end());
    for (const PackedEntry& e : entries) {
        put(body, uint32_t(e.name.size()));
        body.insert(body.end(), e.name.begin(), e.name.end());
        put(body, uint32_t(e.kind));
        put(body, uint32_t(e.type));
        put(body, e.rows);
        put(body, e.cols);
        put(body, e.offset);
        put(body, e.size);
    }
    std::vector<uint8_t> out(kFixed + body.size());
    uint8_t* p = out.data();
    const uint32_t version = kWeightCacheVersion, count = uint32_t(entries.size());
    const uint64_t total = out.size(), hash = weight_cache_hash(body, kWeightCacheVersion);
    std::memcpy(p, kMagic, 8);
    std::memcpy(p + 8, &version, 4);
    std::memcpy(p + 12, &count, 4);
    std::memcpy(p + 16, &total, 8);
    std::memcpy(p + 24, &hash, 8);
    if (!body.empty()) std::memcpy(p + kFixed, body.data(), body.size());
    return out;
}

}  // namespace pagoda::model
