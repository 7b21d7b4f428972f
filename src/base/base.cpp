// Error code names and the PAGODA_CHECK failure handler (result.h, check.h).
#include <cstdio>
#include <cstdlib>

#include "base/check.h"
#include "base/result.h"

namespace pagoda {

const char* error_code_name(ErrorCode code) {
    switch (code) {
        case ErrorCode::kInvalidArgument: return "invalid_argument";
        case ErrorCode::kInvalidFile: return "invalid_file";
        case ErrorCode::kUnsupported: return "unsupported";
        case ErrorCode::kNotFound: return "not_found";
        case ErrorCode::kIo: return "io";
        case ErrorCode::kOutOfRange: return "out_of_range";
        case ErrorCode::kResourceExhausted: return "resource_exhausted";
        case ErrorCode::kConflict: return "conflict";
        case ErrorCode::kInternal: return "internal";
    }
    return "unknown";
}

namespace detail {

CheckFailure::CheckFailure(const char* file, int line, const char* cond) {
    os_ << "CHECK failed at " << file << ":" << line << ": " << cond << " ";
}

CheckFailure::~CheckFailure() {
    std::fprintf(stderr, "%s\n", os_.str().c_str());
    std::fflush(stderr);
    std::abort();
}

}  // namespace detail
}  // namespace pagoda
