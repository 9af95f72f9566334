// Row-wise helpers of the fused step's attention and MLP (AVX-512, fp32).
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "simd.h"

namespace step {

using simd::exp16;
using simd::tail;

// Prefetch rows [j, min(j + 16, n)) of a (·, D) fp32 cache into L1.
inline void prefetch_rows(const float* base, int64_t j, int64_t n, int64_t D) {
  const char* a = (const char*)(base + j * D);
  const char* b = (const char*)(base + std::min<int64_t>(j + 16, n) * D);
  for (; a < b; a += 64) _mm_prefetch(a, _MM_HINT_T0);
}

// o_q += Σ_{j0 ≤ j < j1} p_q[j]·V[j] for NQ queries (weights p + q·stride,
// outputs o + q·D), 4 accumulators per 64 dims per query, j in order.
template <int NQ>
inline void pv_block(const float* p, int64_t stride, float* o, int64_t D, const float* V,
                     int64_t j0, int64_t j1) {
  for (int64_t d = 0; d < D; d += 64) {
    __m512 a[NQ][4];
    for (int q = 0; q < NQ; ++q)
      for (int c = 0; c < 4; ++c) a[q][c] = _mm512_loadu_ps(o + q * D + d + 16 * c);
    for (int64_t j = j0; j < j1; ++j) {
      const float* vr = V + j * D + d;
      const __m512 v0 = _mm512_loadu_ps(vr), v1 = _mm512_loadu_ps(vr + 16),
                   v2 = _mm512_loadu_ps(vr + 32), v3 = _mm512_loadu_ps(vr + 48);
      for (int q = 0; q < NQ; ++q) {
        const __m512 pj = _mm512_set1_ps(p[q * stride + j]);
        a[q][0] = _mm512_fmadd_ps(pj, v0, a[q][0]);
        a[q][1] = _mm512_fmadd_ps(pj, v1, a[q][1]);
        a[q][2] = _mm512_fmadd_ps(pj, v2, a[q][2]);
        a[q][3] = _mm512_fmadd_ps(pj, v3, a[q][3]);
      }
    }
    for (int q = 0; q < NQ; ++q)
      for (int c = 0; c < 4; ++c) _mm512_storeu_ps(o + q * D + d + 16 * c, a[q][c]);
  }
}

// Scores s[0, n) → unnormalized softmax weights exp(s - max), in place;
// returns 1 / Σ weights.
inline float softmax_weights(float* s, int64_t n) {
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int64_t j = 0; j < n; j += 16)
    mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(mx, tail(n - j), s + j));
  const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = tail(n - j);
    __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + j), m));
    e = _mm512_maskz_mov_ps(k, e);
    _mm512_mask_storeu_ps(s + j, k, e);
    sum = _mm512_add_ps(sum, e);
  }
  return 1.0f / _mm512_reduce_add_ps(sum);
}

// act = silu(gate) * up for one row of gu = [gate ‖ up], columns [i0, i1)
// (i0 a multiple of 16).
inline void silu_mul(const float* gu, float* act, int64_t ffn, int64_t i0 = 0, int64_t i1 = -1) {
  const __m512 one = _mm512_set1_ps(1.0f);
  if (i1 < 0) i1 = ffn;
  for (int64_t i = i0; i < i1; i += 16) {
    const __mmask16 k = tail(i1 - i);
    const __m512 g = _mm512_maskz_loadu_ps(k, gu + i);
    const __m512 u = _mm512_maskz_loadu_ps(k, gu + ffn + i);
    const __m512 sg = _mm512_div_ps(g, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), g))));
    _mm512_mask_storeu_ps(act + i, k, _mm512_mul_ps(sg, u));
  }
}

}  // namespace step
