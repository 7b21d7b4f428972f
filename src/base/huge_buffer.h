#pragma once
// HugeBuffer: a large, 2 MiB-aligned, zero-initialised allocation that asks the kernel
// for transparent huge pages (madvise). Weights and the KV pool stream gigabytes per
// step; with 4 KiB pages the TLB misses alone cost several times the memory traffic on
// the virtual machines we run on. Move-only RAII; not thread-safe to resize.

#include <cstddef>
#include <cstdint>

#include "base/result.h"

namespace pagoda {

class HugeBuffer {
  public:
    static Result<HugeBuffer> allocate(size_t bytes);
    // A view of memory owned elsewhere (a mapped weight-cache file), read-only in practice:
    // nothing is unmapped at destruction. The owner keeps it alive longer than the view.
    static HugeBuffer borrow(const uint8_t* data, size_t bytes);
    HugeBuffer() = default;
    HugeBuffer(HugeBuffer&& o) noexcept;
    HugeBuffer& operator=(HugeBuffer&& o) noexcept;
    HugeBuffer(const HugeBuffer&) = delete;
    HugeBuffer& operator=(const HugeBuffer&) = delete;
    ~HugeBuffer();

    // Faults every page in now without changing its contents (MADV_POPULATE_WRITE, Linux
    // 5.14+), so first use pays no page faults. Returns false where unsupported. Thread-safe.
    bool populate() const;
    uint8_t* data() const { return data_; }
    size_t size() const { return size_; }
    template <typename T>
    T* as() const {
        return reinterpret_cast<T*>(data_);
    }

  private:
    uint8_t* data_ = nullptr;
    size_t size_ = 0;
    size_t mapped_ = 0;  // 0 for a borrowed view
};

}  // namespace pagoda
