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

KERNEL = """#pragma OPENCL EXTENSION cl_khr_fp16 : enable
typedef half hv __attribute__((ext_vector_type({ka})));
typedef float fv __attribute__((ext_vector_type({kd})));
kernel void mm(global const half *A, global const half *B, global const float *C, global float *D) {{
  int l = get_local_id(0), r = l % {rows}, hi = l / {rows};
  hv a, b; fv c;
  for (int i = 0; i < {ka}; i++) {{ a[i] = A[{a}]; b[i] = B[{b}]; }}
  for (int i = 0; i < {kd}; i++) c[i] = C[{d}];
  fv d = {call}(a, b, c{extra});
  for (int i = 0; i < {kd}; i++) D[{d}] = d[i];
}}"""
# per lane l (r = l % rows, hi = l / rows): element i of A, B and C/D, as row-major indices
LAYOUTS = {
    "gfx1100": dict(ka=16, kd=8, rows=16, a="16 * r + i", b="16 * i + r", d="16 * (2 * i + hi) + r",
                    call="__builtin_amdgcn_wmma_f32_16x16x16_f16_w32", extra=""),
    "gfx1201": dict(ka=8, kd=8, rows=16, a="16 * r + 8 * hi + i", b="16 * (8 * hi + i) + r", d="16 * (i + 8 * hi) + r",
                    call="__builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12", extra=""),
    "gfx942": dict(ka=4, kd=16, rows=32, a="8 * r + 4 * hi + i", b="32 * (4 * hi + i) + r",
                   d="32 * (8 * (i / 4) + 4 * hi + i % 4) + r", call="__builtin_amdgcn_mfma_f32_32x32x8f16",
                   extra=", 0, 0, 0"),
}
KERNELS = {arch: KERNEL.format(**lay) for arch, lay in LAYOUTS.items()}
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
