#include "client_fuse/fuse_uring.h"

#include <errno.h>
#include <liburing.h>
#include <linux/fuse.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/logging.h"

namespace aquifer::fuse {
namespace {

// ABI 7.42 additions to include/uapi/linux/fuse.h (Debian 12's headers stop at 7.38).
constexpr uint64_t kFuseOverIoUring = 1ULL << 41;  // INIT flag: the daemon takes the rings
constexpr uint32_t kCmdRegister = 1;               // FUSE_IO_URING_CMD_REGISTER
constexpr uint32_t kCmdCommitAndFetch = 2;         // FUSE_IO_URING_CMD_COMMIT_AND_FETCH
constexpr size_t kInOutHeaderBytes = 128;          // FUSE_URING_IN_OUT_HEADER_SZ
constexpr size_t kOpInBytes = 128;                 // FUSE_URING_OP_IN_OUT_SZ

// struct fuse_uring_ent_in_out
struct RingEntInOut {
  uint64_t flags;
  uint64_t commit_id;  // the request's unique, to be echoed in the commit
  uint32_t payload_sz;  // bytes of the payload buffer in use, either direction
  uint32_t padding;
  uint64_t reserved;
};
// struct fuse_uring_req_header: iov[0] of a registered entry.
struct RingReqHeader {
  char in_out[kInOutHeaderBytes];  // fuse_in_header on fetch, fuse_out_header on commit
  char op_in[kOpInBytes];          // the request's first argument (its per-opcode struct)
  RingEntInOut ent_in_out;
};
static_assert(sizeof(RingReqHeader) == 288);
// struct fuse_uring_cmd_req: the command area of a 128-byte SQE.
struct RingCmdReq {
  uint64_t flags;
  uint64_t commit_id;
  uint16_t qid;
  uint8_t padding[6];
};
static_assert(sizeof(RingCmdReq) <= 80);

// The entry's block: the header at 0, the payload at kPayloadOffset; the request is rebuilt just
// below the payload, in the gap.
constexpr size_t kPayloadOffset = 4096;
static_assert(kPayloadOffset >= sizeof(RingReqHeader) + sizeof(fuse_in_header) + kOpInBytes);

// The FUSE payload of the largest request of a connection (the kernel's max_payload_sz).
constexpr size_t kMinReadBuffer = 8192;  // FUSE_MIN_READ_BUFFER
constexpr unsigned kDefaultMaxPages = 32;  // FUSE_DEFAULT_MAX_PAGES_PER_REQ

std::shared_ptr<spdlog::logger> Log() { return Logger("fuse"); }

}  // namespace

struct RingThread;

// One registered ring entry. The kernel writes a request into `header` and `payload`; the
// thread that owns the entry processes it; the reply goes back through the owner's ring.
struct RingEntry {
  RingThread* owner = nullptr;
  std::unique_ptr<char, decltype(&std::free)> block{nullptr, &std::free};
  RingReqHeader* header = nullptr;
  char* payload = nullptr;
  size_t payload_bytes = 0;
  iovec iov[2]{};
  uint64_t unique = 0;        // the request being processed
  bool replied_here = false;  // its reply was prepared by the owner, during processing
};

struct RingThread {
  FuseUring::Impl* impl = nullptr;
  uint16_t qid = 0;
  io_uring ring{};
  bool ring_made = false;
  int wake_fd = -1;
  uint64_t wake_value = 0;
  std::mutex mu;
  std::vector<RingEntry*> foreign_commits;  // guarded by mu: replies made on other threads
  std::vector<std::unique_ptr<RingEntry>> entries;  // owner-only once the thread runs
  int live = 0;  // entries the kernel holds or hands us (owner-only)
  std::thread thread;

