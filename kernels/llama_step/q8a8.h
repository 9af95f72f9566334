// int8 weights × int8 activations on AVX512-VNNI (or AVX2), for the fused llama step.
//
// Why: the fp32-activation kernel (q8gemm.h) converts every int8 weight to
// fp32 before its FMA, two shuffle-port µops per 16 weights, which caps it at
// ~8 weights per cycle: compute-bound, not memory-bound. vpdpbusd multiplies
// 64 int8 pairs per instruction, so activations are quantized per 32-value
// block (like llama.cpp's Q8_0 activations) and the weight row is read as is.
//
// vpdpbusd takes one unsigned operand: the weights become unsigned by
// flipping their sign bit (w ^ 0x80 = w + 128), and the extra 128·Σ qa that
// this adds is subtracted exactly, in int32, by starting each chunk's
// accumulator at -128·Σ qa of its lane (precomputed once per activation row).
//
// Each output element is accumulated the same way whatever the number of
// rows or the tile shape, so the kernel is batch-invariant (see q8gemm.cpp).
// kernels/llama_step/reference.py is the same arithmetic in PyTorch.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "simd.h"

namespace q8a8 {

constexpr int64_t kChunk = 64;  // weights per vpdpbusd
constexpr int64_t kBlock = 32;  // activation values per scale

// Quantized activation rows (storage elsewhere): q (M, K) int8; per 64-chunk,
// 16 lane scales (lanes 0-7 carry block 2c's scale, 8-15 block 2c+1's) and 16
// int32 lane offsets.
struct Act {
  int64_t M = 0, K = 0;
  const int8_t* q = nullptr;
  const float* s = nullptr;
  const int32_t* off = nullptr;
};

// Chunks [i0, i1) of the M·(K/64) row-major 64-chunks of x (M, K) into q, s, off.
inline void quantize(const float* x, int64_t K, int8_t* q, float* s, int32_t* off, int64_t i0,
                     int64_t i1) {
  const int64_t nc = K / kChunk;
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t m = i / nc, c = i % nc;
    const float* xr = x + m * K + c * kChunk;
    int8_t* qr = q + m * K + c * kChunk;
    for (int h = 0; h < 2; ++h) {
      int32_t qsum;
      const float sc = simd::quantize32(xr + h * kBlock, qr + h * kBlock, &qsum);
      for (int l = 0; l < 8; ++l) s[i * 16 + h * 8 + l] = sc;
    }
    for (int l = 0; l < 16; ++l) {
      const int8_t* g = qr + 4 * l;
      off[i * 16 + l] = -128 * ((int32_t)g[0] + g[1] + g[2] + g[3]);
    }
  }
}

