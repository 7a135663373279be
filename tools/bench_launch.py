"""Per-launch overhead of the whole hardware path against the direct runner, measured in one run.

A one-workgroup empty kernel (clang-19, OpenCL C) is launched N times (a) with the direct runner
(`emu.amd.GPU.launch`, a Python call into the dispatcher) and (b) through `stack.Device` on MOCKKFD: kernargs,
PM4 packets into the ring, doorbell store, the device engine thread polling the doorbell and running the CP,
RELEASE_MEM + event, the host waiting. (b) is timed both as a stream of launches with one synchronize at the end
and as launch+synchronize each. Prints launches/s and the ratios to (a); the machine is noisy, so only ratios
within one run mean anything.

    python tools/bench_launch.py [--arch gfx1100] [-n 200]
"""
from __future__ import annotations

import argparse
import sys
import time

EMPTY = "__kernel void empty(__global int *p) { }\n"


def rate(fn, n: int) -> float:
    fn()  # warm up: decode, plan, first queue
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return n / (time.perf_counter() - t)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="gfx1100")
    ap.add_argument("-n", type=int, default=200, help="launches per measurement")
    args = ap.parse_args(argv)
    from stack.codegen.opencl import CompileError, compile_cl
    try:
        code = compile_cl(EMPTY, args.arch)
    except CompileError as e:
        print(f"bench_launch: {e}", file=sys.stderr)
        return 2
    from emu.amd import GPU
    from stack import Device

    gpu = GPU(args.arch)
    buf, prog = gpu.alloc(4096), gpu.load(code)
    direct = rate(lambda: gpu.launch(prog, "empty", grid=(1,), block=(1,), args=[buf]), args.n)

    dev = Device(f"MOCKKFD+AMD:{args.arch}")
    dbuf, dprog = dev.alloc(4096), dev.program(code, "empty")

    def stream() -> None:
        for _ in range(args.n):
            dprog(dbuf, global_size=(1,), local_size=(1,))
        dev.synchronize()

    def one() -> None:
        dprog(dbuf, global_size=(1,), local_size=(1,))
        dev.synchronize()
    streamed = rate(stream, 1) * args.n
    synced = rate(one, args.n)
    print(f"{args.arch}, 1-workgroup empty kernel, {args.n} launches each")
    print(f"  direct runner (GPU.launch)             {direct:10.0f} launches/s  1.00x")
    print(f"  MOCKKFD path, launches then one sync   {streamed:10.0f} launches/s  {streamed / direct:.2f}x")
    print(f"  MOCKKFD path, launch + sync each       {synced:10.0f} launches/s  {synced / direct:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
