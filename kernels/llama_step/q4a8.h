// 4-bit weights × int8 activations on AVX512-VNNI (or AVX2), for the fused llama step.
//
// Weights are GGUF Q4_1-shaped: per 32 consecutive inputs (a block) a scale d
// and min m, w = d·q + m, q in 0..15. The default model ships as Q4_1, so
// re-packing its dequantized tensors is exact. 0.625 bytes per weight as
// the kernel reads them (W::dm).
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
#include <cstdlib>
#include <memory>
#include <cstdint>
#include <vector>

#include "simd.h"

namespace q4a8 {

constexpr int64_t kBlock = 32;
constexpr int kMaxRows = 8;  // activation rows per pass over a weight group
constexpr int64_t kAhead = 16;  // software prefetch distance, in 32-input blocks (4 KB of nibbles)

struct W {  // one packed matrix
  const uint8_t* nib = nullptr;  // (G, nb, 256) nibbles
  // (G, nb, 32) fp16: per group and block the 16 outputs' scales, then their
  // mins, one 64-byte line. The scales are fp16 values (pack_q4 rounds them
  // so), so halving them from fp32 changes no bit; with the mins beside them,
  // a pass streams 320 bytes per 512 weights in two streams instead of 352
  // in three: 9 % fewer bytes on a memory-bound pass.
  std::shared_ptr<uint16_t> dm;  // 64-byte aligned: one line per block
  int64_t N = 0, K = 0, G = 0, nb = 0;
};

// W over packed tensors: nib is used in place, d (N, nb) fp32 and mt (G, nb,
// 16) fp16 are regrouped into dm. Returns false if a scale is not an fp16 value.
inline bool view(const uint8_t* nib, const float* d, const uint16_t* mt, int64_t N, int64_t K, W& w) {
  w.nib = nib;
  w.N = N;
  w.K = K;
  w.G = (N + 15) / 16;
  w.nb = K / kBlock;
  const size_t bytes = (size_t)(w.G * w.nb * 64);
  w.dm.reset((uint16_t*)std::aligned_alloc(64, std::max<size_t>(bytes, 64)), std::free);
  uint16_t* dm = w.dm.get();
  for (int64_t g = 0; g < w.G; ++g)
    for (int64_t b = 0; b < w.nb; ++b) {
      uint16_t* o = dm + (g * w.nb + b) * 32;
      for (int r = 0; r < 16; ++r) {
        o[r] = 0;  // padded outputs of the last group
        o[16 + r] = mt[(g * w.nb + b) * 16 + r];
      }
    }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t b = 0; b < w.nb; ++b) {
      const float v = d[n * w.nb + b];
      const uint16_t h = _cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT);
      if (_cvtsh_ss(h) != v) return false;
      dm[((n / 16) * w.nb + b) * 32 + n % 16] = h;
    }
  return true;
}

// Quantized activation rows, as the kernel reads them (storage elsewhere).
struct Act {
  int64_t M = 0, K = 0, nb = 0;
  const int8_t* q = nullptr;  // (M, K)
  const float* s = nullptr;   // (M, nb) block scales
  const float* t = nullptr;   // (M, nb) s_b · Σ q over block b
};

// Blocks [i0, i1) of the M·nb row-major blocks of x (M, K) into q, s, t.
inline void quantize(const float* x, int64_t K, int8_t* q, float* s, float* t, int64_t i0,
                     int64_t i1) {
  const int64_t nb = K / kBlock;
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t m = i / nb, b = i % nb;
    int32_t qsum;
    s[i] = simd::quantize32(x + m * K + b * kBlock, q + m * K + b * kBlock, &qsum);
    t[i] = s[i] * (float)qsum;
  }
}

