// The fused step's weight matrices (int8 with row scales, or Q4_1-shaped int4)
// and the product y = x · Wᵀ over them, split over threads by output rows.
#pragma once
#include <ATen/Parallel.h>
#include <immintrin.h>
#include <torch/extension.h>

#include <cmath>
#include <vector>

#include "../q8gemm/q8gemm.h"
#include "simd.h"
#ifdef __AVX512VNNI__
#include "q4a8.h"
#include "q8a8.h"
constexpr bool kVnni = true;
#else
constexpr bool kVnni = false;
#endif

namespace step {

using simd::tail;

struct QW {  // a weight matrix: int8 with row scales [w, s], or Q4_1-shaped [nibbles, d, m]
  std::vector<torch::Tensor> keep;
  bool q4 = false;
  const int8_t* wp = nullptr;
  const float* sp = nullptr;
  int64_t n = 0, k = 0;
#ifdef __AVX512VNNI__
  q4a8::W w4{};
#endif
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
#ifdef __AVX512VNNI__
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
  q.w4 = q4a8::view(p.data_ptr<uint8_t>(), d.data_ptr<float>(),
                    (const uint16_t*)m.data_ptr<at::Half>(), q.n, q.k);
  return q;
#else
  TORCH_CHECK(false, "q4 matrices need AVX512-VNNI");
#endif
}

// f(0, n) on this thread, or split over torch's intra-op threads when threads > 1.
template <class F>
void par(int threads, int64_t n, int64_t grain, const F& f) {
  if (threads <= 1 || n <= grain) {
    f(0, n);
    return;
  }
  at::parallel_for(0, n, grain, f);
}

// Each row's argmax over columns [c0, c1) of y (stride n), folded into (mx, best):
// the first of equal maxima, as numpy's and torch's argmax pick.
inline void argmax_update(const float* row, int64_t c0, int64_t c1, float& mx, int64_t& best) {
  __m512 v = _mm512_set1_ps(-INFINITY);
  for (int64_t j = c0; j < c1; j += 16)
    v = _mm512_max_ps(v, _mm512_mask_loadu_ps(v, tail(c1 - j), row + j));
  const float cmax = _mm512_reduce_max_ps(v);
  if (!(cmax > mx)) return;  // ties keep the earlier column
  for (int64_t j = c0; j < c1; ++j)
    if (row[j] == cmax) {
      mx = cmax;
      best = j;
      return;
    }
}

// f(c0, c1) computes y's columns [c0, c1). With best (M,), run it a chunk of
// columns at a time and fold each chunk into every row's argmax while it is
// still in L1/L2: the head's product streams ~15 MB of weights, after which a
// scan of the finished logits (numpy's argmax) read them back from DRAM
// (50-130 µs for 1-6 rows, against 4-31 µs warm).
template <class F>
void over_columns(int64_t n, int64_t M, float* y, int64_t* best, const F& f) {
  if (best == nullptr) {
    f(0, n);
    return;
  }
  constexpr int64_t kCols = 1024;  // a multiple of 16 (q4 groups); ≤ 64 KB of y at 16 rows
  std::vector<float> mx(M, -INFINITY);
  for (int64_t m = 0; m < M; ++m) best[m] = 0;
  for (int64_t c0 = 0; c0 < n; c0 += kCols) {
    const int64_t c1 = std::min(n, c0 + kCols);
    f(c0, c1);
    for (int64_t m = 0; m < M; ++m) argmax_update(y + m * n, c0, c1, mx[m], best[m]);
  }
}

// y (M, n) = x (M, k) · Wᵀ, parallel over output rows: int8 activations on
// VNNI (q8a8.h, q4a8.h) where the CPU has it, else fp32 activations (q8gemm.h).
// best (optional, M entries): each row's argmax over its n outputs.
void matmul(const QW& q, const float* x, float* y, int64_t M, int threads,
            int64_t* best = nullptr) {
#ifdef __AVX512VNNI__
  if (q.q4) {
    thread_local q4a8::Act act;  // reused: no allocation per matrix
    q4a8::quantize(x, M, q.k, act);
    const q4a8::Act& a = act;
    over_columns(q.n, M, y, best, [&](int64_t c0, int64_t c1) {
      const int64_t g0 = c0 / 16, g1 = (c1 + 15) / 16;  // c0 is a multiple of 16
      par(threads, g1 - g0, 1, [&](int64_t i0, int64_t i1) {
        q4a8::gemm_groups(a, q.w4, y, g0 + i0, g0 + i1);
      });
    });
    return;
  }
  if (q.k % q8a8::kChunk == 0) {
    thread_local q8a8::Act act;
    q8a8::quantize(x, M, q.k, act);
    const q8a8::Act& a = act;
    over_columns(q.n, M, y, best, [&](int64_t c0, int64_t c1) {
      par(threads, c1 - c0, 16, [&](int64_t i0, int64_t i1) {
        q8a8::gemm_range(a, q.wp, q.sp, y, q.n, c0 + i0, c0 + i1);
      });
    });
    return;
  }
#endif
  over_columns(q.n, M, y, best, [&](int64_t c0, int64_t c1) {
    par(threads, c1 - c0, 16, [&](int64_t i0, int64_t i1) {
      q8::gemm_range(x, q.wp, q.sp, y, M, q.k, q.n, c0 + i0, c0 + i1);
    });
  });
}

void rms_norm(const float* x, const float* w, float* y, int64_t dim, float eps) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < dim; i += 16) {
    __m512 v = _mm512_maskz_loadu_ps(tail(dim - i), x + i);
    acc = _mm512_fmadd_ps(v, v, acc);
  }
  const float r = 1.0f / std::sqrt(_mm512_reduce_add_ps(acc) / (float)dim + eps);
  for (int64_t i = 0; i < dim; ++i) y[i] = x[i] * r * w[i];
}

}  // namespace step
