// Weight-only int8 GEMM for a few rows: y (M, N) = x (M, K) · (w (N, K) int8 · scale (N))ᵀ.
//
// Why: decode and speculative verification are memory-bound, and torch's
// _weight_int8pack_mm re-reads the whole weight for every row of x, so
// verifying K+1 positions costs ~K+1 decodes. Here each weight row is read
// once for up to 8 rows of x (AVX-512: int8 → fp32 in registers, FMA).
//
// Batch invariance: every output element is accumulated the same way (two
// interleaved 16-lane partial sums over k, then a fixed reduction) whatever
// M is, so row m of a 5-row call is bit-identical to a 1-row call. Greedy
// speculative decoding stays token-identical to plain greedy decoding.
//
// Requirements (checked): x fp32 contiguous, w int8 contiguous, scale fp32,
// K % 32 == 0.
#include <ATen/Parallel.h>
#include <immintrin.h>
#include <torch/extension.h>

namespace {

template <int MB>
void block(const float* x, const int8_t* w, const float* scale, float* y, int64_t K, int64_t N,
           int64_t n0, int64_t n1) {
  for (int64_t n = n0; n < n1; ++n) {
    const int8_t* wr = w + n * K;
    __m512 a0[MB], a1[MB];
    for (int i = 0; i < MB; ++i) {
      a0[i] = _mm512_setzero_ps();
      a1[i] = _mm512_setzero_ps();
    }
    for (int64_t k = 0; k < K; k += 32) {
      __m512 w0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)(wr + k))));
      __m512 w1 =
          _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)(wr + k + 16))));
      for (int i = 0; i < MB; ++i) {
        a0[i] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + i * K + k), a0[i]);
        a1[i] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + i * K + k + 16), a1[i]);
      }
    }
    for (int i = 0; i < MB; ++i) {
      y[i * N + n] = _mm512_reduce_add_ps(_mm512_add_ps(a0[i], a1[i])) * scale[n];
    }
  }
}

void rows(int mb, const float* x, const int8_t* w, const float* s, float* y, int64_t K, int64_t N,
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

}  // namespace

torch::Tensor q8_gemm(torch::Tensor x, torch::Tensor w, torch::Tensor scale) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat && x.is_contiguous(),
              "x must be a contiguous (M, K) float32 tensor");
  TORCH_CHECK(w.dim() == 2 && w.scalar_type() == torch::kChar && w.is_contiguous(),
              "w must be a contiguous (N, K) int8 tensor");
  TORCH_CHECK(scale.scalar_type() == torch::kFloat && scale.numel() == w.size(0),
              "scale must be (N,) float32");
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  TORCH_CHECK(w.size(1) == K && K % 32 == 0, "K must match and be a multiple of 32");
  auto y = torch::empty({M, N}, x.options());
  const float* xp = x.data_ptr<float>();
  const int8_t* wp = w.data_ptr<int8_t>();
  const float* sp = scale.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  at::parallel_for(0, N, 16, [&](int64_t n0, int64_t n1) {
    for (int64_t m0 = 0; m0 < M; m0 += 8) {
      int mb = (int)std::min<int64_t>(8, M - m0);
      rows(mb, xp + m0 * K, wp, sp, yp + m0 * N, K, N, n0, n1);
    }
  });
  return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("q8_gemm", &q8_gemm, "y = x @ (w * scale[:, None]).T for a few fp32 rows, int8 w");
}