// Outputs of group g for MB activation rows from m0.
#if VP_AVX512
template <int MB>
inline void group(const Act& a, int64_t m0, const W& w, float* y, int64_t g) {
  const int64_t nb = w.nb, K = w.K;
  const __m512i low = _mm512_set1_epi8(0x0F);
  __m512 acc[MB];
  for (int i = 0; i < MB; ++i) acc[i] = _mm512_setzero_ps();
  const int8_t* aq = a.q + m0 * K;
  const float* sr = a.s + m0 * nb;
  const uint8_t* nib = w.nib + g * nb * 256;
  const uint16_t* dmg = w.dm.get() + g * nb * 32;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* nbk = nib + b * 256;
    // kAhead blocks ahead in both streams (nibbles; scales and mins), which
    // come from L3 or memory. Leaving the scales and mins to the hardware
    // prefetcher and looking 8 blocks ahead cost 15-20 % on a model's
    // sequence of small matrices, and made each extra activation row cost
    // more than it does once the loads are in flight (one-off C++ harness of
    // this header: 30 layers of SmolLM2-135M's shapes plus the head, 1-4 rows).
    for (int v = 0; v < 4; ++v)
      _mm_prefetch((const char*)(nbk + kAhead * 256 + 64 * v), _MM_HINT_T0);
    _mm_prefetch((const char*)(dmg + (b + kAhead) * 32), _MM_HINT_T0);
    __m512i wt[8];
    for (int v = 0; v < 4; ++v) {
      const __m512i x = _mm512_loadu_si512(nbk + 64 * v);
      wt[v] = _mm512_and_si512(x, low);
      wt[4 + v] = _mm512_and_si512(_mm512_srli_epi16(x, 4), low);
    }
    const __m512 dv = _mm512_cvtph_ps(_mm256_load_si256((const __m256i*)(dmg + b * 32)));
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
    const __m512 mv = _mm512_cvtph_ps(_mm256_load_si256((const __m256i*)(dmg + b * 32 + 16)));
    for (int i = 0; i < MB; ++i)
      acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(a.t[(m0 + i) * nb + b]), mv, acc[i]);
  }
  const int64_t n0 = g * 16, cnt = std::min<int64_t>(16, w.N - n0);
  for (int i = 0; i < MB; ++i) _mm512_mask_storeu_ps(y + (m0 + i) * w.N + n0, simd::tail(cnt), acc[i]);
}
#else
// AVX2: no vpdpbusd, so each 4-input dot is vpmaddubsw (u8 weight × s8
// activation, pairs summed into int16) then vpmaddwd with ones (pairs of those
// into int32). The int16 sums of a block's 8 rows are added before widening:
// |Σ| ≤ 8 · 2 · 15 · 128 = 30,720 < 32,767, so nothing saturates and every
// int32 dot is exact, the same integer as vpdpbusd's. The 16 outputs are two
// halves of 8 (32 bytes at 64·kq + 32·h hold row kq of half h in the low
// nibbles, row 4 + kq in the high ones). Per lane the float operations are the
// AVX-512 path's, in its order.
//
// A block is done in two phases, its weight rows kq = 0-3 (the low nibbles) and
// then 4-7 (the high ones), each over both halves: 8 weight registers a phase, and each
// activation broadcast feeds both halves' vpmaddubsw. The earlier loop took
// one half at a time over all 8 rows, so every activation row's 8 broadcasts
// were done twice per block (16 vpbroadcastd per row and block, as many as its
// vpmaddubsw; on Zen 3 they take vector-pipe slots, not only a load). Here a
// row costs 8: the first phase leaves its two int16 partial sums in L1, the
// second adds to them (integer adds, exact whatever their order). The rows'
// float accumulators live in L1 too, and each phase's row loop stays a loop:
// unrolled, the rows' registers exceeded AVX2's 16 and spilled (at 4 rows 146
// of a block's 301 instructions touched the stack). The row count is hidden
// from the optimiser, which otherwise peeled 2-5 rows into straight-line
// copies that spilled the same way.
//
// Measured in a C++ harness of this header against the previous loop, both
// interleaved in one process on L2-resident weights (1,536 × 256, best of 600,
// load 2-5): 5.9 against 6.7 ns per row and 16×32 weights at 8 rows, 10-17 %
// less at 2-8 rows, 9 % less at one row. Every row's bits are unchanged.
template <int MB>
inline void group(const Act& a, int64_t m0, const W& w, float* y, int64_t g) {
  const int64_t nb = w.nb, K = w.K;
  const __m256i low = _mm256_set1_epi8(0x0F);
  const __m256i ones = _mm256_set1_epi16(1);
  alignas(32) float acc[MB][16];
  alignas(32) __m256i part[MB][2];  // the first phase's int16 sums, per row and half
  for (int i = 0; i < MB; ++i) simd::store(acc[i], simd::zero());
  const int8_t* aq = a.q + m0 * K;
  const float* sr = a.s + m0 * nb;
  const uint8_t* nib = w.nib + g * nb * 256;
  const uint16_t* dmg = w.dm.get() + g * nb * 32;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* nbk = nib + b * 256;
    for (int v = 0; v < 4; ++v)  // as the AVX-512 path (see there)
      _mm_prefetch((const char*)(nbk + kAhead * 256 + 64 * v), _MM_HINT_T0);
    _mm_prefetch((const char*)(dmg + (b + kAhead) * 32), _MM_HINT_T0);
    {  // weight rows 0-3 of the block (low nibbles), both halves
      __m256i wt[8];  // wt[4h + kq]
      for (int h = 0; h < 2; ++h)
        for (int kq = 0; kq < 4; ++kq)
          wt[4 * h + kq] =
              _mm256_and_si256(_mm256_loadu_si256((const __m256i*)(nbk + 64 * kq + 32 * h)), low);
      int n = MB;
      asm("" : "+r"(n));
#pragma GCC unroll 1
      for (int i = 0; i < n; ++i) {
        const int32_t* qi = (const int32_t*)(aq + i * K + b * kBlock);
        __m256i q = _mm256_set1_epi32(qi[0]);
        __m256i s0 = _mm256_maddubs_epi16(wt[0], q), s1 = _mm256_maddubs_epi16(wt[4], q);
        for (int kq = 1; kq < 4; ++kq) {
          q = _mm256_set1_epi32(qi[kq]);
          s0 = _mm256_add_epi16(s0, _mm256_maddubs_epi16(wt[kq], q));
          s1 = _mm256_add_epi16(s1, _mm256_maddubs_epi16(wt[4 + kq], q));
        }
        _mm256_store_si256(&part[i][0], s0);
        _mm256_store_si256(&part[i][1], s1);
      }
    }
    {  // weight rows 4-7 (high nibbles), then the float tail of both halves
      __m256i wt[8];
      for (int h = 0; h < 2; ++h)
        for (int kq = 0; kq < 4; ++kq)
          wt[4 * h + kq] = _mm256_and_si256(
              _mm256_srli_epi16(_mm256_loadu_si256((const __m256i*)(nbk + 64 * kq + 32 * h)), 4),
              low);
      const __m256 dv0 = _mm256_cvtph_ps(_mm_load_si128((const __m128i*)(dmg + b * 32)));
      const __m256 dv1 = _mm256_cvtph_ps(_mm_load_si128((const __m128i*)(dmg + b * 32 + 8)));
      int n = MB;
      asm("" : "+r"(n));
#pragma GCC unroll 1
      for (int i = 0; i < n; ++i) {
        const int32_t* qi = (const int32_t*)(aq + i * K + b * kBlock) + 4;
        __m256i s0 = _mm256_load_si256(&part[i][0]), s1 = _mm256_load_si256(&part[i][1]);
        for (int kq = 0; kq < 4; ++kq) {
          const __m256i q = _mm256_set1_epi32(qi[kq]);
          s0 = _mm256_add_epi16(s0, _mm256_maddubs_epi16(wt[kq], q));
          s1 = _mm256_add_epi16(s1, _mm256_maddubs_epi16(wt[4 + kq], q));
        }
        const __m256 sc = _mm256_set1_ps(sr[i * nb + b]);
        const __m256 d0 = _mm256_cvtepi32_ps(_mm256_madd_epi16(s0, ones));
        const __m256 d1 = _mm256_cvtepi32_ps(_mm256_madd_epi16(s1, ones));
        _mm256_store_ps(acc[i], _mm256_fmadd_ps(d0, _mm256_mul_ps(dv0, sc), _mm256_load_ps(acc[i])));
        _mm256_store_ps(acc[i] + 8,
                        _mm256_fmadd_ps(d1, _mm256_mul_ps(dv1, sc), _mm256_load_ps(acc[i] + 8)));
      }
    }
  }
  // The min terms, then the store.
  for (int64_t b = 0; b < nb; ++b) {
    const simd::F16 mv = simd::load_half(dmg + b * 32 + 16);
    for (int i = 0; i < MB; ++i)
      simd::store(acc[i], simd::fmadd(simd::set1(a.t[(m0 + i) * nb + b]), mv, simd::load(acc[i])));
  }
  const int64_t n0 = g * 16, cnt = std::min<int64_t>(16, w.N - n0);
  for (int i = 0; i < MB; ++i) simd::store_tail(y + (m0 + i) * w.N + n0, simd::load(acc[i]), cnt);
}
#endif

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
