// The fused step's vector layer: 16 fp32 lanes (F16) as one AVX-512 register
// or as two AVX2 registers, and the helpers built on it.
//
// Why: the kernels were written for AVX-512 (VNNI), and the machines this
// project gets are AVX2-only Zen 3 hosts, where nothing was built. Code written
// against F16 compiles to the same instructions as before on AVX-512 and to
// pairs of 8-lane ones on AVX2. Every lane does the same float operations in
// the same order on both, so a value depends on its lane's inputs only, not on
// the ISA's register width (reductions across lanes excepted: each ISA has its
// own fixed order, so results are reproducible per machine, not bit-equal across
// ISAs). The integer dot products, which differ most, are in q4a8.h / q8a8.h.
//
// VP_AVX512: AVX-512 F/BW/VL/VNNI (the original kernels). Else AVX2 + FMA +
// F16C, which covers Haswell and later and every Zen; an AVX-512 CPU without
// VNNI (Skylake-SP) takes the AVX2 path too, whose integer dots need no VNNI.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512VNNI__) && !defined(VOICEPIPE_FORCE_AVX2)
#define VP_AVX512 1
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define VP_AVX512 0
#else
#error "kernels/llama_step needs AVX-512 (F, BW, VL, VNNI) or AVX2 with FMA and F16C"
#endif

namespace simd {

constexpr bool kAvx512 = VP_AVX512;

#if VP_AVX512

struct F16 {
  __m512 v;
};

inline __mmask16 tail(int64_t left) { return left >= 16 ? 0xFFFF : (__mmask16)((1u << left) - 1); }

inline F16 zero() { return {_mm512_setzero_ps()}; }
inline F16 set1(float x) { return {_mm512_set1_ps(x)}; }
inline F16 load(const float* p) { return {_mm512_loadu_ps(p)}; }
inline void store(float* p, F16 a) { _mm512_storeu_ps(p, a.v); }
// Lanes [0, n) of p (n may exceed 16), the rest 0 (or fill's): never reads past them.
inline F16 load_tail(const float* p, int64_t n) { return {_mm512_maskz_loadu_ps(tail(n), p)}; }
inline F16 load_tail_or(F16 fill, const float* p, int64_t n) {
  return {_mm512_mask_loadu_ps(fill.v, tail(n), p)};
}
inline void store_tail(float* p, F16 a, int64_t n) { _mm512_mask_storeu_ps(p, tail(n), a.v); }
inline F16 keep_tail(F16 a, int64_t n) { return {_mm512_maskz_mov_ps(tail(n), a.v)}; }
// 16 fp16 values → fp32.
inline F16 load_half(const uint16_t* p) {
  return {_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)p))};
}
// 16 int8 values → fp32.
inline F16 load_i8(const int8_t* p) {
  return {_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)p)))};
}
inline F16 add(F16 a, F16 b) { return {_mm512_add_ps(a.v, b.v)}; }
inline F16 sub(F16 a, F16 b) { return {_mm512_sub_ps(a.v, b.v)}; }
inline F16 mul(F16 a, F16 b) { return {_mm512_mul_ps(a.v, b.v)}; }
inline F16 div(F16 a, F16 b) { return {_mm512_div_ps(a.v, b.v)}; }
inline F16 max(F16 a, F16 b) { return {_mm512_max_ps(a.v, b.v)}; }
inline F16 min(F16 a, F16 b) { return {_mm512_min_ps(a.v, b.v)}; }
inline F16 fmadd(F16 a, F16 b, F16 c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
inline F16 fnmadd(F16 a, F16 b, F16 c) { return {_mm512_fnmadd_ps(a.v, b.v, c.v)}; }
inline F16 round_even(F16 a) {
  return {_mm512_roundscale_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
}
inline F16 scale2(F16 p, F16 n) { return {_mm512_scalef_ps(p.v, n.v)}; }  // p · 2^n
inline float reduce_add(F16 a) { return _mm512_reduce_add_ps(a.v); }
inline float reduce_max(F16 a) { return _mm512_reduce_max_ps(a.v); }

// The horizontal sums of 16 vectors, as one vector (element r = sum of v[r]):
// a transpose-and-add tree, ~3 shuffles per sum instead of ~8 for 16 reductions.
inline F16 hsum16(const F16* v) {
  __m512 t[8], u[4];
  for (int k = 0; k < 8; ++k)  // per 128-bit lane: [a0+a2, b0+b2, a1+a3, b1+b3]
    t[k] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * k].v, v[2 * k + 1].v),
                         _mm512_unpackhi_ps(v[2 * k].v, v[2 * k + 1].v));
  for (int k = 0; k < 4; ++k) {  // per 128-bit lane: the lane's sums of v[4k..4k+3]
    const __m512d a = _mm512_castps_pd(t[2 * k]), b = _mm512_castps_pd(t[2 * k + 1]);
    u[k] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
                         _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  const __m512 x01 = _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], 0x88),
                                   _mm512_shuffle_f32x4(u[0], u[1], 0xDD));
  const __m512 x23 = _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], 0x88),
                                   _mm512_shuffle_f32x4(u[2], u[3], 0xDD));
  return {_mm512_add_ps(_mm512_shuffle_f32x4(x01, x23, 0x88),
                        _mm512_shuffle_f32x4(x01, x23, 0xDD))};
}

