// MappedFile: the implementation (the contract is in base/mapped_file.h).
#include "base/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace pagoda {

Result<MappedFile> MappedFile::open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return make_error(errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo,
                          "cannot open '{}': {}", path, std::strerror(errno));
    }
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return make_error(ErrorCode::kIo, "'{}' is not a regular file", path);
    }
    MappedFile f;
    f.path_ = path;
    f.size_ = size_t(st.st_size);
    if (f.size_ > 0) {
        void* p = mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            const int e = errno;
            ::close(fd);
            return make_error(ErrorCode::kIo, "cannot mmap '{}': {}", path, std::strerror(e));
        }
        f.data_ = static_cast<const uint8_t*>(p);
    }
    ::close(fd);
    return f;
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      path_(std::move(o.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
    if (this != &o) {
        if (data_) munmap(const_cast<uint8_t*>(data_), size_);
        data_ = std::exchange(o.data_, nullptr);
        size_ = std::exchange(o.size_, 0);
        path_ = std::move(o.path_);
    }
    return *this;
}

MappedFile::~MappedFile() {
    if (data_) munmap(const_cast<uint8_t*>(data_), size_);
}

void MappedFile::prefault() const {
    if (!data_) return;
    madvise(const_cast<uint8_t*>(data_), size_, MADV_WILLNEED);
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < size_; i += 4096) sink = sink + data_[i];
    (void)sink;
}

void MappedFile::release_pages() const {
    if (data_) madvise(const_cast<uint8_t*>(data_), size_, MADV_DONTNEED);
}

}  // namespace pagoda
