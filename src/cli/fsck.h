// `aquifer fsck`: checks that the chunks on the data servers match the namespace.
//
// 1. Walks the namespace from the root (ReadDir with attributes, paged 1,000 entries), keeping
//    per regular file {size, data_version, layout} (about 60 bytes a file; hard links once).
// 2. Lists every non-removed, up data server's chunks (ListChunks, pages of `page_chunks`) and
//    merges the sorted listings, one (inode, stripe) at a time, so memory is O(servers * page)
//    besides the file table.
// 3. Per stripe: versions > data_version are uncommitted (a writer's, or a crash's leftovers:
//    warnings); the newest version <= data_version must have every position its rule needs
//    (replicated: 0..m; erasure coded: data chunks that are not empty at the tail, and all m
//    parity chunks), else the stripe is MISSING chunks (rebuildable when k, or 1 copy, remain;
//    else LOST unless it is a partial version over a whole older one, a crashed writer's: a
//    warning). A stripe with no chunk at all is a hole only if the file's stripe map says so
//    (never written since its last truncate); a stripe the map records as written with no chunk
//    on any server is LOST. Chunks at or below a recorded stripe's floor, and chunks of stripes
//    the map does not record, are a truncate's leftovers awaiting GC: not checked. Files from
//    before stripe maps (map unknown) keep the old rule: no chunk at all is a hole.
//    Chunks of an inode that does not exist (confirmed with GetAttr: files created or unlinked
//    during the walk are not orphans) and committed chunks past a file's end are ORPHANS,
//    unless a GC task pending on the metadata server (ListGcTasks) covers them: then they are
//    being collected (a file deleted or truncated just before the check), counted apart and
//    not a problem. A missing inode with no pending task is listed again, so chunks its GC
//    deleted after the first listing are not counted either. After
//    a restore from a backup (the metadata server reports restore floors), so are the chunk
//    versions of a file from the backup written after it: above its restored data_version and
//    below the restore's version floor (kept by the server as an abandoned range once a writer
//    opened the file again).
// 4. With `repair`, orphans are deleted (DeleteChunks on each server that holds them; past-end
//    ones from the file's current end, up to its current data_version, so nothing written since
//    the check is touched; versions written after a restored backup by that version range only,
//    on servers whose Info says they honour its lower bound). Missing chunks are not rebuilt by fsck: a down server's positions
//    are rebuilt by repair moves; fsck says so.
//
// Problems (exit 1): missing, lost, orphans not deleted, servers that could not be listed.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "aquifer/status.h"
#include "cli/rpc/fsck_rpc.h"

namespace aquifer::cli {

struct FsckOptions {
  bool repair = false;
  uint32_t page_chunks = 10000;  // ListChunks page
  size_t max_listed = 20;        // findings printed per kind (all are counted)
  bool verbose = false;          // print every finding
  // Progress while it runs, on the report's stream: the walk's inodes against the inodes in
  // use (StatFs), then the chunk versions and bytes listed against what the servers' last
  // heartbeats reported, with rate and ETA, at most every `progress_interval_s` (> 0).
  // `progress_bar`: one bar redrawn in place (a terminal; a finding clears it first);
  // otherwise one line each time. Interval 0: no progress output.
  bool progress_bar = false;
  double progress_interval_s = 0;
};

struct FsckReport {
  uint64_t directories = 0;
  uint64_t files = 0;
  uint64_t servers_listed = 0;
  std::vector<std::string> servers_skipped;  // down while holding PG positions
  uint64_t chunk_versions = 0;  // listed
  uint64_t stripes = 0;         // (inode, stripe) groups checked
  uint64_t missing_stripes = 0;  // rebuildable
  uint64_t missing_chunks = 0;
  uint64_t lost_stripes = 0;     // fewer than k (or no copy) at the committed version
  uint64_t lost_files = 0;       // files with a lost stripe
  uint64_t partial_versions = 0; // crashed writer's partial version over a whole older one
  uint64_t uncommitted_versions = 0;  // chunk versions > data_version
  uint64_t orphan_inodes = 0;        // inodes with chunks but no inode
  uint64_t orphan_chunks = 0;        // chunk versions of those, plus committed ones past EOF
  uint64_t orphan_bytes = 0;
  uint64_t past_eof_files = 0;
  // After a restore from a backup: files from it with chunk versions written after the backup
  // (above their restored data_version, below the restore's version floor). Orphans too.
  uint64_t restored_leftover_files = 0;
  // Chunk versions a pending GC task covers (a file deleted or truncated just before): being
  // deleted by the data servers, not problems. Of how many inodes, and their bytes.
  uint64_t collecting_chunks = 0;
  uint64_t collecting_bytes = 0;
  uint64_t collecting_inodes = 0;
  // Chunk versions of missing inodes that a second listing found gone (GC finished during the
  // check): not problems.
  uint64_t collected_during_check = 0;
  uint64_t orphans_deleted = 0;      // chunk versions deleted by --repair
  uint64_t orphans_left = 0;         // orphan chunk versions not deleted (no --repair, or failed)
  uint64_t errors = 0;               // RPC failures during the check or repair
  // Whether problems remain after any repair.
  bool clean() const {
    return missing_stripes == 0 && lost_stripes == 0 && errors == 0 &&
           servers_skipped.empty() && orphans_left == 0;
  }
};

// Runs the check (and repair), printing findings and a summary to `out`. Errors: the metadata
// server unreachable or the namespace walk failing (then nothing is deleted).
Result<FsckReport> RunFsck(FsckRpc& rpc, const FsckOptions& options, std::ostream& out);

}  // namespace aquifer::cli
