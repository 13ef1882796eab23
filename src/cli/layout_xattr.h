// `aquifer layout get/set`: a file's or directory's layout through the `aquifer.layout`
// extended attribute of a mounted path (getxattr/setxattr system calls; the FUSE client maps
// them to the metadata server).
//
// Value format (text, ASCII): "k=4 m=2 unit=1048576" — space-separated key=value pairs, in this
// order when written by this tool. Keys: k (data units, 1..64), m (parity units, 1..16),
// unit (stripe unit, bytes, 4096..16 MiB, a multiple of 4096). On a directory the layout is
// the default for files created in it later; on a file it can be set only while it is empty.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aquifer/status.h"

namespace aquifer::cli {

inline constexpr char kLayoutXattr[] = "aquifer.layout";

// A layout as the user wrote it: each field optional.
struct LayoutSpec {
  std::optional<uint32_t> k;
  std::optional<uint32_t> m;
  std::optional<uint64_t> unit_bytes;
};

// Parses "k=4", "m=2", "unit=1048576" (also "unit=1M", "unit=64K"), given as separate
// arguments or as one space- or comma-separated string. Errors: kInvalidArgument naming the bad
// token (unknown key, repeated key, not a number, out of the ranges above).
Result<LayoutSpec> ParseLayoutSpec(const std::vector<std::string>& tokens);

// Fills the fields `spec` lacks from `base`. Errors: kInvalidArgument when a field is still
// missing ("k, m and unit are all needed when PATH has no layout yet").
Result<LayoutSpec> CompleteLayout(const LayoutSpec& spec, const std::optional<LayoutSpec>& base);

// "k=4 m=2 unit=1048576" (only the fields present).
std::string FormatLayout(const LayoutSpec& spec);

// getxattr(path, "aquifer.layout"). Returns the value as text, or std::nullopt when the path
// has none (ENODATA). Errors: kNotFound (no such path), kNotSupported (not on an Aquifer mount),
// kInternal with the errno text otherwise.
Result<std::optional<std::string>> GetLayoutXattr(const std::string& path);

// setxattr(path, "aquifer.layout", value). Errors as GetLayoutXattr, plus kInvalidArgument
// when the file system refuses the value (EINVAL) and kPermissionDenied (EACCES/EPERM).
Status SetLayoutXattr(const std::string& path, const std::string& value);

}  // namespace aquifer::cli
