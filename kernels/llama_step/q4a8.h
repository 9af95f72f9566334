// 4-bit weights × int8 activations on AVX512-VNNI, for the fused llama step.
//
// Weights are GGUF Q4_1-shaped: per 32 consecutive inputs (a block) a scale d
// and min m, w = d·q + m, q in 0..15. The default model ships as Q4_1, so
// re-packing its dequantized tensors is exact. 0.69 bytes per weight.
//
// Layout (voicepipe.nn.qlinear.pack_q4 writes it): output rows in groups of
// 16, and per group and block the 512 weights as 8 rows of 64 bytes, row kq
// holding inputs 4kq..4kq+3 of each of the 16 outputs side by side. Stored as
// nibbles: byte i holds weight byte i (low) and weight byte 256 + i (high).
//
// Why this order: one vpdpbusd of row kq against an activation row's 4
// inputs 4kq..4kq+3 (broadcast) gives the 16 outputs' partial dots in the 16
// lanes, so a block's 8 vpdpbusd leave its exact int32 dots in output order.
// The scales then apply as one FMA per block and activation row, with no
// horizontal sums; the unpacking (2 ops per 64 weights) is shared by all the
// rows of a pass. Rows 2–3 of a pass hide under the weight stream from L3;
// beyond that each row costs ~2.3 ns per 16×32 weights (8 vpdpbusd and 3
// float ops), measured here in a one-off C++ harness of this header.
// (An AMX variant was tried: applying Q4_1's per-block scales needs a tile
// store and vector reloads per block, and it lost to this at 4–9 rows.)
//
// Per activation row and output, in block order b = 0, 1, …:
//   y = Σ_b float(dot_b) · (d_b · s_b), then + Σ_b t_b · m_b
// with s_b the row's block scale and t_b = s_b · Σ q over the block. The
// order depends on nothing but the row, so rows are batch-invariant.
// kernels/llama_step/reference.py computes the same in float64.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "simd.h"

namespace q4a8 {

constexpr int64_t kBlock = 32;
constexpr int kMaxRows = 8;  // activation rows per pass over a weight group
constexpr int64_t kAhead = 16;  // software prefetch distance, in 32-input blocks (4 KB of nibbles)

struct W {  // one packed matrix
  const uint8_t* nib = nullptr;  // (G, nb, 256) nibbles
  std::vector<float> d;          // (G, nb, 16) scales, 16 outputs side by side
  const uint16_t* mt = nullptr;  // (G, nb, 16) fp16 mins, likewise
  int64_t N = 0, K = 0, G = 0, nb = 0;
};

// W over packed tensors: d (N, nb) is regrouped, nib and mt are used in place.
inline W view(const uint8_t* nib, const float* d, const uint16_t* mt, int64_t N, int64_t K) {
  W w;
  w.nib = nib;
  w.mt = mt;
  w.N = N;
  w.K = K;
  w.G = (N + 15) / 16;
  w.nb = K / kBlock;
  w.d.assign(w.G * w.nb * 16, 0.0f);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t b = 0; b < w.nb; ++b) w.d[((n / 16) * w.nb + b) * 16 + n % 16] = d[n * w.nb + b];
  return w;
}

struct Act {
  int64_t M = 0, K = 0, nb = 0;
  std::vector<int8_t> q;  // (M, K)
  std::vector<float> s;   // (M, nb) block scales
  std::vector<float> t;   // (M, nb) s_b · Σ q over block b
};

inline void quantize(const float* x, int64_t M, int64_t K, Act& a) {
  a.M = M;
  a.K = K;
  a.nb = K / kBlock;
  a.q.resize(M * K);
  a.s.resize(M * a.nb);
  a.t.resize(M * a.nb);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t b = 0; b < a.nb; ++b) {
      int32_t qsum;
      const int64_t i = m * a.nb + b;
      a.s[i] = simd::quantize32(x + m * K + b * kBlock, a.q.data() + m * K + b * kBlock, &qsum);
      a.t[i] = a.s[i] * (float)qsum;
    }
}