  void Run();
  RingEntry* NewEntry();
  io_uring_sqe* NextSqe();
  void PrepCmd(RingEntry* e, uint32_t op, uint64_t commit_id);
  void ArmWake();
  void Handle(RingEntry* e);
};

thread_local RingThread* tls_ring_thread = nullptr;

struct FuseUring::Impl {
  fuse_session* se = nullptr;
  int dev_fd = -1;
  Options options;
  unsigned queues = 1;
  std::atomic<uint64_t> init_unique{0};
  std::atomic<bool> offered{false};
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> ring_requests{0};
  std::atomic<bool> logged_first{false};
  size_t payload_bytes = 0;

  mutable std::mutex state_mu;
  std::string transport;  // guarded by state_mu
  std::vector<std::unique_ptr<RingThread>> threads;  // under state_mu; only grows
  std::vector<unsigned> queue_threads;  // per queue: its threads (state_mu)
  // Per queue: entries the kernel may put a request in now (registered, or committed and
  // fetching again). Changed by the queue's threads without state_mu.
  std::unique_ptr<std::atomic<int>[]> free_entries;

  std::mutex inflight_mu;
  std::unordered_map<uint64_t, RingEntry*> inflight;  // guarded by inflight_mu

  void SetTransport(const std::string& t) {
    std::lock_guard lock(state_mu);
    transport = t;
  }
  ssize_t WriteInitReply(int fd, const iovec* iov, int count);
  bool StartRings();
  // A request of queue `qid` reached its thread: that entry is no longer free. When it was the
  // queue's last free entry, the queue grows by one thread with one entry (Grow), so requests
  // the kernel queues meanwhile do not wait for a slow one.
  void Taken(uint16_t qid);
  // `n` entries of queue `qid` go back to the kernel (a commit and fetch is on its way).
  void Freed(uint16_t qid, int n) { free_entries[qid].fetch_add(n); }
  // Makes sure queue `qid` has a free entry: when it has none, makes and starts one more thread
  // with one entry, unless the queue has options.max_threads_per_queue already or the rings
  // stop. False when the queue is left with no free entry.
  bool Grow(uint16_t qid);
  // Makes `t`'s ring, eventfd and first entry (nothing registered); "" or what failed.
  std::string MakeRingThread(RingThread& t, uint16_t qid);
  bool CommitRingReply(uint64_t unique, const iovec* iov, int count);
};

namespace {

std::atomic<FuseUring::Impl*> g_impl{nullptr};

// The number of possible CPUs (the kernel's num_possible_cpus(), one queue each): the highest id
// in /sys/devices/system/cpu/possible ("0-1", "0-3,5") plus one.
unsigned PossibleCpus() {
  std::ifstream f("/sys/devices/system/cpu/possible");
  std::string s;
  if (!(f >> s)) return std::max(1u, std::thread::hardware_concurrency());
  unsigned highest = 0;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
    if (j > i) highest = std::max(highest, static_cast<unsigned>(std::stoul(s.substr(i, j - i))));
    i = j + 1;
  }
  return highest + 1;
}

ssize_t ReadHook(int fd, void* buf, size_t len, void*) {
  ssize_t n = ::read(fd, buf, len);
  FuseUring::Impl* impl = g_impl.load();
  if (impl != nullptr && n >= static_cast<ssize_t>(sizeof(fuse_in_header) + sizeof(fuse_init_in))) {
    fuse_in_header in;
    std::memcpy(&in, buf, sizeof in);
    if (in.opcode == FUSE_INIT) {
      fuse_init_in init;
      std::memcpy(&init, static_cast<const char*>(buf) + sizeof in, sizeof init);
      uint64_t flags = init.flags;
      if (flags & FUSE_INIT_EXT) flags |= static_cast<uint64_t>(init.flags2) << 32;
      impl->offered = (flags & kFuseOverIoUring) != 0;
      impl->init_unique = in.unique;
    }
  }
  return n;
}

ssize_t WritevHook(int fd, struct iovec* iov, int count, void*) {
  FuseUring::Impl* impl = g_impl.load();
  if (impl != nullptr && count >= 1 && iov[0].iov_len >= sizeof(fuse_out_header)) {
    fuse_out_header oh;
    std::memcpy(&oh, iov[0].iov_base, sizeof oh);
    if (oh.unique != 0) {
      if (impl->CommitRingReply(oh.unique, iov, count)) return oh.len;
      uint64_t init = impl->init_unique.load();
      if (init != 0 && oh.unique == init) return impl->WriteInitReply(fd, iov, count);
    }
  }
  return ::writev(fd, iov, count);
}

}  // namespace