// Quantize 32 floats to int8 with one symmetric scale, rounding half to even
// (the default MXCSR mode, as torch.round does in kernels/llama_step/reference.py).
// Returns the scale (max |x| / 127, 0 for an all-zero block); *qsum gets Σ q.
inline float quantize32(const float* x, int8_t* q, int32_t* qsum) {
  const __m512 v0 = _mm512_loadu_ps(x);
  const __m512 v1 = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
  const __m512 inv = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
  const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, inv));
  const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, inv));
  _mm_storeu_si128((__m128i*)q, _mm512_cvtsepi32_epi8(q0));
  _mm_storeu_si128((__m128i*)(q + 16), _mm512_cvtsepi32_epi8(q1));
  *qsum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
  return amax / 127.0f;
}

#else  // AVX2: 16 lanes as [lo: 0-7, hi: 8-15]

struct F16 {
  __m256 lo, hi;
};

// The lanes of an 8-lane half holding fewer than n ≤ 8 values, as a maskload mask.
inline __m256i lanes_below(int64_t n) {
  const int k = (int)std::clamp<int64_t>(n, 0, 8);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

inline F16 zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
inline F16 set1(float x) {
  const __m256 v = _mm256_set1_ps(x);
  return {v, v};
}
inline F16 load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
inline void store(float* p, F16 a) {
  _mm256_storeu_ps(p, a.lo);
  _mm256_storeu_ps(p + 8, a.hi);
}
// Lanes [0, n) of p (n may exceed 16), the rest 0 (or fill's): never reads past them.
inline F16 load_tail(const float* p, int64_t n) {
  if (n >= 16) return load(p);
  return {_mm256_maskload_ps(p, lanes_below(n)), _mm256_maskload_ps(p + 8, lanes_below(n - 8))};
}
inline F16 load_tail_or(F16 fill, const float* p, int64_t n) {
  if (n >= 16) return load(p);
  const __m256i ml = lanes_below(n), mh = lanes_below(n - 8);
  return {_mm256_blendv_ps(fill.lo, _mm256_maskload_ps(p, ml), _mm256_castsi256_ps(ml)),
          _mm256_blendv_ps(fill.hi, _mm256_maskload_ps(p + 8, mh), _mm256_castsi256_ps(mh))};
}
inline void store_tail(float* p, F16 a, int64_t n) {
  if (n >= 16) return store(p, a);
  _mm256_maskstore_ps(p, lanes_below(n), a.lo);
  _mm256_maskstore_ps(p + 8, lanes_below(n - 8), a.hi);
}
inline F16 keep_tail(F16 a, int64_t n) {
  if (n >= 16) return a;
  return {_mm256_and_ps(a.lo, _mm256_castsi256_ps(lanes_below(n))),
          _mm256_and_ps(a.hi, _mm256_castsi256_ps(lanes_below(n - 8)))};
}
inline F16 load_half(const uint16_t* p) {
  return {_mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)p)),
          _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(p + 8)))};
}
inline F16 load_i8(const int8_t* p) {
  return {_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)p))),
          _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)(p + 8))))};
}
#define VP_F16_OP(name, op) \
  inline F16 name(F16 a, F16 b) { return {op(a.lo, b.lo), op(a.hi, b.hi)}; }
