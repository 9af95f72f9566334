// Where a fused pass's time goes: a per-member table of wall time by phase
// (each matrix, the row-wise ops, attention, the barriers), summed over
// passes while profiling is on (Model.profile / Model.profile_table).
//
// Why in the kernel: a pass is one call of ~260 barriers and ~140 matrix
// products; from Python only its total is visible, and a copy of the loop in a
// harness would not see the team, the cache or the real shapes. Off (the
// default), a lap is one predictable branch; on, it is one steady_clock read
// (~25 ns, vDSO), ~24 a layer: under 0.1 ms on a 1.5B pass.
//
// Each member times its own work: the time since its previous lap is charged
// to the phase it names, and a barrier's wait (the partner's imbalance, or its
// being descheduled on a shared machine) to kBarrier. Member 0's phases add up
// to the pass's wall time (what its laps miss, waking the team and its final
// join, is kOther).
#pragma once
#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>

namespace prof {

enum Phase : int {
  kNorm,       // rms norms (+ the residual add)
  kQuant,      // quantizing a matrix's input rows to int8 (after norms, attention, silu)
  kQkv,        // the fused q, k, v projection
  kRope,       // bias, rotation, keys and values into the cache
  kAttention,  // scores, softmax, Σ p·v over the cache
  kO,          // the output projection
  kW13,        // the fused gate and up projection
  kSilu,       // silu(gate) · up
  kW2,         // the down projection
  kHead,       // the LM head (+ each row's argmax folded in)
  kBarrier,    // waiting at barriers
  kOther,      // the argmax merge; for member 0 also waking the team and its final join
  kPhases
};

inline constexpr const char* kNames[kPhases] = {"norm", "quant", "qkv",  "rope",    "attention", "o",
                                                "w13",  "silu",  "w2",   "head",    "barrier",   "other"};

constexpr int kMembers = 8;  // members tracked; later ones (more threads) are not timed

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct alignas(64) Row {  // one member's sums, on lines of its own
  std::array<int64_t, kPhases> ns{};
  int64_t total() const {
    int64_t t = 0;
    for (int64_t v : ns) t += v;
    return t;
  }
};

struct Table {
  bool on = false;
  int64_t passes = 0, rows = 0, members = 0, wall_ns = 0;
  Row row[kMembers];
  void reset() {
    passes = rows = members = wall_ns = 0;
    for (Row& r : row) r.ns.fill(0);
  }
};

// One member's stopwatch in one pass.
class Lap {
 public:
  Lap(Table& t, int tid) : ns_(t.on && tid < kMembers ? t.row[tid].ns.data() : nullptr) {
    if (ns_) last_ = now_ns();
  }
  // Charge the time since the previous lap to phase p.
  void operator()(Phase p) {
    if (!ns_) return;
    const int64_t n = now_ns();
    ns_[p] += n - last_;
    last_ = n;
  }

 private:
  int64_t* ns_;
  int64_t last_ = 0;
};

}  // namespace prof