bool KernelOffersFuseUring() {
  std::ifstream f("/sys/module/fuse/parameters/enable_uring");
  std::string v;
  return static_cast<bool>(f >> v) && (v == "Y" || v == "1");
}

// The INIT reply: when the kernel offered the rings and they can be made, the flag goes into
// libfuse's reply; the rings register once the kernel has taken it (it refuses registrations of
// an uninitialised connection).
ssize_t FuseUring::Impl::WriteInitReply(int fd, const iovec* iov, int count) {
  init_unique = 0;
  std::string reply;
  for (int i = 0; i < count; ++i) reply.append(static_cast<const char*>(iov[i].iov_base), iov[i].iov_len);
  fuse_out_header oh;
  std::memcpy(&oh, reply.data(), sizeof oh);
  bool use_rings = false;
  if (oh.error == 0 && reply.size() >= sizeof oh + sizeof(fuse_init_out)) {
    fuse_init_out out;
    std::memcpy(&out, reply.data() + sizeof oh, sizeof out);
    // Lookups and readdirs of one directory in parallel (see the header). The kernel knows
    // the flag since 7.25 (Linux 4.7).
    out.flags |= FUSE_PARALLEL_DIROPS;
    std::memcpy(reply.data() + sizeof oh, &out, sizeof out);
    const unsigned max_pages = (out.flags & FUSE_MAX_PAGES) ? out.max_pages : kDefaultMaxPages;
    payload_bytes = std::max<size_t>({kMinReadBuffer, out.max_write, size_t{max_pages} * 4096});
    payload_bytes = (payload_bytes + 4095) / 4096 * 4096;
    if (!options.rings || !offered) {
      SetTransport("dev");
      if (options.rings) {
        Log()->info("fuse transport=dev: the kernel did not offer FUSE over io_uring at INIT");
      }
    } else if (StartRings()) {
      out.flags |= FUSE_INIT_EXT;
      out.flags2 |= static_cast<uint32_t>(kFuseOverIoUring >> 32);
      std::memcpy(reply.data() + sizeof oh, &out, sizeof out);
      use_rings = true;
    } else {
      SetTransport("dev");
    }
  }
  if (!use_rings && options.required) {
    Log()->error("fuse transport: -o transport=uring, and FUSE over io_uring is not available at "
                 "INIT: the session ends");
    fuse_session_exit(se);
  }
  ssize_t n = ::write(fd, reply.data(), reply.size());
  if (n != static_cast<ssize_t>(reply.size())) return n < 0 ? -1 : n;
  if (use_rings) {
    // The kernel processed the reply inside write(2): the connection is initialised now.
    std::lock_guard lock(state_mu);
    for (auto& t : threads) t->thread = std::thread([p = t.get()] { p->Run(); });
    transport = "uring";
    Log()->info("fuse transport=uring: {} queues x {} entries (each queue grows to at most {} "
                "while all its entries are busy), {} KiB payload each",
                queues, options.threads_per_queue, options.max_threads_per_queue,
                payload_bytes / 1024);
  }
  return n;
}

