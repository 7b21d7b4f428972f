// HugeBuffer: the implementation (the contract is in base/huge_buffer.h).
#include "base/huge_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace pagoda {

namespace {
constexpr size_t kHuge = size_t(2) << 20;
}

Result<HugeBuffer> HugeBuffer::allocate(size_t bytes) {
    HugeBuffer b;
    if (bytes == 0) return b;
    // Over-map by 2 MiB so the start can be aligned; anonymous memory is zero-filled.
    const size_t len = (bytes + kHuge - 1) / kHuge * kHuge + kHuge;
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        return make_error(ErrorCode::kOutOfRange, "cannot allocate {} bytes: {}", bytes,
                          std::strerror(errno));
    }
    auto* base = static_cast<uint8_t*>(p);
    const uintptr_t aligned = (reinterpret_cast<uintptr_t>(base) + kHuge - 1) / kHuge * kHuge;
    const size_t head = aligned - reinterpret_cast<uintptr_t>(base);
    if (head) munmap(base, head);
    const size_t body = len - head;
    b.data_ = reinterpret_cast<uint8_t*>(aligned);
    b.size_ = bytes;
    b.mapped_ = body;
    madvise(b.data_, body, MADV_HUGEPAGE);  // best effort: ignored where THP is off
    return b;
}

HugeBuffer HugeBuffer::borrow(const uint8_t* data, size_t bytes) {
    HugeBuffer b;
    b.data_ = const_cast<uint8_t*>(data);
    b.size_ = bytes;
    return b;
}

HugeBuffer::HugeBuffer(HugeBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      mapped_(std::exchange(o.mapped_, 0)) {}

HugeBuffer& HugeBuffer::operator=(HugeBuffer&& o) noexcept {
    if (this != &o) {
        if (mapped_) munmap(data_, mapped_);
        data_ = std::exchange(o.data_, nullptr);
        size_ = std::exchange(o.size_, 0);
        mapped_ = std::exchange(o.mapped_, 0);
    }
    return *this;
}

HugeBuffer::~HugeBuffer() {
    if (mapped_) munmap(data_, mapped_);
}

bool HugeBuffer::populate() const {
#ifndef MADV_POPULATE_WRITE
    constexpr int MADV_POPULATE_WRITE = 23;  // Linux 5.14
#endif
    return data_ == nullptr || madvise(data_, size_, MADV_POPULATE_WRITE) == 0;
}

}  // namespace pagoda