// Outputs of group g for MB activation rows from m0.
template <int MB>
inline void group(const Act& a, int64_t m0, const W& w, float* y, int64_t g) {
  const int64_t nb = w.nb, K = w.K;
  const __m512i low = _mm512_set1_epi8(0x0F);
  __m512 acc[MB];
  for (int i = 0; i < MB; ++i) acc[i] = _mm512_setzero_ps();
  const int8_t* aq = a.q.data() + m0 * K;
  const float* sr = a.s.data() + m0 * nb;
  const uint8_t* nib = w.nib + g * nb * 256;
  const float* dg = w.d.data() + g * nb * 16;
  const uint16_t* mtg = w.mt + g * nb * 16;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* nbk = nib + b * 256;
    // kAhead blocks ahead in all three streams (nibbles, scales, mins), which
    // come from L3 or memory. Leaving the scales and mins to the hardware
    // prefetcher and looking 8 blocks ahead cost 15-20 % on a model's
    // sequence of small matrices, and made each extra activation row cost
    // more than it does once the loads are in flight (one-off C++ harness of
    // this header: 30 layers of SmolLM2-135M's shapes plus the head, 1-4 rows).
    for (int v = 0; v < 4; ++v)
      _mm_prefetch((const char*)(nbk + kAhead * 256 + 64 * v), _MM_HINT_T0);
    _mm_prefetch((const char*)(dg + (b + kAhead) * 16), _MM_HINT_T0);
    if ((b & 1) == 0) _mm_prefetch((const char*)(mtg + (b + kAhead) * 16), _MM_HINT_T0);
    __m512i wt[8];
    for (int v = 0; v < 4; ++v) {
      const __m512i x = _mm512_loadu_si512(nbk + 64 * v);
      wt[v] = _mm512_and_si512(x, low);
      wt[4 + v] = _mm512_and_si512(_mm512_srli_epi16(x, 4), low);
    }
    const __m512 dv = _mm512_loadu_ps(dg + b * 16);
    for (int i = 0; i < MB; ++i) {
      const int32_t* qi = (const int32_t*)(aq + i * K + b * kBlock);
      __m512i dot = _mm512_setzero_si512();
      for (int kq = 0; kq < 8; ++kq) dot = _mm512_dpbusd_epi32(dot, wt[kq], _mm512_set1_epi32(qi[kq]));
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dv, _mm512_set1_ps(sr[i * nb + b])),
                               acc[i]);
    }
  }
  // The min terms, then the store.
  for (int64_t b = 0; b < nb; ++b) {
    const __m512 mv = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(mtg + b * 16)));
    for (int i = 0; i < MB; ++i)
      acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(a.t[(m0 + i) * nb + b]), mv, acc[i]);
  }
  const int64_t n0 = g * 16, cnt = std::min<int64_t>(16, w.N - n0);
  for (int i = 0; i < MB; ++i) _mm512_mask_storeu_ps(y + (m0 + i) * w.N + n0, simd::tail(cnt), acc[i]);
}

// y (M, N) = dequant(a) · dequant(w)ᵀ for the 16-output groups [g0, g1), in
// passes of at most kMaxRows activation rows (9-16 rows as two even halves).
inline void gemm_groups(const Act& a, const W& w, float* y, int64_t g0, int64_t g1) {
  for (int64_t g = g0; g < g1; ++g) {
    for (int64_t m0 = 0; m0 < a.M;) {
      const int64_t left = a.M - m0;
      const int mb = (int)(left > 2 * kMaxRows ? kMaxRows : left > kMaxRows ? (left + 1) / 2 : left);
      switch (mb) {
        case 1: group<1>(a, m0, w, y, g); break;
        case 2: group<2>(a, m0, w, y, g); break;
        case 3: group<3>(a, m0, w, y, g); break;
        case 4: group<4>(a, m0, w, y, g); break;
        case 5: group<5>(a, m0, w, y, g); break;
        case 6: group<6>(a, m0, w, y, g); break;
        case 7: group<7>(a, m0, w, y, g); break;
        default: group<8>(a, m0, w, y, g); break;
      }
      m0 += mb;
    }
  }
}

}  // namespace q4a8
