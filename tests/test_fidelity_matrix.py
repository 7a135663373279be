"""Matrix instructions end to end (issue 13, item 5): clang-19 kernels calling __builtin_amdgcn_wmma_* (gfx1100,
gfx1201) and __builtin_amdgcn_mfma_* (gfx942) run on the emulated GPUs and match numpy matmuls. The kernels place
operands by the lane layouts AMD publishes (GPUOpen's RDNA3 WMMA guide, the AMD matrix instruction calculator);
inputs are small integers, so every product and sum is exact and the result does not depend on summation order."""
from __future__ import annotations

import numpy as np
import pytest
from test_kernels import launch, result

from stack.codegen import opencl

pytestmark = pytest.mark.skipif(not opencl.available(), reason="clang-19 and ld.lld-19 are needed to build kernels")

KERNELS = {
"gfx1100": """
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
typedef half half16 __attribute__((ext_vector_type(16)));
typedef float float8v __attribute__((ext_vector_type(8)));
kernel void mm(global const half *A, global const half *B, global const float *C, global float *D) {
  int l = get_local_id(0), r = l % 16, hi = l / 16;
  half16 a, b; float8v c;
  for (int i = 0; i < 16; i++) { a[i] = A[16 * r + i]; b[i] = B[16 * i + r]; }
  for (int i = 0; i < 8; i++) c[i] = C[16 * (2 * i + hi) + r];
  float8v d = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(a, b, c);
  for (int i = 0; i < 8; i++) D[16 * (2 * i + hi) + r] = d[i];
}""",
"gfx1201": """
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
typedef half half8v __attribute__((ext_vector_type(8)));
typedef float float8v __attribute__((ext_vector_type(8)));
kernel void mm(global const half *A, global const half *B, global const float *C, global float *D) {
  int l = get_local_id(0), r = l % 16, hi = l / 16;
  half8v a, b; float8v c;
  for (int i = 0; i < 8; i++) { a[i] = A[16 * r + 8 * hi + i]; b[i] = B[16 * (8 * hi + i) + r]; }
  for (int i = 0; i < 8; i++) c[i] = C[16 * (i + 8 * hi) + r];
  float8v d = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(a, b, c);
  for (int i = 0; i < 8; i++) D[16 * (i + 8 * hi) + r] = d[i];
}""",
"gfx942": """
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
typedef half half4v __attribute__((ext_vector_type(4)));
typedef float float16v __attribute__((ext_vector_type(16)));
kernel void mm(global const half *A, global const half *B, global const float *C, global float *D) {
  int l = get_local_id(0), r = l % 32, hi = l / 32;
  half4v a, b; float16v c;
  for (int i = 0; i < 4; i++) { a[i] = A[8 * r + 4 * hi + i]; b[i] = B[32 * (4 * hi + i) + r]; }
  for (int i = 0; i < 16; i++) c[i] = C[32 * (8 * (i / 4) + 4 * hi + i % 4) + r];
  float16v d = __builtin_amdgcn_mfma_f32_32x32x8f16(a, b, c, 0, 0, 0);
  for (int i = 0; i < 16; i++) D[32 * (8 * (i / 4) + 4 * hi + i % 4) + r] = d[i];
}""",
}
SHAPE = {"gfx1100": (16, 16, 16), "gfx1201": (16, 16, 16), "gfx942": (32, 32, 8)}  # M, N, K


@pytest.mark.parametrize("arch", sorted(KERNELS))
def test_matrix_builtin_matches_numpy(arch):
    M, N, K = SHAPE[arch]
    rng = np.random.default_rng(3)
    a = rng.integers(-8, 9, (M, K)).astype(np.float16)
    b = rng.integers(-8, 9, (K, N)).astype(np.float16)
    c = rng.integers(-64, 65, (M, N)).astype(np.float32)
    lanes = 64 if arch == "gfx942" else 32
    gpu, bufs = launch(arch, opencl.compile_cl(KERNELS[arch], arch), "mm", (1,), (lanes,), a, b, c,
                       np.zeros((M, N), np.float32))
    d = result(gpu, bufs[3], np.zeros((M, N), np.float32)).reshape(M, N)
    np.testing.assert_array_equal(d, a.astype(np.float32) @ b.astype(np.float32) + c)
