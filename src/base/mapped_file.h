#pragma once
// MappedFile: a read-only mmap of a whole file (RAII). Owned by whoever loads a model;
// the bytes are immutable, so reading from many threads is safe.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "base/result.h"

namespace pagoda {

class MappedFile {
  public:
    static Result<MappedFile> open(const std::string& path);
    MappedFile() = default;
    MappedFile(MappedFile&& o) noexcept;
    MappedFile& operator=(MappedFile&& o) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    ~MappedFile();

    std::span<const uint8_t> bytes() const { return {data_, size_}; }
    const std::string& path() const { return path_; }
    // Touches every page so later reads do not fault (used by warmup).
    void prefault() const;
    // Drops this process's mapping of the pages (madvise MADV_DONTNEED): they stop
    // counting as its resident memory, stay in the page cache, and fault back in when
    // read again. For a model whose weights were copied into packed buffers.
    void release_pages() const;

  private:
    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
    std::string path_;
};

}  // namespace pagoda