VP_F16_OP(add, _mm256_add_ps)
VP_F16_OP(sub, _mm256_sub_ps)
VP_F16_OP(mul, _mm256_mul_ps)
VP_F16_OP(div, _mm256_div_ps)
VP_F16_OP(max, _mm256_max_ps)
VP_F16_OP(min, _mm256_min_ps)
#undef VP_F16_OP
inline F16 fmadd(F16 a, F16 b, F16 c) {
  return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}
inline F16 fnmadd(F16 a, F16 b, F16 c) {
  return {_mm256_fnmadd_ps(a.lo, b.lo, c.lo), _mm256_fnmadd_ps(a.hi, b.hi, c.hi)};
}
inline F16 round_even(F16 a) {
  constexpr int r = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  return {_mm256_round_ps(a.lo, r), _mm256_round_ps(a.hi, r)};
}
// p · 2^n for integral n in [-126, 127] (exp16's range): 2^n built from its
// exponent bits, exact, so the product rounds as scalef's does.
inline __m256 pow2(__m256 n) {
  return _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
}
inline F16 scale2(F16 p, F16 n) {
  return {_mm256_mul_ps(p.lo, pow2(n.lo)), _mm256_mul_ps(p.hi, pow2(n.hi))};
}
inline float hadd8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float hmax8(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float reduce_add(F16 a) { return hadd8(_mm256_add_ps(a.lo, a.hi)); }
inline float reduce_max(F16 a) { return hmax8(_mm256_max_ps(a.lo, a.hi)); }

// Element r (of 8) = the sum of t[r]'s 8 lanes.
inline __m256 hsum8(const __m256* t) {
  const __m256 a01 = _mm256_hadd_ps(t[0], t[1]), a23 = _mm256_hadd_ps(t[2], t[3]);
  const __m256 a45 = _mm256_hadd_ps(t[4], t[5]), a67 = _mm256_hadd_ps(t[6], t[7]);
  const __m256 b0 = _mm256_hadd_ps(a01, a23), b1 = _mm256_hadd_ps(a45, a67);
  return _mm256_add_ps(_mm256_permute2f128_ps(b0, b1, 0x20), _mm256_permute2f128_ps(b0, b1, 0x31));
}
// The horizontal sums of 16 vectors, as one vector (element r = sum of v[r]).
inline F16 hsum16(const F16* v) {
  __m256 t[16];
  for (int r = 0; r < 16; ++r) t[r] = _mm256_add_ps(v[r].lo, v[r].hi);
  return {hsum8(t), hsum8(t + 8)};
}

// quantize32 as above (the same values: integer rounding and saturation agree).
inline float quantize32(const float* x, int8_t* q, int32_t* qsum) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 v[4];
  for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(x + 8 * i);
  const __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                                 _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
  const float amax = hmax8(m);
  const __m256 inv = _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
  __m256i qi[4];
  for (int i = 0; i < 4; ++i) qi[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], inv));
  // packs work per 128-bit lane, leaving the dwords (4 values each) of q0..q3 as
  // q0a q1a q2a q3a | q0b q1b q2b q3b (a: values 0-3, b: 4-7); the permute restores order.
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
  _mm256_storeu_si256((__m256i*)q,
                      _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  const __m256i s = _mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3]));
  __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
  *qsum = _mm_cvtsi128_si32(h);
  return amax / 127.0f;
}

#endif

// exp on 16 lanes: Cody-Waite range reduction, degree-6 Taylor (rel. error < 2e-7).
inline F16 exp16(F16 x) {
  x = max(min(x, set1(88.0f)), set1(-87.0f));
  const F16 n = round_even(mul(x, set1(1.4426950408889634f)));
  F16 r = fnmadd(n, set1(0.693145751953125f), x);
  r = fnmadd(n, set1(1.428606765330187e-06f), r);
  F16 p = set1(1.0f / 720);
  p = fmadd(p, r, set1(1.0f / 120));
  p = fmadd(p, r, set1(1.0f / 24));
  p = fmadd(p, r, set1(1.0f / 6));
  p = fmadd(p, r, set1(0.5f));
  p = fmadd(p, r, set1(1.0f));
  p = fmadd(p, r, set1(1.0f));
  return scale2(p, n);
}

}  // namespace simd
