"""Emulation speed of the kernel runner: wave-instructions/s and lane-instructions/s on the tiled matmul
(tests/kernels/run/matmul_tiled.cl) and a large elementwise kernel (elementwise_f32.cl).

    python tools/bench_kernels.py [--arch gfx1100] [--size N] [--profile]

Each kernel is launched once to warm up (decoding, plan building and pcode compilation happen on first use),
then timed; results are checked against numpy. --profile prints the top cProfile entries of the timed runs.
The machine is noisy, so each rate is also printed as a ratio against a baseline run in the same process: the
cost of one wave-instruction in units of one small numpy operation (a 32-lane uint32 add), the floor of any
numpy-over-lanes emulator step. Compare these ratios across runs and machines, not the absolute rates.
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from pathlib import Path

import numpy as np

from stack.codegen.opencl import compile_cl

RUN = Path(__file__).resolve().parent.parent / "tests" / "kernels" / "run"


def matmul(gpu, arch: str, size: int):
    m = n = k = size
    rng = np.random.default_rng(0)
    a = rng.integers(-8, 9, (m, k)).astype(np.float32)
    b = rng.integers(-8, 9, (k, n)).astype(np.float32)
    prog = gpu.load(compile_cl((RUN / "matmul_tiled.cl").read_text(), arch))
    bufs = [gpu.alloc(x.nbytes) for x in (a, b, a @ b)]
    gpu.write(bufs[0], a)
    gpu.write(bufs[1], b)
    grid = (-(-n // 16), -(-m // 16))

    def run():
        return gpu.launch(prog, "matmul_tiled", grid=grid, block=(16, 16),
                          args=[*bufs, np.int32(m), np.int32(n), np.int32(k)])

    def check():
        got = np.frombuffer(gpu.read(bufs[2]), np.float32).reshape(m, n)
        assert np.array_equal(got, a @ b), "matmul result differs from numpy"
    return run, check


def elementwise(gpu, arch: str, size: int):
    n = size * size * 4
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    prog = gpu.load(compile_cl((RUN / "elementwise_f32.cl").read_text(), arch))
    bufs = [gpu.alloc(n * 4) for _ in range(3)]
    gpu.write(bufs[0], a)
    gpu.write(bufs[1], b)

    def run():
        return gpu.launch(prog, "ew_f32", grid=(-(-n // 256),), block=(256,), args=[*bufs, np.int32(n)])

    def check():
        ref = ((a + b) * (a - b)) - np.fmin(a, b) * np.float32(0.25)
        assert np.array_equal(np.frombuffer(gpu.read(bufs[2]), np.float32), ref), "ew_f32 differs from numpy"
    return run, check


def numpy_op_seconds(reps: int = 200_000) -> float:
    """Baseline: seconds per small numpy operation (one 32-lane uint32 add into a preallocated array)."""
    x, y, z = (np.arange(32, dtype=np.uint32) for _ in range(3))
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(reps):
            np.add(x, y, out=z)
        best = min(best, (time.perf_counter() - t) / reps)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", default="gfx1100")
    ap.add_argument("--size", type=int, default=64, help="matrix size (elementwise: 4*size*size elements)")
    ap.add_argument("--profile", action="store_true", help="print the top cProfile entries")
    a = ap.parse_args()
    from emu.amd import GPU
    gpu = GPU(a.arch)
    base = numpy_op_seconds()
    print(f"baseline: {base * 1e9:.0f} ns per small numpy op")
    prof = cProfile.Profile() if a.profile else None
    for name, make in (("matmul_tiled", matmul), ("ew_f32", elementwise)):
        run, check = make(gpu, a.arch, a.size)
        run()  # warm-up: decode, plans, pcode compilation
        if prof:
            prof.enable()
        t = time.perf_counter()
        stats = run()
        dt = time.perf_counter() - t
        if prof:
            prof.disable()
        check()
        print(f"{a.arch} {name:13s} {stats.waves:5d} waves {stats.wave_instructions:9d} wave-instr "
              f"{stats.lane_instructions:10d} lane-instr in {dt:7.2f} s: "
              f"{stats.wave_instructions / dt:9.0f} wave-instr/s {stats.lane_instructions / dt:11.0f} lane-instr/s, "
              f"{dt / stats.wave_instructions / base:5.1f} numpy ops per wave-instr")
    if prof:
        pstats.Stats(prof).sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()
