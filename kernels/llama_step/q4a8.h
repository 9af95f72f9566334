// 4-bit weights × int8 activations on AVX512-VNNI, for the fused llama step.
//
// Why: with VNNI the int8 kernel (q8a8.h) is bound by memory, not compute,
// so the bytes read per token set the decode speed. Weights here are GGUF
// Q4_1-shaped: per 32 consecutive inputs a scale d and min m, with
// w = d·q + m, q in 0..15. The default model ships as Q4_1 (fp16 d and m), so
// re-packing its dequantized tensors is exact. d is kept in fp32 (a
// conversion per use costs more than its 0.06 bytes per weight), m in fp16
// (read once per row): 0.69 bytes per weight instead of int8's 1.
//
// Runs: the K/64 chunks of a row are split greedily into runs of 8, 4, 2 or 1
// chunks (C chunks = 2C blocks). Within a run, lane l of every vpdpbusd holds
// 4 inputs of one block (block l·C/8), so the C vpdpbusd of a run accumulate
// in the same int32 lanes and the block scales are applied once per run: one
// int→float conversion and one FMA per 512 inputs instead of per 64. That
// matters for verification, where every activation row pays its own
// arithmetic: per 64 inputs a row costs one vpdpbusd plus 3/C more, not 4
// (vpdpbusd and the conversion share one port on Intel cores).
// Activations are quantized per 32-block and stored in the same lane order.
// The min term m·Σa is a short dot product of the mins with the activation's
// block sums, done for 16 output rows at once (mins stored 16 rows side by side).
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

// Chunks in the run that starts with `left` chunks still to go.
constexpr int run_len(int64_t left) { return left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1; }

// Byte order within a run of C chunks (voicepipe.nn.qlinear.q4_order builds the
// weights' side): operand k (0..C-1), lane l, byte b holds input
// (l / per)·32 + (l % per)·4C + 4k + b of the run, per = 8/C lanes per block.

struct Act {
  int64_t M = 0, K = 0, runs = 0;
  std::vector<int8_t> q;   // (K/64, M, 64): chunk-major, run order within
  std::vector<float> s;    // (runs, M, 16): each lane's block scale
  std::vector<float> t;    // (M, K/32): s_b · Σ q over block b
  std::vector<int8_t> tmp; // one row in natural order
  std::vector<float> sb;   // one row's block scales
};

inline int64_t n_runs(int64_t K) {
  int64_t n = 0;
  for (int64_t c = 0, nc = K / kChunk; c < nc; c += run_len(nc - c)) ++n;
  return n;
}

inline void quantize(const float* x, int64_t M, int64_t K, Act& a) {
  const int64_t nb = K / kBlock, nc = K / kChunk;
  a.M = M;
  a.K = K;
  a.runs = n_runs(K);
  a.q.resize(M * K);
  a.s.resize(M * a.runs * 16);
  a.t.resize(M * nb);
  a.tmp.resize(K);
  a.sb.resize(nb);
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = x + m * K;
    for (int64_t b = 0; b < nb; ++b) {
      int32_t qsum;
      const float s = simd::quantize32(xr + b * kBlock, a.tmp.data() + b * kBlock, &qsum);
      a.sb[b] = s;
      a.t[m * nb + b] = s * (float)qsum;
    }
    for (int64_t c = 0, r = 0; c < nc; ++r) {
      const int C = run_len(nc - c), per = 8 / C;
      const int64_t base = c * kChunk;
      // Operand k's lane l is the 4 bytes at off[l] + 4k (the order above): a dword gather.
      alignas(64) int32_t off[16];
      for (int l = 0; l < 16; ++l) off[l] = (l / per) * 32 + (l % per) * 4 * C;
      const __m512i idx = _mm512_load_si512(off);
      for (int k = 0; k < C; ++k)
        _mm512_storeu_si512(a.q.data() + ((c + k) * M + m) * kChunk,
                            _mm512_i32gather_epi32(idx, a.tmp.data() + base + 4 * k, 1));
      float* sr = a.s.data() + (r * M + m) * 16;
      for (int l = 0; l < 16; ++l) sr[l] = a.sb[2 * c + l * C / 8];
      c += C;
    }
  }
}

struct W {  // one packed matrix
  const uint8_t* p;    // (N, K/2) nibbles, run order (operand bytes 0-31 low, 32-63 high)
  const float* d;      // (N, K/32) scales
  const uint16_t* mt;  // (ceil(N/16), K/32, 16) fp16 mins, 16 output rows side by side
  int64_t N, K;
};

