// 4-bit weights × int8 activations on AVX512-VNNI, for the fused llama step.
//
// Why: with VNNI the int8 kernel (q8a8.h) is bound by memory, not compute,
// so the bytes read per token set the decode speed. Weights here are GGUF
// Q4_1-shaped: per 32 consecutive inputs a scale d and min m, with
// w = d·q + m, q in 0..15. The default model ships as Q4_1 (fp16 d and m), so
// re-packing its dequantized tensors is exact. d is kept in fp32 (read every
// chunk, a conversion there costs more than its 0.06 bytes per weight), m in
// fp16 (read once per row): 0.69 bytes per weight instead of int8's 1.
//
// Per 64-input chunk a row stores 32 bytes of nibbles. Lane l of vpdpbusd sums
// 4 consecutive bytes, and the byte order is chosen so that even lanes hold
// the chunk's first block and odd lanes its second: then a chunk's two block
// scales (d, and the activation's s) are each one 2-element broadcast.
// Activations are quantized per 32-block into that same order. The min term
// m·Σa is a short dot product of the mins with the activation's block sums;
// it is done for 16 output rows at once (mins stored 16 rows side by side).
//
// Batch-invariant like the other kernels: each output element is computed
// the same way whatever the tile. kernels/llama_step/reference.py mirrors it.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "simd.h"

namespace q4a8 {

constexpr int64_t kChunk = 64;
constexpr int64_t kBlock = 32;

// Input index (within its chunk) held at byte position p of the unpacked chunk.
constexpr int kmap(int p) { return ((p / 4) % 2) * 32 + (p / 8) * 4 + p % 4; }

struct Act {
  int64_t M = 0, K = 0;
  std::vector<int8_t> q;   // (M, K) in kmap order per chunk
  std::vector<float> s2;   // (M, K/64, 2) block scales
  std::vector<float> t;    // (M, K/32): s_b · Σ q over block b
  std::vector<int8_t> tmp; // one row in natural order
};

inline void quantize(const float* x, int64_t M, int64_t K, Act& a) {
  a.M = M;
  a.K = K;
  const int64_t nb = K / kBlock, nc = K / kChunk;
  a.q.resize(M * K);
  a.s2.resize(M * nc * 2);
  a.t.resize(M * nb);
  a.tmp.resize(K);
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = x + m * K;
    for (int64_t b = 0; b < nb; ++b) {
      int32_t qsum;
      const float s = simd::quantize32(xr + b * kBlock, a.tmp.data() + b * kBlock, &qsum);
      a.s2[m * nb + b] = s;  // (M, nc, 2) is (M, nb) in memory
      a.t[m * nb + b] = s * (float)qsum;
    }
    int8_t* qr = a.q.data() + m * K;
    for (int64_t c = 0; c < nc; ++c)
      for (int p = 0; p < kChunk; ++p) qr[c * kChunk + p] = a.tmp[c * kChunk + kmap(p)];
  }
}

struct W {  // one packed matrix
  const uint8_t* p;    // (N, K/2) nibbles
  const float* d;      // (N, K/32) scales
  const uint16_t* mt;  // (ceil(N/16), K/32, 16) fp16 mins, 16 output rows side by side
  int64_t N, K;
};

