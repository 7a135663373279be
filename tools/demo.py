"""The main job on the embedded default: a clang-19-compiled OpenCL kernel on the emulated gfx1100.

Compiles saxpy for gfx1100, prints hwemu's disassembly of it, runs it on the emulated GPU and checks the
result against numpy. Exit status 0 when it matches, 1 when it does not, 2 when a tool is missing.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from stack.codegen.opencl import CompileError, compile_cl

SAXPY = """
__kernel void saxpy(__global float *y, __global const float *x, float a, uint n) {
  size_t i = get_global_id(0);
  if (i < n) y[i] = a * x[i] + y[i];
}
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="gfx1100")
    ap.add_argument("-n", type=int, default=1000, help="elements")
    args = ap.parse_args(argv)
    try:
        code = compile_cl(SAXPY, args.arch)
    except CompileError as e:
        print(f"demo: {e}", file=sys.stderr)
        return 2

    from emu.amd import GPU, decode
    from stack.hcq.codeobj import CodeObject

    kernel = CodeObject.parse(code).kernels["saxpy"]
    print(f"saxpy for {args.arch}: {len(kernel.code)} bytes of code")
    for inst in decode(kernel.code, args.arch, pc=kernel.entry):
        print(f"  {inst.pc:#06x}: {inst}")

    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(args.n, dtype=np.float32), rng.standard_normal(args.n, dtype=np.float32)
    a = np.float32(2.5)
    gpu = GPU(args.arch)
    xb, yb = gpu.alloc(x.nbytes), gpu.alloc(y.nbytes)
    gpu.write(xb, x)
    gpu.write(yb, y)
    block = 256
    gpu.launch(gpu.load(code), "saxpy", grid=((args.n + block - 1) // block,), block=(block,),
               args=[yb, xb, a, np.uint32(args.n)])
    got = np.frombuffer(gpu.read(yb), np.float32)
    want = a * x + y  # v_fma_f32 or mul+add: both within 1 ulp of numpy's mul-then-add
    ok = np.allclose(got, want, rtol=1e-6, atol=1e-6)
    print(f"ran saxpy on the emulated {args.arch}: {args.n} elements, "
          f"max |error| vs numpy {np.max(np.abs(got - want)):.3g}: {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
