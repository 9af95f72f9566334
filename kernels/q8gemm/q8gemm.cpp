// Weight-only int8 GEMM for a few rows: y (M, N) = x (M, K) · (w (N, K) int8 · scale (N))ᵀ.
//
// Why: decode and speculative verification are memory-bound, and torch's
// _weight_int8pack_mm re-reads the whole weight for every row of x, so
// verifying K+1 positions costs ~K+1 decodes. Here each weight row is read
// once for up to 8 rows of x (int8 → fp32 in registers, FMA; AVX-512 or AVX2).
//
// Batch invariance: every output element is accumulated the same way (two
// interleaved 16-lane partial sums over k, then a fixed reduction) whatever
// M is, so row m of a 5-row call is bit-identical to a 1-row call. Greedy
// speculative decoding stays token-identical to plain greedy decoding.
//
// A plain C function over raw pointers, loaded with ctypes (voicepipe/nn/kernels.py):
// no torch header is parsed, so the compile takes seconds instead of ~35 s on a
// fresh machine's critical path. The caller (voicepipe.nn.llm.qlinear.q8gemm)
// checks x fp32 (M, K) contiguous, w int8 (N, K) contiguous, scale fp32 (N,)
// contiguous, K % 32 == 0, and allocates y (M, N) fp32.
#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "q8gemm.h"

extern "C" void vp_q8_gemm(const float* x, const int8_t* w, const float* scale, float* y,
                           int64_t M, int64_t K, int64_t N, int threads) {
  // Output rows in 16-row chunks, one contiguous run of chunks per thread (what
  // at::parallel_for with a grain of 16 did): each output's arithmetic is the same
  // however the rows are split, so the split does not change a bit.
  const int64_t chunks = (N + 15) / 16;
  const int nt = (int)std::max<int64_t>(1, std::min<int64_t>(threads, chunks));
  if (nt == 1) {
    q8::gemm_range(x, w, scale, y, M, K, N, 0, N);
    return;
  }
#pragma omp parallel num_threads(nt)
  {
    const int64_t t = omp_get_thread_num(), n = omp_get_num_threads();
    const int64_t c0 = chunks * t / n, c1 = chunks * (t + 1) / n;
    q8::gemm_range(x, w, scale, y, M, K, N, c0 * 16, std::min(N, c1 * 16));
  }
}