// Makes every thread's ring, eventfd and first entry (nothing is registered yet). False, with
// everything made so far undone, when any of it fails.
bool FuseUring::Impl::StartRings() {
  std::vector<std::unique_ptr<RingThread>> made;
  auto undo = [&made](const std::string& what) {
    for (auto& t : made) {
      if (t->ring_made) io_uring_queue_exit(&t->ring);
      if (t->wake_fd >= 0) close(t->wake_fd);
    }
    Log()->error("fuse transport=dev: FUSE over io_uring set-up failed ({}); requests stay on "
                 "/dev/fuse",
                 what);
    return false;
  };
  for (unsigned q = 0; q < queues; ++q) {
    for (unsigned i = 0; i < options.threads_per_queue; ++i) {
      RingThread& t = *made.emplace_back(std::make_unique<RingThread>());
      std::string error = MakeRingThread(t, static_cast<uint16_t>(q));
      if (!error.empty()) return undo(error);
    }
  }
  std::lock_guard lock(state_mu);
  threads = std::move(made);
  queue_threads.assign(queues, options.threads_per_queue);
  free_entries = std::make_unique<std::atomic<int>[]>(queues);
  for (unsigned q = 0; q < queues; ++q) free_entries[q] = static_cast<int>(options.threads_per_queue);
  return true;
}

std::string FuseUring::Impl::MakeRingThread(RingThread& t, uint16_t qid) {
  t.impl = this;
  t.qid = qid;
  int rc = io_uring_queue_init(16, &t.ring, IORING_SETUP_SQE128);
  if (rc < 0) return std::string("io_uring_queue_init: ") + std::strerror(-rc);
  t.ring_made = true;
  t.wake_fd = eventfd(0, EFD_CLOEXEC);
  if (t.wake_fd < 0) return std::string("eventfd: ") + std::strerror(errno);
  if (t.NewEntry() == nullptr) return "out of memory for a ring entry";
  return "";
}

void FuseUring::Impl::Taken(uint16_t qid) {
  if (free_entries[qid].fetch_sub(1) - 1 > 0) return;
  (void)Grow(qid);
}

bool FuseUring::Impl::Grow(uint16_t qid) {
  std::lock_guard lock(state_mu);
  // Another thread of the queue may have grown it while this one waited for the lock.
  if (free_entries[qid].load() > 0) return true;
  if (stopping.load() || queue_threads[qid] >= options.max_threads_per_queue) return false;
  auto t = std::make_unique<RingThread>();
  std::string error = MakeRingThread(*t, qid);
  if (!error.empty()) {
    if (t->ring_made) io_uring_queue_exit(&t->ring);
    if (t->wake_fd >= 0) close(t->wake_fd);
    Log()->warn("fuse ring: queue {}: cannot add a thread ({}); its requests wait for a free "
                "entry", qid, error);
    return false;
  }
  ++queue_threads[qid];
  free_entries[qid].fetch_add(1);  // its entry, registered as the thread starts
  if (queue_threads[qid] == options.max_threads_per_queue) {
    Log()->warn("fuse ring: queue {} has {} threads, its most (-o max_threads); a request of "
                "this CPU now waits while all of them are busy", qid, queue_threads[qid]);
  }
  RingThread* p = t.get();
  threads.push_back(std::move(t));
  p->thread = std::thread([p] { p->Run(); });
  return true;
}

