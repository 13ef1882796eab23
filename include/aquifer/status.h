// Aquifer's one error type. Every fallible function returns Status or Result<T>; errno appears
// only at the FUSE edge, through ToErrno().
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace aquifer {

// Canonical codes. Each says how a caller should react.
enum class Code : uint8_t {
  kOk = 0,
  kNotFound,          // no such inode, dentry or chunk: report ENOENT
  kAlreadyExists,     // the name is taken: report EEXIST
  kNotEmpty,          // directory still has entries: ENOTEMPTY
  kNotDirectory,      // a path component is not a directory: ENOTDIR
  kIsDirectory,       // the operation needs a non-directory: EISDIR
  kPermissionDenied,  // caller lacks rights: EACCES
  kInvalidArgument,   // malformed request; retrying will not help: EINVAL
  kNameTooLong,       // a name over 255 bytes: ENAMETOOLONG
  kNoSpace,           // a disk or quota is full: ENOSPC
  kReadOnly,          // the file system or object is read-only: EROFS
  kStale,             // the object changed under you: re-look it up, then retry (ESTALE)
  kUnavailable,       // a server cannot be reached now: retry with backoff, or degrade (EIO)
  kCorruption,        // stored bytes failed their checksum: read elsewhere and repair (EIO)
  kInternal,          // a bug or an unexpected system error: EIO
  kWouldBlock,        // a lock or lease is held by another owner: retry later (EAGAIN)
  kNotPermitted,      // operation forbidden whatever the rights, e.g. hard link to dir: EPERM
  kCrossDevice,       // the operation would cross file systems: EXDEV
  kNoData,            // no such extended attribute: ENODATA
  kRange,             // a caller's buffer is too small for the value: ERANGE
  kNotSupported,      // the operation is not supported: EOPNOTSUPP
  kDeadlock,          // a blocking lock would deadlock: EDEADLK
  kTooManyLinks,      // nlink would pass its maximum: EMLINK
  kFileTooLarge,      // a size or offset past the largest a file may have (2^63 - 1): EFBIG
  kDataLoss,          // written data is gone beyond the layout's redundancy; retrying will not
                      // help: report EIO, log the inode and stripe, tell the operator (fsck)
};

// Returns a stable lower-case name for `code`, e.g. "not_found". Never null.
const char* CodeName(Code code);

// Converts the wire integer of a code back into Code. Unknown integers give kInternal.
Code CodeFromInt(int value);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK; carries no allocation.
  Status(Code code, std::string_view message);

  static Status Ok() { return Status(); }

  bool ok() const { return rep_ == nullptr; }
  Code code() const { return rep_ ? rep_->code : Code::kOk; }
  // The message; empty for OK.
  const std::string& message() const;
  // "not_found: no entry 'x' in inode 1" or "ok".
  std::string ToString() const;

  // Returns a copy whose message is "`prefix`: message". OK stays OK.
  Status WithPrefix(std::string_view prefix) const;

 private:
  struct Rep {
    Code code;
    std::string message;
  };
  std::shared_ptr<const Rep> rep_;
};

inline Status OkStatus() { return Status(); }
inline Status NotFound(std::string_view m) { return Status(Code::kNotFound, m); }
inline Status AlreadyExists(std::string_view m) { return Status(Code::kAlreadyExists, m); }
inline Status InvalidArgument(std::string_view m) { return Status(Code::kInvalidArgument, m); }
inline Status Unavailable(std::string_view m) { return Status(Code::kUnavailable, m); }
inline Status Corruption(std::string_view m) { return Status(Code::kCorruption, m); }
inline Status Internal(std::string_view m) { return Status(Code::kInternal, m); }
inline Status NoSpace(std::string_view m) { return Status(Code::kNoSpace, m); }
inline Status PermissionDenied(std::string_view m) { return Status(Code::kPermissionDenied, m); }

// The only errno table. Returns a positive errno value (e.g. ENOENT) for a non-OK status, 0 for OK.
int ToErrno(const Status& status);

// A value or a non-OK Status.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}           // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}    // NOLINT: must not be OK
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace aquifer

// Returns the Status of `expr` from the enclosing function when it is not OK.
#define AQ_RETURN_IF_ERROR(expr)                      \
  do {                                                \
    ::aquifer::Status aq_status_ = (expr);            \
    if (!aq_status_.ok()) return aq_status_;          \
  } while (0)