// Output rows [n, n+NB) for MB activation rows starting at row m0.
#if VP_AVX512
template <int MB, int NB>
inline void tile(const Act& a, int64_t m0, const int8_t* w, const float* scale, float* y,
                 int64_t N, int64_t n) {
  const int64_t K = a.K, nc = K / kChunk;
  const __m512i flip = _mm512_set1_epi8((char)0x80);
  __m512 acc[MB][NB];
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < NB; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int64_t c = 0; c < nc; ++c) {
    __m512i wv[NB];
    for (int j = 0; j < NB; ++j)
      wv[j] = _mm512_xor_si512(_mm512_loadu_si512(w + (n + j) * K + c * kChunk), flip);
    for (int i = 0; i < MB; ++i) {
      const int64_t r = (m0 + i) * nc + c;
      const __m512i q = _mm512_loadu_si512(a.q + (m0 + i) * K + c * kChunk);
      const __m512i off = _mm512_loadu_si512(a.off + r * 16);
      const __m512 s = _mm512_loadu_ps(a.s + r * 16);
      for (int j = 0; j < NB; ++j)
        acc[i][j] =
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(off, wv[j], q)), s, acc[i][j]);
    }
  }
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < NB; ++j) y[(m0 + i) * N + n + j] = _mm512_reduce_add_ps(acc[i][j]) * scale[n + j];
}
#else
// AVX2: vpmaddubsw takes an unsigned and a signed operand, so each product
// w·q is formed as |w| · (q with w's sign) (vpsignb), then pairs go to int16
// and vpmaddwd with ones sums 4 into int32: the lane sums vpdpbusd leaves
// after its offset, exactly. No saturation: |w| ≤ 128 and |q| ≤ 127 (quantize32
// scales to 127), so a pair is at most 2 · 128 · 127 = 32,512 < 32,767. (q = -128
// would break vpsignb's negation; it cannot occur.) The lane offsets (off) are
// then not needed. Lanes 0-7 are the chunk's first 32 values, 8-15 its last.
template <int MB, int NB>
inline void tile(const Act& a, int64_t m0, const int8_t* w, const float* scale, float* y,
                 int64_t N, int64_t n) {
  const int64_t K = a.K, nc = K / kChunk;
  const __m256i ones = _mm256_set1_epi16(1);
  simd::F16 acc[MB][NB];
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < NB; ++j) acc[i][j] = simd::zero();
  for (int64_t c = 0; c < nc; ++c) {
    __m256i wa[NB][2], ws[NB][2];  // |w|, and w itself for the signs
    for (int j = 0; j < NB; ++j)
      for (int h = 0; h < 2; ++h) {
        ws[j][h] = _mm256_loadu_si256((const __m256i*)(w + (n + j) * K + c * kChunk + 32 * h));
        wa[j][h] = _mm256_sign_epi8(ws[j][h], ws[j][h]);
      }
    for (int i = 0; i < MB; ++i) {
      const int64_t r = (m0 + i) * nc + c;
      const int8_t* qr = a.q + (m0 + i) * K + c * kChunk;
      const simd::F16 s = simd::load(a.s + r * 16);
      __m256i q[2];
      for (int h = 0; h < 2; ++h) q[h] = _mm256_loadu_si256((const __m256i*)(qr + 32 * h));
      for (int j = 0; j < NB; ++j) {
        const __m256 d0 = _mm256_cvtepi32_ps(_mm256_madd_epi16(
            _mm256_maddubs_epi16(wa[j][0], _mm256_sign_epi8(q[0], ws[j][0])), ones));
        const __m256 d1 = _mm256_cvtepi32_ps(_mm256_madd_epi16(
            _mm256_maddubs_epi16(wa[j][1], _mm256_sign_epi8(q[1], ws[j][1])), ones));
        acc[i][j] = simd::fmadd({d0, d1}, s, acc[i][j]);
      }
    }
  }
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < NB; ++j) y[(m0 + i) * N + n + j] = simd::reduce_add(acc[i][j]) * scale[n + j];
}
#endif

template <int MB>
inline void rows(const Act& a, int64_t m0, const int8_t* w, const float* s, float* y, int64_t N,
                 int64_t n0, int64_t n1) {
  // Output rows per tile: AVX2 holds each row's weights in 4 registers (|w| and w)
  // and has 16, so fewer there.
  constexpr int NB = simd::kAvx512 ? (MB <= 2 ? 4 : (MB <= 4 ? 2 : 1)) : (MB <= 2 ? 2 : 1);
  int64_t n = n0;
  for (; n + NB <= n1; n += NB) tile<MB, NB>(a, m0, w, s, y, N, n);
  for (; n < n1; ++n) tile<MB, 1>(a, m0, w, s, y, N, n);
}

// y (M, N) = dequant(a) · (w (N, K) · scale)ᵀ for output rows [n0, n1).
inline void gemm_range(const Act& a, const int8_t* w, const float* s, float* y, int64_t N,
                       int64_t n0, int64_t n1) {
  for (int64_t m0 = 0; m0 < a.M; m0 += 8) {
    switch ((int)std::min<int64_t>(8, a.M - m0)) {
      case 1: rows<1>(a, m0, w, s, y, N, n0, n1); break;
      case 2: rows<2>(a, m0, w, s, y, N, n0, n1); break;
      case 3: rows<3>(a, m0, w, s, y, N, n0, n1); break;
      case 4: rows<4>(a, m0, w, s, y, N, n0, n1); break;
      case 5: rows<5>(a, m0, w, s, y, N, n0, n1); break;
      case 6: rows<6>(a, m0, w, s, y, N, n0, n1); break;
      case 7: rows<7>(a, m0, w, s, y, N, n0, n1); break;
      default: rows<8>(a, m0, w, s, y, N, n0, n1); break;
    }
  }
}

}  // namespace q8a8