bool FuseUring::Impl::CommitRingReply(uint64_t unique, const iovec* iov, int count) {
  RingEntry* e = nullptr;
  {
    std::lock_guard lock(inflight_mu);
    auto it = inflight.find(unique);
    if (it == inflight.end()) return false;
    e = it->second;
    inflight.erase(it);
  }
  if (stopping.load()) return true;  // the rings are gone with the connection: nothing to send
  fuse_out_header oh;
  std::memcpy(&oh, iov[0].iov_base, sizeof oh);
  size_t used = 0, skip = sizeof oh;
  bool fits = true;
  for (int i = 0; i < count && fits; ++i) {
    const char* p = static_cast<const char*>(iov[i].iov_base);
    size_t len = iov[i].iov_len;
    const size_t s = std::min(skip, len);
    p += s;
    len -= s;
    skip -= s;
    if (len == 0) continue;
    if (used + len > e->payload_bytes) {
      fits = false;
      break;
    }
    std::memcpy(e->payload + used, p, len);
    used += len;
  }
  if (!fits) {
    Log()->error("fuse ring: a reply of {} bytes exceeds the entry's {} (unique={}); answered EIO",
                 oh.len, e->payload_bytes, unique);
    oh.error = -EIO;
    oh.len = sizeof oh;
    used = 0;
  }
  std::memcpy(e->header->in_out, &oh, sizeof oh);
  e->header->ent_in_out.payload_sz = static_cast<uint32_t>(used);
  ring_requests.fetch_add(1, std::memory_order_relaxed);
  RingThread* owner = e->owner;
  if (tls_ring_thread == owner) {
    e->replied_here = true;
    owner->PrepCmd(e, kCmdCommitAndFetch, unique);  // submitted with the owner's next wait
  } else {
    {
      std::lock_guard lock(owner->mu);
      owner->foreign_commits.push_back(e);
    }
    const uint64_t one = 1;
    if (::write(owner->wake_fd, &one, sizeof one) < 0) {
      Log()->error("fuse ring: cannot wake queue {}'s thread: {}", owner->qid, std::strerror(errno));
    }
  }
  return true;
}

RingEntry* RingThread::NewEntry() {
  auto e = std::make_unique<RingEntry>();
  e->owner = this;
  e->payload_bytes = impl->payload_bytes;
  void* mem = std::aligned_alloc(4096, kPayloadOffset + e->payload_bytes);
  if (mem == nullptr) return nullptr;
  std::memset(mem, 0, kPayloadOffset);
  e->block.reset(static_cast<char*>(mem));
  e->header = reinterpret_cast<RingReqHeader*>(e->block.get());
  e->payload = e->block.get() + kPayloadOffset;
  e->iov[0] = {e->header, sizeof(RingReqHeader)};
  e->iov[1] = {e->payload, e->payload_bytes};
  entries.push_back(std::move(e));
  ++live;
  return entries.back().get();
}

// A cleared 128-byte SQE of this thread's ring, submitting what is queued when it is full;
// nullptr (logged) when none frees up.
io_uring_sqe* RingThread::NextSqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring);
  if (sqe == nullptr) {
    io_uring_submit(&ring);
    sqe = io_uring_get_sqe(&ring);
  }
  if (sqe == nullptr) {
    Log()->error("fuse ring: queue {} has no free submission slot", qid);
    return nullptr;
  }
  std::memset(sqe, 0, 128);
  return sqe;
}

void RingThread::PrepCmd(RingEntry* e, uint32_t op, uint64_t commit_id) {
  io_uring_sqe* sqe = NextSqe();
  if (sqe == nullptr) return;
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->fd = impl->dev_fd;
  sqe->cmd_op = op;
  sqe->addr = reinterpret_cast<uint64_t>(e->iov);
  sqe->len = 2;
  RingCmdReq req{};
  req.commit_id = commit_id;
  req.qid = qid;
  std::memcpy(sqe->cmd, &req, sizeof req);
  io_uring_sqe_set_data(sqe, e);
}

void RingThread::ArmWake() {
  io_uring_sqe* sqe = NextSqe();
  if (sqe == nullptr) return;
  io_uring_prep_read(sqe, wake_fd, &wake_value, sizeof wake_value, 0);
  io_uring_sqe_set_data(sqe, nullptr);
}