// Raw accumulators of output rows [n, n+NB) (row r of their 16-row group) for
// MB activation rows from m0, stored to out[i * 16 + r + j].
template <int MB, int NB>
inline void tile(const Act& a, int64_t m0, const W& w, __m512* out, int64_t n, int r) {
  const int64_t K = w.K, nc = K / kChunk, nb = K / kBlock;
  const __m512i low = _mm512_set1_epi8(0x0F);
  __m512 acc[MB][NB];
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < NB; ++j) acc[i][j] = _mm512_setzero_ps();
  // Software prefetch ~4 KB ahead in the weight stream: the profile showed the
  // weight loads stalling on memory latency even for 8 activation rows.
  const int64_t ahead = std::max<int64_t>(4, 4096 / (K / 2));
  const int64_t pf = std::min(n + ahead, w.N - NB);
  for (int64_t c = 0; c < nc; ++c) {
    __m512i wv[NB];
    __m512 dv[NB];
    for (int j = 0; j < NB; ++j) {
      _mm_prefetch((const char*)(w.p + (pf + j) * (K / 2) + c * 32), _MM_HINT_T0);
      if (c % 8 == 0) _mm_prefetch((const char*)(w.d + (pf + j) * nb + 2 * c), _MM_HINT_T0);
      const __m512i raw = _mm512_broadcast_i64x4(
          _mm256_loadu_si256((const __m256i*)(w.p + (n + j) * (K / 2) + c * 32)));
      // Bytes 0-31 keep their low nibble, bytes 32-63 (the same 32 again) their high one.
      wv[j] = _mm512_and_si512(_mm512_mask_srli_epi16(raw, 0xFFFF0000u, raw, 4), low);
      double dd;
      std::memcpy(&dd, w.d + (n + j) * nb + 2 * c, 8);
      dv[j] = _mm512_castpd_ps(_mm512_set1_pd(dd));  // d0, d1, d0, d1, …
    }
    for (int i = 0; i < MB; ++i) {
      const __m512i q = _mm512_loadu_si512(a.q.data() + (m0 + i) * K + c * kChunk);
      double sd;
      std::memcpy(&sd, a.s2.data() + ((m0 + i) * nc + c) * 2, 8);
      const __m512 sv = _mm512_castpd_ps(_mm512_set1_pd(sd));  // s0, s1, s0, s1, …
      for (int j = 0; j < NB; ++j) {
        const __m512 v = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), wv[j], q));
        acc[i][j] = _mm512_fmadd_ps(v, _mm512_mul_ps(dv[j], sv), acc[i][j]);
      }
    }
  }
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < NB; ++j) out[i * 16 + r + j] = acc[i][j];
}

// Output rows of group g (rows 16g .. 16g+15) for MB activation rows from m0:
// the 16 rows' reductions and min terms are done side by side in vectors
// (one transpose-and-add tree, then Σ_b t_b · m_b over 16 rows per FMA).
template <int MB>
inline void group(const Act& a, int64_t m0, const W& w, float* y, int64_t g) {
  constexpr int NB = MB <= 2 ? 4 : 2;  // MB · NB accumulators + NB weights fit 32 registers
  const int64_t n0 = g * 16, cnt = std::min<int64_t>(16, w.N - n0), nb = w.K / kBlock;
  __m512 buf[MB * 16];
  int r = 0;
  for (; r + NB <= cnt; r += NB) tile<MB, NB>(a, m0, w, buf, n0 + r, r);
  for (; r < cnt; ++r) tile<MB, 1>(a, m0, w, buf, n0 + r, r);
  for (int i = 0; i < MB; ++i)
    for (int k = (int)cnt; k < 16; ++k) buf[i * 16 + k] = _mm512_setzero_ps();
  const uint16_t* mt = w.mt + g * nb * 16;
  for (int i = 0; i < MB; ++i) {
    __m512 v = simd::hsum16(buf + i * 16);
    const float* t = a.t.data() + (m0 + i) * nb;
    for (int64_t b = 0; b < nb; ++b)
      v = _mm512_fmadd_ps(_mm512_set1_ps(t[b]),
                          _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(mt + b * 16))), v);
    _mm512_mask_storeu_ps(y + (m0 + i) * w.N + n0, simd::tail(cnt), v);
  }
}

// y (M, N) = dequant(a) · dequant(w)ᵀ for the 16-row groups [g0, g1).
inline void gemm_groups(const Act& a, const W& w, float* y, int64_t g0, int64_t g1) {
  for (int64_t g = g0; g < g1; ++g) {
    for (int64_t m0 = 0; m0 < a.M; m0 += 8) {
      switch ((int)std::min<int64_t>(8, a.M - m0)) {
        case 1: group<1>(a, m0, w, y, g); break;
        case 2: group<2>(a, m0, w, y, g); break;
        case 3: group<3>(a, m0, w, y, g); break;
        case 4: group<4>(a, m0, w, y, g); break;
        case 5: group<5>(a, m0, w, y, g); break;
        case 6: group<6>(a, m0, w, y, g); break;
        case 7: group<7>(a, m0, w, y, g); break;
        default: group<8>(a, m0, w, y, g); break;
      }
    }
  }
}

}  // namespace q4a8
