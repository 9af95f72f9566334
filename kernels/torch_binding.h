// What kernels/llama_step needs of torch for its Python binding, and no more (the other
// kernels are plain C over raw pointers, loaded with ctypes: no torch header at all).
//
// <torch/extension.h> pulls in the whole C++ frontend (autograd, nn, optim):
// ~50 s of a first build's ~70 s on this CPU went to parsing it, on the
// critical path of a fresh machine's start-up. These headers give at::Tensor,
// at::empty, at::zeros, at::parallel_for and pybind11's tensor and STL casters in ~20 s.
#pragma once
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

// The kernels spell ATen's names the C++ frontend's way (torch::Tensor,
// torch::kFloat, torch::empty); the frontend's names are ATen's.
namespace torch {
using namespace at;  // NOLINT(google-build-using-namespace)
}  // namespace torch
