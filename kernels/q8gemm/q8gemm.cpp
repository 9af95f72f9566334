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
// Requirements (checked): x fp32 contiguous, w int8 contiguous, scale fp32,
// K % 32 == 0.
#include "../torch_binding.h"

#include "q8gemm.h"

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
    q8::gemm_range(xp, wp, sp, yp, M, K, N, n0, n1);
  });
  return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("q8_gemm", &q8_gemm, "y = x @ (w * scale[:, None]).T for a few fp32 rows, int8 w");
}