// Rebuilds the request as /dev/fuse would deliver it (in place, below the payload) and runs it.
void RingThread::Handle(RingEntry* e) {
  fuse_in_header in;
  std::memcpy(&in, e->header->in_out, sizeof in);
  const uint32_t payload = e->header->ent_in_out.payload_sz;
  e->unique = in.unique;
  if (payload > e->payload_bytes || in.len < sizeof in + payload ||
      in.len - sizeof in - payload > kOpInBytes) {
    Log()->error("fuse ring: malformed request opcode={} len={} payload={} (unique={}); "
                 "answered EIO",
                 in.opcode, in.len, payload, in.unique);
    fuse_out_header oh{sizeof(fuse_out_header), -EIO, in.unique};
    std::memcpy(e->header->in_out, &oh, sizeof oh);
    e->header->ent_in_out.payload_sz = 0;
    PrepCmd(e, kCmdCommitAndFetch, in.unique);
    impl->Freed(qid, 1);
    return;
  }
  const size_t op_bytes = in.len - sizeof in - payload;
  char* start = e->payload - op_bytes - sizeof in;
  std::memcpy(start, &in, sizeof in);
  std::memcpy(start + sizeof in, e->header->op_in, op_bytes);
  e->replied_here = false;
  {
    std::lock_guard lock(impl->inflight_mu);
    impl->inflight[in.unique] = e;
  }
  fuse_buf buf{};
  buf.size = in.len;
  buf.mem = start;
  fuse_session_process_buf(impl->se, &buf);
  if (e->replied_here) {
    impl->Freed(qid, 1);
  } else if (!impl->Grow(qid)) {
    // Its reply comes from another thread later (a parked lock), and the entry stays with the
    // kernel until then. Taken grew the queue when this was its last free entry; when the
    // queue could not grow, this thread (free now) takes a second entry, or every entry of
    // the queue could end up parked, waiting for an unlock that cannot reach the mount. A
    // second entry is the last resort: while the thread is busy with one request, the kernel
    // can put another in its other entry, and that one waits (the 3-minute storm's 2 s stalls).
    RingEntry* fresh = NewEntry();
    if (fresh != nullptr) {
      PrepCmd(fresh, kCmdRegister, 0);
      impl->Freed(qid, 1);
    }
  }
  if (!impl->logged_first.load(std::memory_order_relaxed) && !impl->logged_first.exchange(true)) {
    Log()->info("fuse transport=uring: first request answered on a ring (opcode={})", in.opcode);
  }
}

void RingThread::Run() {
  tls_ring_thread = this;
  for (auto& e : entries) PrepCmd(e.get(), kCmdRegister, 0);
  ArmWake();
  std::vector<std::pair<RingEntry*, int>> batch;
  while (!impl->stopping.load()) {
    int rc = io_uring_submit_and_wait(&ring, 1);
    if (rc < 0 && rc != -EINTR) {
      Log()->error("fuse ring: queue {}: io_uring_submit_and_wait: {}", qid, std::strerror(-rc));
      break;
    }
    batch.clear();
    unsigned head, seen = 0;
    io_uring_cqe* cqe;
    io_uring_for_each_cqe(&ring, head, cqe) {
      batch.emplace_back(static_cast<RingEntry*>(io_uring_cqe_get_data(cqe)), cqe->res);
      ++seen;
    }
    io_uring_cq_advance(&ring, seen);
    for (auto [e, res] : batch) {
      if (impl->stopping.load()) break;
      if (e == nullptr) {  // the eventfd: replies made on other threads, or Stop
        if (res < 0 && res != -EINTR && res != -EAGAIN) {
          Log()->error("fuse ring: queue {}: read of its eventfd failed: {}", qid,
                       std::strerror(-res));
          continue;  // not armed again: replies from other threads can no longer reach it
        }
        std::vector<RingEntry*> commits;
        {
          std::lock_guard lock(mu);
          commits.swap(foreign_commits);
        }
        for (RingEntry* c : commits) PrepCmd(c, kCmdCommitAndFetch, c->unique);
        if (!commits.empty()) impl->Freed(qid, static_cast<int>(commits.size()));
        ArmWake();
        continue;
      }
      if (res < 0) {
        --live;
        if (res != -ENOTCONN && res != -ECANCELED) {
          Log()->error("fuse ring: queue {}: a ring command failed: {}", qid, std::strerror(-res));
          if (res == -ENOENT || res == -EIO) {
            // A commit the kernel no longer matched (its request was aborted): the entry is
            // stuck in the kernel's hands; serve on with a new one.
            RingEntry* fresh = NewEntry();
            if (fresh != nullptr) PrepCmd(fresh, kCmdRegister, 0);
          } else {
            impl->SetTransport("dev");
          }
        }
        continue;
      }
      impl->Taken(qid);
      Handle(e);
    }
    if (live <= 0) break;  // the connection ended (unmount): the kernel gave every entry back
  }
  tls_ring_thread = nullptr;
}

