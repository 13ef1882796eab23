#include "aquifer/status.h"

#include <cerrno>

namespace aquifer {

namespace {
struct CodeInfo {
  Code code;
  const char* name;
  int err;
};
// The one table of codes, names and errnos.
constexpr CodeInfo kCodes[] = {
    {Code::kOk, "ok", 0},
    {Code::kNotFound, "not_found", ENOENT},
    {Code::kAlreadyExists, "already_exists", EEXIST},
    {Code::kNotEmpty, "not_empty", ENOTEMPTY},
    {Code::kNotDirectory, "not_directory", ENOTDIR},
    {Code::kIsDirectory, "is_directory", EISDIR},
    {Code::kPermissionDenied, "permission_denied", EACCES},
    {Code::kInvalidArgument, "invalid_argument", EINVAL},
    {Code::kNameTooLong, "name_too_long", ENAMETOOLONG},
    {Code::kNoSpace, "no_space", ENOSPC},
    {Code::kReadOnly, "read_only", EROFS},
    {Code::kStale, "stale", ESTALE},
    {Code::kUnavailable, "unavailable", EIO},
    {Code::kCorruption, "corruption", EIO},
    {Code::kInternal, "internal", EIO},
    {Code::kWouldBlock, "would_block", EAGAIN},
    {Code::kNotPermitted, "not_permitted", EPERM},
    {Code::kCrossDevice, "cross_device", EXDEV},
    {Code::kNoData, "no_data", ENODATA},
    {Code::kRange, "range", ERANGE},
    {Code::kNotSupported, "not_supported", EOPNOTSUPP},
    {Code::kDeadlock, "deadlock", EDEADLK},
    {Code::kTooManyLinks, "too_many_links", EMLINK},
    {Code::kFileTooLarge, "file_too_large", EFBIG},
    {Code::kDataLoss, "data_loss", EIO},
};

const CodeInfo& InfoOf(Code code) {
  for (const CodeInfo& info : kCodes) {
    if (info.code == code) return info;
  }
  return kCodes[static_cast<int>(Code::kInternal)];
}
}  // namespace

const char* CodeName(Code code) { return InfoOf(code).name; }

Code CodeFromInt(int value) {
  for (const CodeInfo& info : kCodes) {
    if (static_cast<int>(info.code) == value) return info.code;
  }
  return Code::kInternal;
}

Status::Status(Code code, std::string_view message) {
  if (code != Code::kOk) rep_ = std::make_shared<const Rep>(Rep{code, std::string(message)});
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return rep_ ? rep_->message : kEmpty;
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  std::string out = CodeName(code());
  if (!rep_->message.empty()) out += ": " + rep_->message;
  return out;
}

Status Status::WithPrefix(std::string_view prefix) const {
  if (ok()) return *this;
  return Status(code(), std::string(prefix) + ": " + rep_->message);
}

int ToErrno(const Status& status) { return InfoOf(status.code()).err; }

}  // namespace aquifer
