// The fused step's weight matrices (int8 with row scales, or Q4_1-shaped int4)
// and the product y = x · Wᵀ over them, the members of a pass's team (team.h)
// taking fixed shares of the output rows or claiming chunks of them (Chunks).
#pragma once
#include <immintrin.h>
#include "../torch_binding.h"

#include <atomic>
#include <cmath>
#include <vector>

#include "../q8gemm/q8gemm.h"
#include "simd.h"
#include "team.h"
#include "q4a8.h"
#include "q8a8.h"

namespace step {

struct QW {  // a weight matrix: int8 with row scales [w, s], or Q4_1-shaped [nibbles, d, m]
  std::vector<torch::Tensor> keep;
  bool q4 = false;
  const int8_t* wp = nullptr;
  const float* sp = nullptr;
  int64_t n = 0, k = 0;
  q4a8::W w4{};
};

QW make_qw(const std::vector<torch::Tensor>& parts) {
  QW q;
  q.keep = parts;
  if (parts.size() == 2) {
    const auto &w = parts[0], &s = parts[1];
    TORCH_CHECK(w.dim() == 2 && w.scalar_type() == torch::kChar && w.is_contiguous(),
                "int8 weights must be contiguous (out, in) int8");
    TORCH_CHECK(s.scalar_type() == torch::kFloat && s.is_contiguous() && s.numel() == w.size(0),
                "int8 scales must be (out,) float32");
    TORCH_CHECK(w.size(1) % 32 == 0, "in_features must be a multiple of 32");
    q.wp = w.data_ptr<int8_t>();
    q.sp = s.data_ptr<float>();
    q.n = w.size(0);
    q.k = w.size(1);
    return q;
  }
  TORCH_CHECK(parts.size() == 3, "a matrix is [w, scale] (int8) or [nibbles, d, m] (q4)");
  const auto &p = parts[0], &d = parts[1], &m = parts[2];
  TORCH_CHECK(d.scalar_type() == torch::kFloat && d.is_contiguous() && d.dim() == 2,
              "q4 scales must be contiguous (out, in/32) float32");
  q.n = d.size(0);
  q.k = 32 * d.size(1);
  const int64_t G = (q.n + 15) / 16, nb = d.size(1);
  TORCH_CHECK(p.scalar_type() == torch::kByte && p.is_contiguous() && p.dim() == 3 &&
                  p.size(0) == G && p.size(1) == nb && p.size(2) == 256,
              "q4 nibbles must be contiguous (ceil(out/16), in/32, 256) uint8");
  TORCH_CHECK(m.scalar_type() == torch::kHalf && m.is_contiguous() && m.dim() == 3 &&
                  m.size(0) == G && m.size(1) == nb && m.size(2) == 16,
              "q4 mins must be contiguous (ceil(out/16), in/32, 16) float16");
  q.q4 = true;
  TORCH_CHECK(q4a8::view(p.data_ptr<uint8_t>(), d.data_ptr<float>(),
                         (const uint16_t*)m.data_ptr<at::Half>(), q.n, q.k, q.w4),
              "q4 scales must be float16 values (as pack_q4 rounds them)");
  return q;
}

// Bytes of weights (and scales) a pass reads from q: 0.625 per weight for q4
// (nibbles, fp16 scale and min per 32), 1 per weight and 4 per row for int8.
inline int64_t weight_bytes(const QW& q) {
  return q.q4 ? q.w4.G * q.w4.nb * (256 + 64) : q.n * q.k + 4 * q.n;
}

using team::Ctx;

// Storage of quantized activation rows (q4a8::Act / q8a8::Act view it), sized
// before a pass for its widest matrix, so that no member allocates in it.
struct ActBuf {
  std::vector<int8_t> q;
  std::vector<float> s, t;
  std::vector<int32_t> off;
  void fit(int64_t M, int64_t K) {
    if ((int64_t)q.size() < M * K) q.resize(M * K);
    const int64_t per = M * K / 4 + 16;  // q8a8: 16 lanes per 64 values; q4a8: 1 per 32
    if ((int64_t)s.size() < per) {
      s.resize(per);
      t.resize(per);
      off.resize(per);
    }
  }
};

// This member's share of quantizing x (M, q.k) for matrix q into buf (then a
// barrier before any member multiplies).
inline void quantize_part(const Ctx& c, const QW& q, const float* x, int64_t M, ActBuf& buf) {
  int64_t i0, i1;
  if (q.q4) {
    c.split(M * (q.k / q4a8::kBlock), i0, i1);
    q4a8::quantize(x, q.k, buf.q.data(), buf.s.data(), buf.t.data(), i0, i1);
  } else if (q.k % q8a8::kChunk == 0) {
    c.split(M * (q.k / q8a8::kChunk), i0, i1);
    q8a8::quantize(x, q.k, buf.q.data(), buf.s.data(), buf.off.data(), i0, i1);
  }
}

// Each row's argmax, folded per member over its columns, then merged (Argmax::merge).
struct Argmax {
  int64_t M = 0;
  std::vector<float> mx;       // (nt, M)
  std::vector<int64_t> best;   // (nt, M)
  void fit(int nt, int64_t rows) {
    M = rows;
    mx.assign(nt * rows, -INFINITY);
    best.assign(nt * rows, 0);
  }
  // Members take column chunks in any order (Chunks), so of equal maxima the
  // lowest column wins, as one scan's first does.
  void merge(int nt, int64_t* out) const {
    for (int64_t m = 0; m < M; ++m) {
      float v = mx[m];
      int64_t b = best[m];
      for (int i = 1; i < nt; ++i)
        if (mx[i * M + m] > v || (mx[i * M + m] == v && best[i * M + m] < b)) {
          v = mx[i * M + m];
          b = best[i * M + m];
        }
      out[m] = b;
    }
  }
};

// A matrix's columns as chunks that members claim one at a time from a shared
// counter, instead of a fixed share each. Why: on a shared host the scheduler
// preempts a member in the middle of a matrix, and with fixed shares the other
// member then waits for the whole remainder at the next barrier; at load 5-9
// the barriers took 75-125 ms of a 1.5B pass on 2 threads, and the head (the
// longest stretch without a barrier, 10-25 ms) took as long on 2 threads as on
// 1 at 8 rows. With claimed chunks the running member takes over the preempted
// one's work. Each column's arithmetic is the same whoever computes it.
//
// A chunk is about 1/8 of a member's fixed share (at least 4 groups of 16
// columns, 64 KB of int4 weights at K = 1,536): ~16 claims per matrix on two
// threads, one contended atomic each (~0.1 µs), against 0.1-2 ms of work.
struct Chunks {
  std::atomic<int64_t> next{0};
  int64_t claim() { return next.fetch_add(1, std::memory_order_relaxed); }
};

// Columns per claimed chunk (every member computes the same): 1,024 with an
// argmax (its fold's unit), else ~1/8 of a member's share in units of `unit`.
inline int64_t chunk_cols(int64_t n, int nt, int64_t unit, bool argmax) {
  if (argmax) return 1024;
  const int64_t per = (n + 8 * nt - 1) / (8 * nt);
  return std::max<int64_t>(4 * unit, (per + unit - 1) / unit * unit);
}

// Each row's argmax over columns [c0, c1) of y (stride n), folded into (mx, best):
// the first of equal maxima, as numpy's and torch's argmax pick, whatever the
// order in which a member folds its chunks.
inline void argmax_update(const float* row, int64_t c0, int64_t c1, float& mx, int64_t& best) {
  simd::F16 v = simd::set1(-INFINITY);
  for (int64_t j = c0; j < c1; j += 16) v = simd::max(v, simd::load_tail_or(v, row + j, c1 - j));
  const float cmax = simd::reduce_max(v);
  if (!(cmax >= mx) || (cmax == mx && c0 > best)) return;  // ties keep the lower column
  for (int64_t j = c0; j < c1; ++j)
    if (row[j] == cmax) {
      if (cmax > mx || j < best) {
        mx = cmax;
        best = j;
      }
      return;
    }
}

// This member's share of y (M, q.n) = x (M, k) · Wᵀ: a contiguous range of
// output rows (16-row groups for q4), the same size for every member (a
// matrix's rows all cost the same bytes), or the chunks it claims (chunks).
// int8 activations (quantize_part first), or fp32 x (q8gemm.h) for an int8
// matrix whose K is not a multiple of 64. am (optional): fold each row's
// argmax over the member's columns, a chunk at a time while it is still in
// L1/L2 (a scan of the finished head logits read them back from DRAM: 50-130
// µs for 1-6 rows, against 4-31 µs warm).
// chunks (optional): claim chunks of columns from it (Chunks) instead of taking
// a fixed share; every member of the pass must pass the same one, fresh.
inline void gemm_part(const Ctx& c, const QW& q, const ActBuf& buf, const float* x, float* y,
                      int64_t M, Argmax* am = nullptr, Chunks* chunks = nullptr) {
  int64_t c0, c1;  // the member's output columns
  int64_t unit = 16;
  if (q.q4) {
    q4a8::Act a;
    a.M = M;
    a.K = q.k;
    a.nb = q.k / q4a8::kBlock;
    a.q = buf.q.data();
    a.s = buf.s.data();
    a.t = buf.t.data();
    int64_t g0, g1;
    c.split(q.w4.G, g0, g1);
    if (am == nullptr && chunks == nullptr) {
      q4a8::gemm_groups(a, q.w4, y, g0, g1);
      return;
    }
    // 1024 columns (≤ 64 KB of y at 16 rows) between argmax folds.
    const int64_t kGroups = chunk_cols(q.w4.G * 16, c.nt, 16, am != nullptr) / 16;
    auto chunk = [&](int64_t g, int64_t ge) {
      q4a8::gemm_groups(a, q.w4, y, g, ge);
      if (am != nullptr)
        for (int64_t m = 0; m < M; ++m)
          argmax_update(y + m * q.n, g * 16, std::min(q.n, ge * 16), am->mx[c.tid * M + m],
                        am->best[c.tid * M + m]);
    };
    if (chunks != nullptr) {
      for (int64_t g = chunks->claim() * kGroups; g < q.w4.G; g = chunks->claim() * kGroups)
        chunk(g, std::min(q.w4.G, g + kGroups));
      return;
    }
    for (int64_t g = g0; g < g1; g += kGroups) chunk(g, std::min(g1, g + kGroups));
    return;
  }
  {
    int64_t u0, u1;
    c.split((q.n + unit - 1) / unit, u0, u1);
    c0 = std::min(q.n, u0 * unit);
    c1 = std::min(q.n, u1 * unit);
  }
  auto range = [&](int64_t n0, int64_t n1) {
    if (q.k % q8a8::kChunk == 0) {
      q8a8::Act a;
      a.M = M;
      a.K = q.k;
      a.q = buf.q.data();
      a.s = buf.s.data();
      a.off = buf.off.data();
      q8a8::gemm_range(a, q.wp, q.sp, y, q.n, n0, n1);
      return;
    }
    q8::gemm_range(x, q.wp, q.sp, y, M, q.k, q.n, n0, n1);
  };
  if (am == nullptr && chunks == nullptr) {
    range(c0, c1);
    return;
  }
  auto chunk = [&](int64_t j, int64_t je) {
    range(j, je);
    if (am != nullptr)
      for (int64_t m = 0; m < M; ++m)
        argmax_update(y + m * q.n, j, je, am->mx[c.tid * M + m], am->best[c.tid * M + m]);
  };
  if (chunks != nullptr) {
    const int64_t per = chunk_cols(q.n, c.nt, unit, am != nullptr);
    for (int64_t j = chunks->claim() * per; j < q.n; j = chunks->claim() * per)
      chunk(j, std::min(q.n, j + per));
    return;
  }
  for (int64_t j = c0; j < c1; j += 1024) chunk(j, std::min(c1, j + 1024));
}

// y (M, n) = x (M, k) · Wᵀ on a team of `threads` (quantize, barrier, multiply);
// best (optional, M entries): each row's argmax over its n outputs.
// With best, the columns go in claimed chunks, as the head's do in a pass.
inline void matmul(const QW& q, const float* x, float* y, int64_t M, int threads,
                   int64_t* best = nullptr) {
  ActBuf buf;
  buf.fit(M, q.k);
  Argmax am;
  Chunks chunks;
  team::Pool::get().run(threads, [&](Ctx& c) {
    if (c.tid == 0) am.fit(c.nt, M);
    quantize_part(c, q, x, M, buf);
    c.barrier();
    gemm_part(c, q, buf, x, y, M, best ? &am : nullptr, best ? &chunks : nullptr);
    c.barrier();
    if (c.tid == 0 && best) am.merge(c.nt, best);
  });
}

// 1 / rms of the row x (+ add, elementwise, when given): the factor rms_norm
// scales by. The same arithmetic whichever member asks, so every member may
// compute it for a row it shares.
inline float rms_factor(const float* x, const float* add, int64_t dim, float eps) {
  simd::F16 acc = simd::zero();
  for (int64_t i = 0; i < dim; i += 16) {
    simd::F16 v = simd::load_tail(x + i, dim - i);
    if (add) v = simd::add(v, simd::load_tail(add + i, dim - i));
    acc = simd::fmadd(v, v, acc);
  }
  return 1.0f / std::sqrt(simd::reduce_add(acc) / (float)dim + eps);
}

void rms_norm(const float* x, const float* w, float* y, int64_t dim, float eps) {
  const float r = rms_factor(x, nullptr, dim, eps);
  for (int64_t i = 0; i < dim; ++i) y[i] = x[i] * r * w[i];
}

// The unit of work on a matrix's input rows: 64 values (a q8a8 chunk, two q4
// blocks) where K allows, else 32.
inline int64_t unit_of(const QW& q) { return q.k % 64 == 0 ? 64 : 32; }

// Quantize units [u0, u1) (unit_of(q) values each) of row m of x (M, q.k) into
// buf, as quantize_part does for the whole of x.
inline void quant_units(const QW& q, const float* x, int64_t m, int64_t u0, int64_t u1,
                        ActBuf& buf) {
  if (q.q4) {
    const int64_t per = unit_of(q) / q4a8::kBlock, nb = q.k / q4a8::kBlock;
    q4a8::quantize(x, q.k, buf.q.data(), buf.s.data(), buf.t.data(), m * nb + u0 * per,
                   m * nb + u1 * per);
  } else if (q.k % q8a8::kChunk == 0) {
    const int64_t nc = q.k / q8a8::kChunk;
    q8a8::quantize(x, q.k, buf.q.data(), buf.s.data(), buf.off.data(), m * nc + u0, m * nc + u1);
  }
}

}  // namespace step