FuseUring::FuseUring(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

FuseUring::~FuseUring() {
  Stop();
  FuseUring::Impl* expected = impl_.get();
  g_impl.compare_exchange_strong(expected, nullptr);
}

Result<std::unique_ptr<FuseUring>> FuseUring::Install(fuse_session* se, Options options) {
  if (options.threads_per_queue < 1 || options.threads_per_queue > 64) {
    return InvalidArgument("threads_per_queue must be 1..64");
  }
  if (options.max_threads_per_queue < options.threads_per_queue ||
      options.max_threads_per_queue > 1024) {
    return InvalidArgument("max_threads_per_queue must be threads_per_queue..1024");
  }
  // A probe: this process can make the rings' kind of io_uring.
  int rc = 0;
  if (options.rings) {
    io_uring probe;
    rc = io_uring_queue_init(2, &probe, IORING_SETUP_SQE128);
    if (rc < 0) {
      return Unavailable(std::string("cannot make an io_uring with 128-byte SQEs: ") +
                         std::strerror(-rc));
    }
    io_uring_queue_exit(&probe);
  }
  auto impl = std::make_unique<Impl>();
  impl->se = se;
  impl->dev_fd = fuse_session_fd(se);
  impl->options = options;
  impl->queues = PossibleCpus();
  FuseUring::Impl* none = nullptr;
  if (!g_impl.compare_exchange_strong(none, impl.get())) {
    return Internal("FUSE over io_uring is already installed in this process");
  }
  static const fuse_custom_io io = {WritevHook, ReadHook, nullptr, nullptr};
  rc = fuse_session_custom_io(se, &io, impl->dev_fd);
  if (rc != 0) {
    g_impl = nullptr;
    return Unavailable(std::string("fuse_session_custom_io: ") + std::strerror(-rc));
  }
  return std::unique_ptr<FuseUring>(new FuseUring(std::move(impl)));
}

void FuseUring::Stop() {
  if (impl_->stopping.exchange(true)) return;
  std::vector<RingThread*> threads;
  {
    std::lock_guard lock(impl_->state_mu);
    for (auto& t : impl_->threads) threads.push_back(t.get());
  }
  for (RingThread* t : threads) {
    const uint64_t one = 1;
    if (t->wake_fd >= 0 && ::write(t->wake_fd, &one, sizeof one) < 0) {
      Log()->warn("fuse ring: cannot wake queue {}'s thread to stop", t->qid);
    }
  }
  for (RingThread* t : threads) {
    if (t->thread.joinable()) t->thread.join();
    if (t->ring_made) io_uring_queue_exit(&t->ring);
    t->ring_made = false;
    if (t->wake_fd >= 0) close(t->wake_fd);
    t->wake_fd = -1;
  }
}

std::string FuseUring::transport() const {
  std::lock_guard lock(impl_->state_mu);
  return impl_->transport;
}

uint64_t FuseUring::ring_requests() const { return impl_->ring_requests.load(); }

std::string FuseUring::queue_threads() const {
  std::lock_guard lock(impl_->state_mu);
  std::string out;
  for (unsigned n : impl_->queue_threads) out += (out.empty() ? "" : ", ") + std::to_string(n);
  return out;
}

}  // namespace aquifer::fuse
