// The int8 weight-only row kernels shared by q8gemm.cpp and kernels/llama_step.
// See q8gemm.cpp for why they exist and how they stay batch-invariant.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "../llama_step/simd.h"  // F16: 16 fp32 lanes on AVX-512 or AVX2

namespace q8 {

template <int MB>
void block(const float* x, const int8_t* w, const float* scale, float* y, int64_t K, int64_t N,
           int64_t n0, int64_t n1) {
  for (int64_t n = n0; n < n1; ++n) {
    const int8_t* wr = w + n * K;
    simd::F16 a0[MB], a1[MB];
    for (int i = 0; i < MB; ++i) {
      a0[i] = simd::zero();
      a1[i] = simd::zero();
    }
    for (int64_t k = 0; k < K; k += 32) {
      const simd::F16 w0 = simd::load_i8(wr + k), w1 = simd::load_i8(wr + k + 16);
      for (int i = 0; i < MB; ++i) {
        a0[i] = simd::fmadd(w0, simd::load(x + i * K + k), a0[i]);
        a1[i] = simd::fmadd(w1, simd::load(x + i * K + k + 16), a1[i]);
      }
    }
    for (int i = 0; i < MB; ++i) {
      y[i * N + n] = simd::reduce_add(simd::add(a0[i], a1[i])) * scale[n];
    }
  }
}

inline void rows(int mb, const float* x, const int8_t* w, const float* s, float* y, int64_t K, int64_t N,
          int64_t n0, int64_t n1) {
  switch (mb) {
    case 1: return block<1>(x, w, s, y, K, N, n0, n1);
    case 2: return block<2>(x, w, s, y, K, N, n0, n1);
    case 3: return block<3>(x, w, s, y, K, N, n0, n1);
    case 4: return block<4>(x, w, s, y, K, N, n0, n1);
    case 5: return block<5>(x, w, s, y, K, N, n0, n1);
    case 6: return block<6>(x, w, s, y, K, N, n0, n1);
    case 7: return block<7>(x, w, s, y, K, N, n0, n1);
    default: return block<8>(x, w, s, y, K, N, n0, n1);
  }
}


// y = x (M, K) · (w (N, K) · scale)ᵀ for output rows [n0, n1), M ≤ any.
inline void gemm_range(const float* x, const int8_t* w, const float* s, float* y, int64_t M,
                       int64_t K, int64_t N, int64_t n0, int64_t n1) {
  for (int64_t m0 = 0; m0 < M; m0 += 8) {
    int mb = (int)std::min<int64_t>(8, M - m0);
    rows(mb, x + m0 * K, w, s, y + m0 * N, K, N, n0, n1);
  }
}

}  // namespace q8
