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
#include "cli/cluster_view.h"

namespace aquifer::cli {

inline constexpr char kLayoutXattr[] = "aquifer.layout";
// Read-only, regular files: "pg_width=6 pg_start=17 pg_count=64" (docs/design.md "Layout and
// placement": stripe s is on PG (pg_start + s) % pg_count of the width's PG table).
inline constexpr char kPlacementXattr[] = "aquifer.placement";

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

// Where a file's stripes go, as aquifer.placement gives it.
struct FilePlacement {
  uint32_t pg_width = 0;
  uint32_t pg_start = 0;
  uint32_t pg_count = 0;
};
// Parses "pg_width=6 pg_start=17 pg_count=64". Errors: kInvalidArgument (a key missing or not a
// number, pg_count 0, pg_start >= pg_count).
Result<FilePlacement> ParsePlacement(std::string_view text);

// How the stripes of a file of `size` bytes with `layout` (k, m, unit all set) are stored, one
// line each (at most `max_stripes`, then "... N more"): erasure coded (k data chunks and m
// parity) or, for a stripe holding less than one unit, m+1 copies; the bytes a chunk holds; and
// the servers of its PG in position order, named as `view` names them (PG indexes only when
// `view` is nullptr or lacks the table). Stripes never written are holes with no chunks; this
// goes by size alone and lists them as the rule would store them. Pure.
std::string DescribePlacement(uint64_t size, const LayoutSpec& layout, const FilePlacement& p,
                              const ClusterView* view, size_t max_stripes = 8);

// getxattr(path, name) as text (trailing NULs and newlines dropped); std::nullopt on ENODATA.
// Errors as GetLayoutXattr.
Result<std::optional<std::string>> GetXattrText(const std::string& path, const char* name);

// getxattr(path, "aquifer.layout"). Returns the value as text, or std::nullopt when the path
// has none (ENODATA). Errors: kNotFound (no such path), kNotSupported (not on an Aquifer mount),
// kInternal with the errno text otherwise.
Result<std::optional<std::string>> GetLayoutXattr(const std::string& path);

// setxattr(path, "aquifer.layout", value). Errors as GetLayoutXattr, plus kInvalidArgument
// when the file system refuses the value (EINVAL) and kPermissionDenied (EACCES/EPERM).
Status SetLayoutXattr(const std::string& path, const std::string& value);

}  // namespace aquifer::cli
