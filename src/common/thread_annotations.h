// Thread-safety annotations: which lock guards which state, checked at compile time by clang's
// -Wthread-safety (scripts/sanitize.sh thread-safety). Under gcc every macro is empty and Mutex
// is a plain std::mutex, so the annotations cost nothing and only document.
//
//   Mutex mu_;
//   std::map<uint32_t, Server> servers_ GUARDED_BY(mu_);  // read or written only with mu_ held
//   void Settle() REQUIRES(mu_);                          // callers hold mu_
//   void Refresh() EXCLUDES(mu_);                         // takes mu_ itself
//   { MutexLock lock(mu_); servers_.clear(); }            // scoped: the analysis sees it
//
// Only state whose lock is not obvious from the code next to it is annotated (issue 22 item 5);
// a member annotated here is accessed only under its lock, and clang proves it. std::mutex is
// not a capability clang knows (libstdc++ carries no annotations), hence the small Mutex and
// MutexLock below; std::condition_variable works with them through MutexLock::native().
// Modelled on the annotations clang documents ("Thread Safety Analysis") and LevelDB's port.
#pragma once

#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define AQ_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define AQ_THREAD_ANNOTATION(x)
#endif

// On a class: objects of it are locks ("capabilities") the analysis tracks.
#define CAPABILITY(name) AQ_THREAD_ANNOTATION(capability(name))
// On an RAII class whose constructor acquires and destructor releases.
#define SCOPED_CAPABILITY AQ_THREAD_ANNOTATION(scoped_lockable)
// On a data member: read and written only with the given lock held.
#define GUARDED_BY(x) AQ_THREAD_ANNOTATION(guarded_by(x))
// On a pointer member: the pointee is accessed only with the given lock held.
#define PT_GUARDED_BY(x) AQ_THREAD_ANNOTATION(pt_guarded_by(x))
// On a lock member: taken after (before) the given locks, when both are held.
#define ACQUIRED_AFTER(...) AQ_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define ACQUIRED_BEFORE(...) AQ_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
// On a function: the caller holds the lock(s) exclusively (shared) and still does on return.
#define REQUIRES(...) AQ_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) AQ_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
// On a function: it acquires (releases) the lock(s); without arguments, `this`.
#define ACQUIRE(...) AQ_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) AQ_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) AQ_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// On a function: the caller must not hold the lock(s) (the function takes them).
#define EXCLUDES(...) AQ_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// On a function: asserts at run time that the lock is held; the analysis then assumes it.
#define ASSERT_CAPABILITY(x) AQ_THREAD_ANNOTATION(assert_capability(x))
// On a function: it returns a reference to the given lock.
#define RETURN_CAPABILITY(x) AQ_THREAD_ANNOTATION(lock_returned(x))
// On a function: not checked. Each use says why in a comment.
#define NO_THREAD_SAFETY_ANALYSIS AQ_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace aquifer {

// A std::mutex the analysis can follow. Same cost and semantics; not recursive.
class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  // Tells the analysis the caller holds this mutex (for callbacks it cannot follow). No check.
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  friend class MutexLock;
  std::mutex mu_;
};

// Holds a Mutex for its scope. native() gives the std::unique_lock for std::condition_variable
// waits (the wait releases and retakes the mutex; on return it is held again, as the analysis
// assumes).
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : lock_(mu.mu_) {}
  ~MutexLock() RELEASE() {}
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  std::unique_lock<std::mutex>& native() { return lock_; }
  // Lets go of the mutex before the scope ends (around a call that must not hold it) and takes
  // it again; the destructor releases only what is held.
  void Unlock() RELEASE() { lock_.unlock(); }
  void Lock() ACQUIRE() { lock_.lock(); }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace aquifer
