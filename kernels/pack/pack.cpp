// Weight preparation at load: GGUF K-quant blocks to fp32, and fp32 weights into
// the fused step's int4 layout (kernels/llama_step/q4a8.h).
//
// Dequantization: the same float operations as voicepipe.nn.llm.dequant's torch
// code (its reference, itself bit-identical to the gguf package), block by
// block in one pass; built with -ffp-contract=off so a multiply and a subtract
// stay two roundings, as there. The 1.5B's 1.8 G weights took 20-50 s in torch's
// dozen passes per tensor.
//
// Packing: // the same numbers as voicepipe.nn.llm.qlinear.pack_q4_reference (torch ops, the
// reference this is tested against), computed in one pass per 16-output group
// instead of a dozen whole-matrix passes: packing the 1.5B spent ~50-80 s in
// those passes on a first start, on the critical path of a fresh machine.
//
// Per output row and block of 32 inputs: lo = min, d = fp16((max - lo) / 15),
// m = fp16(lo), q = clamp(round_half_even((x - m) / d), 0, 15) (0 where d is 0),
// each step the float32 operation the reference does, in its order, so the
// result is bit-identical. Layout: see pack_q4_reference's docstring.
//
// Plain C functions over raw pointers, loaded with ctypes (voicepipe/nn/kernels.py):
// no torch header is parsed, so the compile takes seconds instead of ~40 s on a
// fresh machine's critical path. The Python side checks dtypes, shapes and
// contiguity and allocates the outputs (nibbles and m zeroed: padded outputs keep
// their zeros); threads: OpenMP, as many as torch.get_num_threads() says.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace {

constexpr int64_t kBlock = 32;

void pack_group(const float* w, int64_t n, int64_t k, int64_t g, uint8_t* nib, float* d,
                uint16_t* mt) {
  const int64_t nb = k / kBlock;
  for (int r = 0; r < 16; ++r) {
    const int64_t row = g * 16 + r;
    if (row >= n) break;  // padded outputs keep their zeros
    for (int64_t b = 0; b < nb; ++b) {
      const float* x = w + row * k + b * kBlock;
      float lo = x[0], hi = x[0];
      for (int t = 1; t < kBlock; ++t) {
        lo = std::min(lo, x[t]);
        hi = std::max(hi, x[t]);
      }
      const uint16_t dh = _cvtss_sh((hi - lo) / 15.0f, _MM_FROUND_TO_NEAREST_INT);
      const uint16_t mh = _cvtss_sh(lo, _MM_FROUND_TO_NEAREST_INT);
      const float df = _cvtsh_ss(dh), mf = _cvtsh_ss(mh);
      const float div = std::max(df, 1e-30f);
      uint8_t* blk = nib + (g * nb + b) * 256;
      for (int t = 0; t < kBlock; ++t) {
        float q = df > 0.0f ? std::nearbyint((x[t] - mf) / div) : 0.0f;
        q = std::min(std::max(q, 0.0f), 15.0f);
        const int p = (t / 4) * 64 + r * 4 + t % 4;  // byte of the 512-byte tile
        blk[p & 255] |= (uint8_t)((uint8_t)q << (p < 256 ? 0 : 4));
      }
      d[row * nb + b] = df;
      mt[(g * nb + b) * 16 + r] = mh;
    }
  }
}

inline float f16(const uint8_t* p) { return _cvtsh_ss((uint16_t)(p[0] | (p[1] << 8))); }

// One Q4_K block (144 bytes: d, dmin, 12 bytes of 6-bit scales and mins, 128 of
// nibbles) into 256 floats.
void q4_k_block(const uint8_t* b, float* y) {
  const float d = f16(b), dmin = f16(b + 2);
  const uint8_t *lo = b + 4, *hi = b + 8, *mix = b + 12, *qs = b + 16;
  for (int j = 0; j < 8; ++j) {
    // Sub-blocks 0-3: the low 6 bits of lo/hi; 4-7: mix's nibbles plus lo/hi's top bits.
    const int sc = j < 4 ? (lo[j] & 0x3F) : ((mix[j - 4] & 0x0F) | ((lo[j - 4] >> 2) & 0x30));
    const int mn = j < 4 ? (hi[j] & 0x3F) : ((mix[j - 4] >> 4) | ((hi[j - 4] >> 2) & 0x30));
    const float dl = d * (float)sc, ml = dmin * (float)mn;
    const uint8_t* q = qs + (j / 2) * 32;  // even: low nibbles, odd: high
    const int shift = (j % 2) * 4;
    for (int i = 0; i < 32; ++i) y[j * 32 + i] = dl * (float)((q[i] >> shift) & 0x0F) - ml;
  }
}

// One Q6_K block (210 bytes: 128 of low nibbles, 64 of 2-bit highs, 16 int8 scales,
// d) into 256 floats.
void q6_k_block(const uint8_t* b, float* y) {
  const uint8_t *ql = b, *qh = b + 128;
  const int8_t* sc = (const int8_t*)(b + 192);
  const float d = f16(b + 208);
  for (int h = 0; h < 2; ++h)
    for (int s = 0; s < 4; ++s)
      for (int i = 0; i < 32; ++i) {
        const int f = h * 128 + s * 32 + i;
        const uint8_t l = s < 2 ? (ql[h * 64 + s * 32 + i] & 0x0F) : (ql[h * 64 + (s - 2) * 32 + i] >> 4);
        const uint8_t u = (qh[h * 32 + i] >> (2 * s)) & 0x03;
        const int q = (int)(int8_t)(uint8_t)(l | (u << 4)) - 32;
        y[f] = (d * (float)sc[f / 16]) * (float)q;
      }
}

template <void (*Block)(const uint8_t*, float*), int64_t kBytes>
void dequant(const uint8_t* raw, int64_t n, float* y, int threads) {
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && n >= 512)
  for (int64_t i = 0; i < n; ++i) Block(raw + i * kBytes, y + i * 256);
}

}  // namespace

extern "C" {

// w (n, k) fp32, k % 32 == 0 -> nib (ceil(n/16), k/32, 256) uint8 zeroed, d (n, k/32)
// fp32, m (ceil(n/16), k/32, 16) fp16 bits zeroed.
void vp_pack_q4(const float* w, int64_t n, int64_t k, uint8_t* nib, float* d, uint16_t* m,
                int threads) {
  const int64_t ng = (n + 15) / 16;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1 && ng >= 16)
  for (int64_t g = 0; g < ng; ++g) pack_group(w, n, k, g, nib, d, m);
}

// n Q4_K blocks (144 bytes each) -> n * 256 fp32.
void vp_dequant_q4_k(const uint8_t* raw, int64_t n, float* y, int threads) {
  dequant<q4_k_block, 144>(raw, n, y, threads);
}

// n Q6_K blocks (210 bytes each) -> n * 256 fp32.
void vp_dequant_q6_k(const uint8_t* raw, int64_t n, float* y, int threads) {
  dequant<q6_k_block, 210>(raw, n, y, threads);
}

}  // extern "C"
