// Row-wise helpers of the fused step's attention and MLP (fp32, simd.h's F16).
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "simd.h"

namespace step {

using simd::exp16;
using simd::F16;

// Prefetch rows [j, min(j + 16, n)) of a (·, D) fp32 cache into L1.
inline void prefetch_rows(const float* base, int64_t j, int64_t n, int64_t D) {
  const char* a = (const char*)(base + j * D);
  const char* b = (const char*)(base + std::min<int64_t>(j + 16, n) * D);
  for (; a < b; a += 64) _mm_prefetch(a, _MM_HINT_T0);
}

// Dims per step of pv_block: 4 accumulators of 16 per query on AVX-512; 2 on
// AVX2, whose 16 registers would otherwise spill them (each accumulator is two
// there). Each output element still sums p_j·v_j over j in order.
constexpr int kPvAcc = simd::kAvx512 ? 4 : 2;

// o_q += Σ_{j0 ≤ j < j1} p_q[j]·V[j] for NQ queries (weights p + q·stride,
// outputs o + q·D), kPvAcc accumulators per 16·kPvAcc dims per query, j in order.
template <int NQ>
inline void pv_block(const float* p, int64_t stride, float* o, int64_t D, const float* V,
                     int64_t j0, int64_t j1) {
  constexpr int C = kPvAcc;
  for (int64_t d = 0; d < D; d += 16 * C) {
    F16 a[NQ][C];
    for (int q = 0; q < NQ; ++q)
      for (int c = 0; c < C; ++c) a[q][c] = simd::load(o + q * D + d + 16 * c);
    for (int64_t j = j0; j < j1; ++j) {
      const float* vr = V + j * D + d;
      F16 v[C];
      for (int c = 0; c < C; ++c) v[c] = simd::load(vr + 16 * c);
      for (int q = 0; q < NQ; ++q) {
        const F16 pj = simd::set1(p[q * stride + j]);
        for (int c = 0; c < C; ++c) a[q][c] = simd::fmadd(pj, v[c], a[q][c]);
      }
    }
    for (int q = 0; q < NQ; ++q)
      for (int c = 0; c < C; ++c) simd::store(o + q * D + d + 16 * c, a[q][c]);
  }
}

// Scores s[0, n) → unnormalized softmax weights exp(s - max), in place;
// returns 1 / Σ weights.
inline float softmax_weights(float* s, int64_t n) {
  F16 mx = simd::set1(-INFINITY);
  for (int64_t j = 0; j < n; j += 16) mx = simd::max(mx, simd::load_tail_or(mx, s + j, n - j));
  const F16 m = simd::set1(simd::reduce_max(mx));
  F16 sum = simd::zero();
  for (int64_t j = 0; j < n; j += 16) {
    const F16 e = simd::keep_tail(exp16(simd::sub(simd::load_tail(s + j, n - j), m)), n - j);
    simd::store_tail(s + j, e, n - j);
    sum = simd::add(sum, e);
  }
  return 1.0f / simd::reduce_add(sum);
}

// act = silu(gate) * up for one row of gu = [gate ‖ up], columns [i0, i1)
// (i0 a multiple of 16).
inline void silu_mul(const float* gu, float* act, int64_t ffn, int64_t i0 = 0, int64_t i1 = -1) {
  const F16 one = simd::set1(1.0f);
  if (i1 < 0) i1 = ffn;
  for (int64_t i = i0; i < i1; i += 16) {
    const F16 g = simd::load_tail(gu + i, i1 - i);
    const F16 u = simd::load_tail(gu + ffn + i, i1 - i);
    const F16 sg = simd::div(g, simd::add(one, exp16(simd::sub(simd::zero(), g))));
    simd::store_tail(act + i, simd::mul(sg, u), i1 - i);
  }
}

}  // namespace step