// One run of C chunks from chunk c0: int32 dot products per lane, then
// acc += float(dot) · d_lane · s_lane.
template <int MB, int NB, int C>
inline void run(const Act& a, int64_t m0, const W& w, int64_t n, int64_t c0, int64_t r,
                int64_t pf, __m512 (&acc)[MB][NB]) {
  const int64_t K = w.K, half = K / 2, nb = K / kBlock;
  const __m512i low = _mm512_set1_epi8(0x0F);
  __m512i dot[MB][NB];
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < NB; ++j) dot[i][j] = _mm512_setzero_si512();
  for (int k = 0; k < C; ++k) {
    const int64_t c = c0 + k;
    __m512i wv[NB];
    for (int j = 0; j < NB; ++j) {
      _mm_prefetch((const char*)(w.p + (pf + j) * half + c * 32), _MM_HINT_T0);
      const __m512i raw =
          _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i*)(w.p + (n + j) * half + c * 32)));
      // Bytes 0-31 keep their low nibble, bytes 32-63 (the same 32 again) their high one.
      wv[j] = _mm512_and_si512(_mm512_mask_srli_epi16(raw, 0xFFFF0000u, raw, 4), low);
    }
    const int8_t* qc = a.q.data() + (c * a.M + m0) * kChunk;  // rows at fixed offsets
    for (int i = 0; i < MB; ++i) {
      const __m512i q = _mm512_loadu_si512(qc + i * kChunk);
      for (int j = 0; j < NB; ++j) dot[i][j] = _mm512_dpbusd_epi32(dot[i][j], wv[j], q);
    }
  }
  // Lane l holds block 2·c0 + l·C/8.
  const __m512i lanes = _mm512_srli_epi32(
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(C)),
      3);
  __m512 dv[NB];
  for (int j = 0; j < NB; ++j) {
    _mm_prefetch((const char*)(w.d + (pf + j) * nb + 2 * c0), _MM_HINT_T0);
    dv[j] = _mm512_permutexvar_ps(
        lanes, _mm512_maskz_loadu_ps((__mmask16)((1u << (2 * C)) - 1), w.d + (n + j) * nb + 2 * c0));
  }
  const float* sr = a.s.data() + (r * a.M + m0) * 16;
  for (int i = 0; i < MB; ++i) {
    const __m512 sv = _mm512_loadu_ps(sr + i * 16);
    for (int j = 0; j < NB; ++j)
      acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[i][j]), _mm512_mul_ps(dv[j], sv), acc[i][j]);
  }
}

// Raw accumulators of output rows [n, n+NB) (row r of their 16-row group) for
// MB activation rows from m0, stored to out[i * 16 + r + j].
template <int MB, int NB>
inline void tile(const Act& a, int64_t m0, const W& w, __m512* out, int64_t n, int r) {
  __m512 acc[MB][NB];
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < NB; ++j) acc[i][j] = _mm512_setzero_ps();
  // Software prefetch ~4 KB ahead in the weight stream: the profile showed the
  // weight loads stalling on memory latency even for 8 activation rows.
  const int64_t ahead = std::max<int64_t>(4, 4096 / (w.K / 2));
  const int64_t pf = std::min(n + ahead, w.N - NB);
  const int64_t nc = w.K / kChunk;
  for (int64_t c = 0, r2 = 0; c < nc; ++r2) {
    switch (run_len(nc - c)) {
      case 8: run<MB, NB, 8>(a, m0, w, n, c, r2, pf, acc); c += 8; break;
      case 4: run<MB, NB, 4>(a, m0, w, n, c, r2, pf, acc); c += 4; break;
      case 2: run<MB, NB, 2>(a, m0, w, n, c, r2, pf, acc); c += 2; break;
      default: run<MB, NB, 1>(a, m0, w, n, c, r2, pf, acc); c += 1; break;
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
  // Live registers: 2·MB·NB accumulators (int per run, float across runs) + NB weights;
  // 7-8 rows spill a little, still cheaper than two passes.
  constexpr int NB = MB <= 2 ? 4 : MB <= 4 ? 3 : 2;
  const int64_t n0 = g * 16, cnt = std::min<int64_t>(16, w.N - n0), nb = w.K / kBlock;
  __m512 buf[MB * 16];
  int r = 0;
  for (; r + NB <= cnt; r += NB) tile<MB, NB>(a, m0, w, buf, n0 + r, r);
  for (; r < cnt; ++r) tile<MB, 1>(a, m0, w, buf, n0 + r, r);
  for (int i = 0; i < MB; ++i)
    for (int k = (int)cnt; k < 16; ++k) buf[i * 16 + k] = _mm512_setzero_ps();
  __m512 v[MB];
  for (int i = 0; i < MB; ++i) v[i] = simd::hsum16(buf + i * 16);
  // The min terms, one independent FMA chain per activation row.
  const uint16_t* mt = w.mt + g * nb * 16;
  for (int64_t b = 0; b < nb; ++b) {
    const __m512 mv = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(mt + b * 16)));
    for (int i = 0; i < MB; ++i)
      v[i] = _mm512_fmadd_ps(_mm512_set1_ps(a.t[(m0 + i) * nb + b]), mv, v[i]);
  }
  for (int i = 0; i < MB; ++i) _mm512_mask_storeu_ps(y + (m0 + i) * w.N + n0, simd::tail(cnt), v[i]);
}

// y (M, N) = dequant(a) · dequant(w)ᵀ for the 16-row groups [g0, g1).
// Activation rows go in blocks of at most 8 (9-16 rows as two even halves):
// a second pass over a weight tile repeats its unpacking, which costs about
// as much as 4 rows' arithmetic, so verify passes stay one pass where they can.
inline void gemm_groups(const Act& a, const W& w, float* y, int64_t g0, int64_t g1) {
  const int64_t step = a.M <= 8 ? a.M : a.M <= 16 ? (a.M + 1) / 2 : 8;
  for (int64_t g = g0; g < g1; ++g) {
    for (int64_t m0 = 0; m0 < a.M; m0 += step) {
      switch ((int)std::min<int64_t>(step, a.M - m0)) {
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
