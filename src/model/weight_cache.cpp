// Weight cache: the implementation (the contract is in model/weight_cache.h).
#include "model/weight_cache.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "kernels/cpu/ops.h"
#include "model/weight_cache_internal.h"

namespace pagoda::model {

namespace {

constexpr size_t kHuge = size_t(2) << 20;
constexpr size_t kSmall = size_t(64) << 20;  // below this, 4 KiB pages do not matter

#ifndef MADV_POPULATE_READ
constexpr int MADV_POPULATE_READ = 22;  // Linux 5.14
#endif

// Bytes of the mapping starting at `addr` that the kernel maps with 2 MiB pages
// (FilePmdMapped in /proc/self/smaps); 0 when it cannot tell.
size_t pmd_mapped_bytes(const void* addr) {
    std::ifstream in("/proc/self/smaps");
    const std::string start = fmt::format("{:x}-", reinterpret_cast<uintptr_t>(addr));
    std::string line;
    bool inside = false;
    while (std::getline(in, line)) {
        if (line.rfind(start, 0) == 0) {
            inside = true;
        } else if (inside && line.rfind("FilePmdMapped:", 0) == 0) {
            return size_t(std::strtoull(line.c_str() + 14, nullptr, 10)) << 10;
        } else if (inside && line.rfind("VmFlags:", 0) == 0) {
            return 0;
        }
    }
    return 0;
}

Status write_all(int fd, const uint8_t* p, size_t n, uint64_t offset) {
    while (n > 0) {
        const ssize_t w = pwrite(fd, p, std::min(n, size_t(1) << 30), off_t(offset));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return make_error(ErrorCode::kIo, "write failed: {}", std::strerror(errno));
        p += w;
        n -= size_t(w);
        offset += uint64_t(w);
    }
    return ok_status();
}

// Writes header and pieces into the open file `fd`, then flushes it to disk.
Status write_pieces(int fd, const std::vector<uint8_t>& header,
                    const std::vector<PackedEntry>& entries,
                    const std::vector<PackedPiece>& pieces) {
    PAGODA_TRY(write_all(fd, header.data(), header.size(), 0));
    uint64_t end = header.size();
    // A large entry is padded with zeros to whole 2 MiB pages (not left a hole), its last
    // page written in one call, so the page cache holds every page of it as a 2 MiB folio.
    std::vector<uint8_t> last(kWeightCacheHugeAlign);
    for (size_t i = 0; i < pieces.size(); ++i) {
        const std::span<const uint8_t> d = pieces[i].data;
        const bool pad = weight_cache_entry_align(d.size()) == kWeightCacheHugeAlign;
        const size_t whole = pad ? d.size() / last.size() * last.size() : d.size();
        const size_t rest = d.size() - whole;
        PAGODA_TRY(write_all(fd, d.data(), whole, entries[i].offset));
        end = entries[i].offset + whole;
        if (rest > 0) {
            std::memcpy(last.data(), d.data() + whole, rest);
            std::memset(last.data() + rest, 0, last.size() - rest);
            PAGODA_TRY(write_all(fd, last.data(), last.size(), end));
            end += last.size();
        }
    }
    if (ftruncate(fd, off_t(end)) != 0 || fsync(fd) != 0)
        return make_error(ErrorCode::kIo, "flush failed: {}", std::strerror(errno));
    return ok_status();
}

// Deletes `<stem>.<hash>.packed` in dir except `keep` (stale keys of the same model name)
// and `<stem>.<hash>.packed.tmp.<pid>.<n>` of processes that no longer run.
void remove_stale(const std::filesystem::path& dir, const std::string& stem,
                  const std::string& keep) {
    std::error_code ec;
    for (const auto& f : std::filesystem::directory_iterator(dir, ec)) {
        const std::string n = f.path().filename().string();
        if (n == keep || n.rfind(stem + ".", 0) != 0) continue;
        const size_t dot = n.find('.', stem.size() + 1);  // ends the hash part
        if (dot == std::string::npos) continue;
        const std::string rest = n.substr(dot);
        const bool stale = rest == ".packed";
        const bool orphan = rest.rfind(".packed.tmp.", 0) == 0 &&
                            kill(pid_t(std::atol(rest.c_str() + 12)), 0) != 0 && errno == ESRCH;
        if (stale || orphan) std::filesystem::remove(f.path(), ec);
    }
}

}  // namespace

std::string weight_cache_key(const MappedFile& file, uint64_t tensor_data_offset) {
    const auto b = file.bytes();
    struct stat st {};
    if (stat(file.path().c_str(), &st) != 0) st = {};
    const size_t head = std::min<uint64_t>(tensor_data_offset, b.size());
    const uint64_t h_head = weight_cache_hash(b.first(head), 1);
    uint64_t h_samples = 2;
    const size_t data = b.size() - head, sample = 4096;
    for (int i = 0; i < 64 && data > 0; ++i) {
        const size_t off = head + (data > sample ? (data - sample) * size_t(i) / 63 : 0);
        h_samples = weight_cache_hash(b.subspan(off, std::min(sample, b.size() - off)), h_samples);
    }
    return fmt::format("gguf size={} mtime={}.{:09} head={:016x} samples={:016x}; {}", b.size(),
                       int64_t(st.st_mtim.tv_sec), int64_t(st.st_mtim.tv_nsec), h_head, h_samples,
                       kernels::cpu::packed_layout_key());
}

std::string weight_cache_path(const std::string& dir, const std::string& model_path,
                              const std::string& key) {
    const std::string name = std::filesystem::path(model_path).filename().string();
    const auto* k = reinterpret_cast<const uint8_t*>(key.data());
    return (std::filesystem::path(dir) /
            fmt::format("{}.{:016x}.packed", name, weight_cache_hash({k, key.size()}, 3)))
        .string();
}

Status write_weight_cache(const std::string& path, const std::string& key,
                          std::vector<PackedPiece> pieces) {
    const std::filesystem::path p(path);
    std::error_code ec;
    std::filesystem::create_directories(p.parent_path(), ec);
    if (ec) {
        return make_error(ErrorCode::kIo, "cannot create '{}': {}", p.parent_path().string(),
                          ec.message());
    }
    std::vector<PackedEntry> entries;
    for (PackedPiece& pc : pieces) {
        pc.entry.size = pc.data.size();
        entries.push_back(pc.entry);
    }
    const std::vector<uint8_t> header = weight_cache_header(key, entries);
    static std::atomic<int> writers{0};  // two loads of one model in one process
    const std::string tmp = fmt::format("{}.tmp.{}.{}", path, getpid(), writers++);
    const int fd = ::open(tmp.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0)
        return make_error(ErrorCode::kIo, "cannot create '{}': {}", tmp, std::strerror(errno));
    Status st = write_pieces(fd, header, entries, pieces);
    ::close(fd);
    if (st.ok() && std::rename(tmp.c_str(), path.c_str()) != 0)
        st = make_error(ErrorCode::kIo, "cannot rename to '{}': {}", path, std::strerror(errno));
    if (!st.ok()) {
        std::filesystem::remove(tmp, ec);
        return make_error(st.error().code, "writing weight cache '{}': {}", path,
                          st.error().message);
    }
    const std::string name = p.filename().string();  // <model>.<hash>.packed
    remove_stale(p.parent_path(), name.substr(0, name.size() - 7 - 17), name);
    return ok_status();
}

Result<std::unique_ptr<WeightCache>> WeightCache::open(const std::string& path,
                                                       const std::string& key, Use use) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return make_error(errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo,
                          "cannot open '{}': {}", path, std::strerror(errno));
    }
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
        ::close(fd);
        return make_error(ErrorCode::kInvalidFile, "'{}' is not a non-empty regular file", path);
    }
    std::unique_ptr<WeightCache> c(new WeightCache());
    c->size_ = size_t(st.st_size);
    // Mapped at a 2 MiB-aligned address so the kernel can use 2 MiB pages for the file's
    // large folios: reserve, then map the file over the aligned start.
    c->reserved_ = c->size_ + kHuge;
    void* r = mmap(nullptr, c->reserved_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void* m = MAP_FAILED;
    if (r != MAP_FAILED) {
        c->base_ = static_cast<uint8_t*>(r);
        auto* aligned = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(r) + kHuge - 1) /
                                                   kHuge * kHuge);
        m = mmap(aligned, c->size_, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
    }
    const int err = errno;
    ::close(fd);
    if (m == MAP_FAILED)
        return make_error(ErrorCode::kIo, "cannot mmap '{}': {}", path, std::strerror(err));
    c->map_ = static_cast<uint8_t*>(m);
    madvise(c->map_, c->size_, MADV_HUGEPAGE);
    PAGODA_ASSIGN_OR_RETURN(c->header_, parse_weight_cache({c->map_, c->size_}));
    if (c->header_.key != key) {
        return make_error(ErrorCode::kInvalidFile,
                          "'{}' is stale (written for another model file or CPU)", path);
    }
    // Fault the entries in now (best effort; not the holes between them, which would
    // take zeroed page-cache pages), then see whether the kernel gave 2 MiB pages.
    // (Measured: with a tenth of the data in 4 KiB pages, decode ran 7-14% slower.)
    size_t data = 0;
    for (const PackedEntry& e : c->header_.entries) {
        const size_t n = std::min<uint64_t>(weight_cache_entry_span(e.size), c->size_ - e.offset);
        madvise(c->map_ + e.offset, n, MADV_POPULATE_READ);
        data += n;
    }
    c->copy_ = use == Use::kCopy || (data >= kSmall && pmd_mapped_bytes(c->map_) < data / 20 * 19);
    return c;
}

WeightCache::~WeightCache() {
    if (base_) munmap(base_, reserved_);
}

std::optional<Result<HugeBuffer>> WeightCache::take(const PackedEntry& want) const {
    for (const PackedEntry& e : header_.entries) {
        if (e.name != want.name) continue;
        if (e.kind != want.kind || e.type != want.type || e.rows != want.rows ||
            e.cols != want.cols) {
            return std::nullopt;
        }
        const uint8_t* p = map_ + e.offset;
        if (!copy_) return HugeBuffer::borrow(p, e.size);
        auto b = HugeBuffer::allocate(e.size);
        if (!b.ok()) return Result<HugeBuffer>(b.error());
        std::memcpy(b->data(), p, e.size);
        // The copy is what is read from now on: drop the mapping's pages (whole pages
        // only; entries start page-aligned).
        const size_t whole = (e.size + 4095) / 4096 * 4096;
        madvise(const_cast<uint8_t*>(p), std::min(whole, size_ - e.offset), MADV_DONTNEED);
        return b;
    }
    return std::nullopt;
}

}  // namespace pagoda::model
