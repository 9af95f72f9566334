// A persistent team of threads for one fused pass: the caller is member 0,
// process-wide workers are members 1..n-1, and the members meet at spin
// barriers between dependent ops.
//
// Why: the pass used to open one at::parallel_for region per matrix (and per
// attention), well over a hundred fork/joins per token of a 28-layer model,
// each a wake-up of torch's OpenMP team (a futex under OMP_WAIT_POLICY=PASSIVE)
// and a join on the slowest thread. A second core then added 7 % to a 1.5B
// decode. Here the team is woken once per pass; the members share every
// matrix's rows (claimed in chunks, matrix.h), so both cores stream weights
// all the time, and an op that needs every row of the previous one waits at a barrier
// (two atomics on one cache line, ~0.1-0.3 µs when both cores are ours).
//
// A barrier spins with pause, then yields: on a shared machine the partner
// may be descheduled, and spinning out its time slice would only delay it.
// Idle workers spin briefly after a pass (the next decode step comes within
// a few hundred µs), then sleep on a futex. One caller at a time owns the
// team; a concurrent caller runs its pass alone (the cores are taken anyway).
#pragma once
#include <immintrin.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace team {

inline void futex_wait(std::atomic<uint32_t>* a, uint32_t v) {
  syscall(SYS_futex, (uint32_t*)a, FUTEX_WAIT_PRIVATE, v, nullptr, nullptr, 0);
}
inline void futex_wake(std::atomic<uint32_t>* a) {
  syscall(SYS_futex, (uint32_t*)a, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

// Spin-then-yield wait until pred() holds.
template <class P>
inline void spin_until(const P& pred) {
  for (int i = 0; !pred(); ++i) {
    if (i < 4096) {
      _mm_pause();
    } else {
      sched_yield();
      i = 2048;
    }
  }
}

class Pool;

// One member's view of the running pass.
struct Ctx {
  int tid = 0, nt = 1;
  Pool* pool = nullptr;
  void barrier();
  // This member's share [b, e) of n items split evenly in order.
  void split(int64_t n, int64_t& b, int64_t& e) const {
    b = n * tid / nt;
    e = n * (tid + 1) / nt;
  }
};

class Pool {
 public:
  static Pool& get() {
    static Pool* p = new Pool();  // never destroyed: workers may still sleep at exit
    return *p;
  }

  // f(ctx) on nt members (the caller is member 0); f must reach the same
  // barriers on every member. Runs alone (nt = 1) if another caller holds the team.
  template <class F>
  void run(int nt, const F& f) {
    const int cap = std::max(1, (int)std::thread::hardware_concurrency());
    nt = std::max(1, std::min(nt, std::min(cap, kMaxThreads)));
    std::unique_lock<std::mutex> own(mu_, std::defer_lock);
    if (nt > 1 && !own.try_lock()) nt = 1;
    if (nt == 1) {
      Ctx c;
      f(c);
      return;
    }
    while ((int)workers_.size() < nt - 1) {
      // The epoch before this job's: a worker that starts after the job is
      // published must still see it as new.
      const int tid = (int)workers_.size() + 1;
      const uint32_t e0 = epoch_.load(std::memory_order_relaxed);
      workers_.emplace_back([this, tid, e0] { loop(tid, e0); });
      workers_.back().detach();
    }
    job_ = [](void* fp, Ctx& c) { (*(const F*)fp)(c); };
    arg_ = (void*)&f;
    nt_ = nt;
    count_.store(0, std::memory_order_relaxed);
    epoch_.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) futex_wake(&epoch_);
    Ctx c;
    c.tid = 0;
    c.nt = nt;
    c.pool = this;
    f(c);
    c.barrier();  // every member is done with f (workers then only read epoch_)
  }

  void barrier(int nt) {
    const uint32_t g = gen_.load(std::memory_order_acquire);
    if (count_.fetch_add(1, std::memory_order_acq_rel) == nt - 1) {
      count_.store(0, std::memory_order_relaxed);
      gen_.store(g + 1, std::memory_order_release);
      return;
    }
    spin_until([&] { return gen_.load(std::memory_order_acquire) != g; });
  }

 private:
  static constexpr int kMaxThreads = 64;
  static constexpr uint64_t kIdleSpinCycles = 400000;  // ~0.1-0.2 ms before sleeping

  void loop(int tid, uint32_t seen) {
    for (;;) {
      const uint64_t t0 = __rdtsc();
      while (epoch_.load(std::memory_order_acquire) == seen && __rdtsc() - t0 < kIdleSpinCycles)
        _mm_pause();
      if (epoch_.load(std::memory_order_acquire) == seen) {
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        while (epoch_.load(std::memory_order_seq_cst) == seen) futex_wait(&epoch_, seen);
        sleepers_.fetch_sub(1, std::memory_order_seq_cst);
      }
      seen = epoch_.load(std::memory_order_acquire);
      const int nt = nt_;
      if (tid >= nt) continue;  // not in this pass
      Ctx c;
      c.tid = tid;
      c.nt = nt;
      c.pool = this;
      job_(arg_, c);
      c.barrier();
    }
  }

  std::mutex mu_;
  std::vector<std::thread> workers_;
  void (*job_)(void*, Ctx&) = nullptr;
  void* arg_ = nullptr;
  int nt_ = 1;
  alignas(64) std::atomic<uint32_t> epoch_{0};
  std::atomic<int> sleepers_{0};
  alignas(64) std::atomic<int> count_{0};
  std::atomic<uint32_t> gen_{0};
};

inline void Ctx::barrier() {
  if (nt > 1) pool->barrier(nt);
}

}  // namespace team
