// The RocksDB engine of NamespaceStore: one column family, the key schema of namespace_store.h.
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/utilities/checkpoint.h>
#include <rocksdb/write_batch.h>

#include "metadata/namespace_store.h"

namespace aquifer::meta {
namespace {

// The smallest key greater than every key that starts with `prefix` ("" when none exists).
std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    unsigned char c = static_cast<unsigned char>(prefix.back());
    if (c != 0xff) {
      prefix.back() = static_cast<char>(c + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return prefix;
}

Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return OkStatus();
  if (s.IsCorruption()) return Corruption(std::string(what) + ": " + s.ToString());
  return Internal(std::string(what) + ": " + s.ToString());
}

class RocksStore final : public NamespaceStore {
 public:
  explicit RocksStore(rocksdb::DB* db) : db_(db) {}
  ~RocksStore() override { delete db_; }

  Status Sync() override { return FromRocks(db_->SyncWAL(), "sync wal"); }

  Status Checkpoint(const std::string& dir) override {
    rocksdb::Checkpoint* raw = nullptr;
    AQ_RETURN_IF_ERROR(FromRocks(rocksdb::Checkpoint::Create(db_, &raw), "checkpoint"));
    std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
    // log_size_for_flush 0: flush the memtable first, so the copy is SST files plus a short WAL.
    return FromRocks(checkpoint->CreateCheckpoint(dir, /*log_size_for_flush=*/0),
                     "checkpoint into " + dir);
  }

 protected:
  Result<std::optional<std::string>> GetRaw(std::string_view key) override {
    std::string value;
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), rocksdb::Slice(key.data(), key.size()),
                                 &value);
    if (s.IsNotFound()) return std::optional<std::string>();
    if (!s.ok()) return FromRocks(s, "get");
    return std::optional<std::string>(std::move(value));
  }

  Status ScanRaw(std::string_view prefix, std::string_view start,
                 const std::function<bool(std::string_view, std::string_view)>& fn) override {
    rocksdb::ReadOptions ro;
    std::string upper = PrefixEnd(std::string(prefix));
    rocksdb::Slice upper_slice(upper);
    if (!upper.empty()) ro.iterate_upper_bound = &upper_slice;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
    for (it->Seek(rocksdb::Slice(start.data(), start.size())); it->Valid(); it->Next()) {
      rocksdb::Slice k = it->key();
      if (!k.starts_with(rocksdb::Slice(prefix.data(), prefix.size()))) break;
      rocksdb::Slice v = it->value();
      if (!fn(std::string_view(k.data(), k.size()), std::string_view(v.data(), v.size()))) break;
    }
    return FromRocks(it->status(), "scan");
  }

  Status WriteRaw(const std::vector<StoreOp>& ops, bool sync) override {
    rocksdb::WriteBatch batch;
    for (const StoreOp& op : ops) {
      switch (op.kind) {
        case StoreOp::Kind::kPut:
          batch.Put(op.key, op.value);
          break;
        case StoreOp::Kind::kDelete:
          batch.Delete(op.key);
          break;
        case StoreOp::Kind::kDeletePrefix:
          batch.DeleteRange(op.key, PrefixEnd(op.key));
          break;
      }
    }
    rocksdb::WriteOptions wo;
    wo.sync = sync;
    return FromRocks(db_->Write(wo, &batch), "write");
  }

 private:
  rocksdb::DB* db_;
};

}  // namespace

Result<std::unique_ptr<NamespaceStore>> OpenRocksStore(const std::string& dir) {
  rocksdb::Options options;
  options.create_if_missing = true;
  options.IncreaseParallelism(2);
  options.OptimizeLevelStyleCompaction(64 << 20);
  rocksdb::BlockBasedTableOptions table;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, dir, &db);
  if (!s.ok()) return FromRocks(s, "open rocksdb at " + dir);
  return std::unique_ptr<NamespaceStore>(new RocksStore(db));
}

}  // namespace aquifer::meta
