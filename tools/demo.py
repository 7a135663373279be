"""The main job on the embedded default: a clang-19-compiled OpenCL kernel on the emulated gfx1100 behind MOCKKFD.

Compiles saxpy for gfx1100 and prints hwemu's disassembly of it; then runs it through the whole hardware path:
`stack.Device()` on DEV (default MOCKKFD+AMD) opens /dev/kfd through the mock, copies the inputs in by SDMA,
launches with PM4 (registers, DISPATCH_DIRECT, RELEASE_MEM + event), waits, copies the result out by SDMA, checks
it against numpy and prints what went through the driver and the GPU. Exit status 0 when it matches, 1 when it
does not, 2 when a tool is missing.
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
    ap.add_argument("--arch", default=None, help="chip of the mock GPU (default: from DEV, else gfx1100)")
    ap.add_argument("-n", type=int, default=1000, help="elements")
    args = ap.parse_args(argv)
    from stack import Device
    dev = Device(f"MOCKKFD+AMD:{args.arch}" if args.arch else None)
    args.arch = dev.arch
    try:
        code = compile_cl(SAXPY, args.arch)
    except CompileError as e:
        print(f"demo: {e}", file=sys.stderr)
        return 2

    from emu.amd import decode
    from objfile.codeobj import CodeObject

    kernel = CodeObject.parse(code).kernels["saxpy"]
    print(f"saxpy for {args.arch}: {len(kernel.code)} bytes of code")
    for inst in decode(kernel.code, args.arch, pc=kernel.entry):
        print(f"  {inst.pc:#06x}: {inst}")

    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(args.n, dtype=np.float32), rng.standard_normal(args.n, dtype=np.float32)
    a = np.float32(2.5)
    xb, yb = dev.alloc(x.nbytes), dev.alloc(y.nbytes)
    dev.copyin(xb, x)
    dev.copyin(yb, y)
    block = 256
    dev.program(code, "saxpy")(yb, xb, a, np.uint32(args.n), global_size=((args.n + block - 1) // block,),
                               local_size=(block,))
    got = np.frombuffer(dev.copyout(yb), np.float32)
    want = a * x + y  # v_fma_f32 or mul+add: both within 1 ulp of numpy's mul-then-add
    ok = np.allclose(got, want, rtol=1e-6, atol=1e-6)
    print(f"ran saxpy on {dev.name}: {args.n} elements, max |error| vs numpy "
          f"{np.max(np.abs(got - want)):.3g}: {'OK' if ok else 'MISMATCH'}")
    from emu.os import systems
    for system in systems():
        print("through the driver and the GPU: " + ", ".join(f"{k} {v}" for k, v in system.summary().items()))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
