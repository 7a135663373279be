"""Wave-engine speed per execution tier: one table measured in one run, with ratios against the reference tier.

    python -m tools.bench [--arch gfx1100] [--only matmul,add,...] [--tiers ref,interp,jit,auto] [--quick]
                          [--profile [TIER]]

Workloads (OpenCL C compiled by clang-19; every launch's result is checked against numpy):
  matmul  tiled 256x256 f32 matmul through LDS (tests/kernels/run/matmul_tiled.cl: 16x16 tiles, barriers)
  add     c = a + b over 1,048,576 f32 (4,096 workgroups of 256: 32,768 wave32 waves; per-wave cost)
  sum     sum of 1,048,576 integer-valued f32 through LDS (a tree per workgroup, applied again to the partials)
  fma     ALU-bound: 1000 dependent fma() per work-item
  cold    100 distinct small kernels (256 items each), each loaded and launched once: cold cost per kernel,
          decode and any engine compile included, clang excluded (all are compiled before the timing starts)
The kernels are in tools/kernels/bench.cl; the cold ones are generated here, with constants drawn anew every run
and per tier, so that no tier is served by a compile cache another run or tier filled.

The tier is chosen by HWEMU_TIER, read when a code object is loaded; tiers the engine does not have
(emu.amd.exec.TIERS) print n/a. The reference tier runs a reduced problem of the same kernel (named in the
`problem` column), so tiers are compared by rates (per wave-instruction, per wave), never by wall time. Each
(workload, tier) is launched once to warm up; then the tiers are timed in turn for 3 to 7 rounds (ROUNDS) and each
keeps its fastest launch (the machines are noisy: that gives every tier the same chances), except `cold`. The first
line is the time to the end of the process's first launch (clang excluded), in whatever tier HWEMU_TIER gives at
start.
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import random
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from stack.codegen.opencl import compile_cl

if TYPE_CHECKING:  # emu is imported at run time only once the first launch is being timed
    from emu.amd import GPU, Buffer
    from emu.amd.dispatch import Stats

ROOT = Path(__file__).resolve().parent.parent
BENCH_CL = ROOT / "tools" / "kernels" / "bench.cl"
MATMUL_CL = ROOT / "tests" / "kernels" / "run" / "matmul_tiled.cl"
TIER_NAMES = ("ref", "interp", "threaded", "jit", "auto")
WORKLOADS = ("matmul", "add", "sum", "fma", "cold")
BLOCK = 256  # work-items per workgroup (1-D workloads)
ROUNDS = (3, 7, 20.0)  # timed rounds of a hot workload: at least 3, up to 7 while they took under 20 s (--quick: 1)
FMA_ITERS = 1000  # FMA_ITERS in bench.cl

# Problem sizes per scale: "full" for the fast tiers, "ref" (reduced) for the reference tier, "quick" (smoke test).
# matmul: (matrix size, workgroups run); add: (elements, workgroups run); sum: elements; fma: workgroups;
# cold: kernels.
SIZES: dict[str, dict[str, object]] = {
    "matmul": {"full": (256, (16, 16)), "ref": (256, (2, 1)), "quick": (32, (2, 2))},
    "add": {"full": (1 << 20, 4096), "ref": (1 << 20, 128), "quick": (4096, 16)},
    "sum": {"full": 1 << 20, "ref": 1 << 15, "quick": 4096},
    "fma": {"full": 128, "ref": 2, "quick": 1},
    "cold": {"full": 100, "ref": 100, "quick": 3},
}


@dataclass
class Work:
    """What launches did (summed from their stats) and how long they took."""
    waves: int = 0
    wave_instructions: int = 0
    lane_instructions: int = 0
    seconds: float = 0.0

    def add(self, stats: Stats) -> None:
        self.waves += stats.waves
        self.wave_instructions += stats.wave_instructions
        self.lane_instructions += stats.lane_instructions


@dataclass
class Case:
    """A loaded workload: `launch` runs it and returns the work done; `check` compares the result with numpy and
    clears it, so that the next launch is checked on its own output."""
    problem: str
    launch: Callable[[], Work]
    check: Callable[[], None]


@dataclass
class Row:
    workload: str
    tier: str
    problem: str = ""
    work: Work | None = None
    cold_ms: list[float] | None = None  # per-kernel load+launch times (the cold workload)
    error: str = ""  # "n/a" (tier missing) or why the run failed


class Mismatch(AssertionError):
    pass


def _expect(got: np.ndarray, want: np.ndarray, what: str) -> None:
    if not np.array_equal(got, want):
        bad = int(np.count_nonzero(got != want))
        raise Mismatch(f"{what}: {bad} of {want.size} values differ from numpy")


def _f32(gpu: GPU, buf: Buffer, n: int | None = None) -> np.ndarray:
    return np.frombuffer(gpu.read(buf, None if n is None else 4 * n), np.float32)


def _upload(gpu: GPU, *arrays: np.ndarray) -> list[Buffer]:
    bufs = []
    for x in arrays:
        bufs.append(gpu.alloc(x.nbytes))
        gpu.write(bufs[-1], x)
    return bufs


# -- workloads ------------------------------------------------------------------------------------------------
def matmul_case(gpu: GPU, code: dict[str, bytes], size: tuple[int, tuple[int, int]]) -> Case:
    n, grid = size
    rng = np.random.default_rng(0)
    a, b = (rng.integers(-8, 9, (n, n)).astype(np.float32) for _ in range(2))  # every partial sum exact
    bufs = _upload(gpu, a, b, np.zeros((n, n), np.float32))
    prog = gpu.load(code["matmul"])
    rows, cols = 16 * grid[1], 16 * grid[0]  # the part of C the launched workgroups compute

    def launch() -> Work:
        w = Work()
        w.add(gpu.launch(prog, "matmul_tiled", grid=grid, block=(16, 16), args=[*bufs, *map(np.int32, (n, n, n))]))
        return w

    def check() -> None:
        _expect(_f32(gpu, bufs[2]).reshape(n, n)[:rows, :cols], (a @ b)[:rows, :cols], "matmul")
        gpu.write(bufs[2], np.zeros((n, n), np.float32))
    total = (n // 16) ** 2
    part = "" if grid[0] * grid[1] == total else f", {grid[0] * grid[1]}/{total} wgs ({rows}x{cols} of C)"
    return Case(f"{n}x{n}{part}", launch, check)


def add_case(gpu: GPU, code: dict[str, bytes], size: tuple[int, int]) -> Case:
    n, groups = size
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    bufs = _upload(gpu, a, b, np.zeros(n, np.float32))
    prog = gpu.load(code["bench"])
    done = min(n, groups * BLOCK)

    def launch() -> Work:
        w = Work()
        w.add(gpu.launch(prog, "add_f32", grid=(groups,), block=(BLOCK,), args=[*bufs, np.int32(n)]))
        return w

    def check() -> None:
        _expect(_f32(gpu, bufs[2], done), (a + b)[:done], "add")
        gpu.write(bufs[2], np.zeros(n, np.float32))
    part = "" if done == n else f", {groups}/{-(-n // BLOCK)} wgs"
    return Case(f"{n:,} f32{part}", launch, check)


def sum_case(gpu: GPU, code: dict[str, bytes], n: int) -> Case:
    x = np.random.default_rng(2).integers(0, 16, n).astype(np.float32)  # total < 2^24: exact in any order
    sizes = [n]
    while sizes[-1] > 1:
        sizes.append(-(-sizes[-1] // BLOCK))
    bufs = [_upload(gpu, x)[0]] + [gpu.alloc(4 * m) for m in sizes[1:]]
    prog = gpu.load(code["bench"])

    def launch() -> Work:
        w = Work()
        for i, m in enumerate(sizes[:-1]):  # one pass per level: m values -> ceil(m / 256) partial sums
            w.add(gpu.launch(prog, "sum_f32", grid=(sizes[i + 1],), block=(BLOCK,),
                             args=[bufs[i], bufs[i + 1], np.int32(m)]))
        return w

    def check() -> None:
        _expect(_f32(gpu, bufs[-1]), np.array([x.sum(dtype=np.float64)], np.float32), "sum")
        gpu.write(bufs[-1], np.zeros(1, np.float32))
    return Case(f"{n:,} f32, {len(sizes) - 1} passes", launch, check)


def fma_case(gpu: GPU, code: dict[str, bytes], groups: int) -> Case:
    n = groups * BLOCK
    rng = np.random.default_rng(3)
    a = (rng.integers(-14, 15, n) / 16).astype(np.float32)  # |a| < 1 with 4 significant bits: numpy is exact
    b = rng.standard_normal(n).astype(np.float32)
    bufs = _upload(gpu, a, b, np.zeros(n, np.float32))
    prog = gpu.load(code["bench"])

    def launch() -> Work:
        w = Work()
        w.add(gpu.launch(prog, "fma_chain", grid=(groups,), block=(BLOCK,), args=bufs))
        return w

    def check() -> None:
        want, a64, b64 = b.copy(), a.astype(np.float64), b.astype(np.float64)
        for _ in range(FMA_ITERS):  # a*x + b is exact in float64: one rounding, as fma
            want = (want.astype(np.float64) * a64 + b64).astype(np.float32)
        _expect(_f32(gpu, bufs[2]), want, "fma")
        gpu.write(bufs[2], np.zeros(n, np.float32))
    return Case(f"{groups} wgs x {FMA_ITERS} fma", launch, check)


HOT: dict[str, Callable[..., Case]] = {"matmul": matmul_case, "add": add_case, "sum": sum_case, "fma": fma_case}

# -- the cold workload: generated kernels out = f(g(x, y), C) ---------------------------------------------------
UINT_OPS: tuple[tuple[str, Callable], ...] = (
    ("{x} + {y}", lambda x, y: x + y), ("{x} - {y}", lambda x, y: x - y), ("{x} * {y}", lambda x, y: x * y),
    ("{x} ^ {y}", lambda x, y: x ^ y), ("({x} < {y} ? {x} : {y})", np.minimum),
    ("({x} > {y} ? {x} : {y})", np.maximum), ("{x} << ({y} & 31u)", lambda x, y: x << (y & np.uint32(31))),
    ("{x} >> ({y} & 31u)", lambda x, y: x >> (y & np.uint32(31))),
)
FLOAT_OPS: tuple[tuple[str, Callable], ...] = (
    ("{x} + {y}", lambda x, y: x + y), ("{x} - {y}", lambda x, y: x - y), ("{x} * {y}", lambda x, y: x * y),
    ("fmin({x}, {y})", np.fmin), ("fmax({x}, {y})", np.fmax), ("copysign({x}, {y})", np.copysign),
)
COLD_CL = """#pragma OPENCL FP_CONTRACT OFF
kernel void {name}(global const {t} *a, global const {t} *b, global {t} *out) {{
  uint i = get_global_id(0);
  {t} x = a[i], y = b[i];
  {t} g = {g};
  out[i] = {f};
}}
"""


@dataclass
class ColdKernel:
    name: str
    source: str
    dtype: type
    reference: Callable[[np.ndarray, np.ndarray], np.ndarray]


def cold_kernels(count: int, rng: random.Random) -> list[ColdKernel]:
    """`count` distinct kernels: every pair (g, f) of the uint32 ops, then of the float ops; C drawn from rng."""
    pairs = [(np.uint32, g, f) for f in UINT_OPS for g in UINT_OPS] + \
            [(np.float32, g, f) for f in FLOAT_OPS for g in FLOAT_OPS]
    assert count <= len(pairs)
    out = []
    for i, (dt, g, f) in enumerate(pairs[:count]):
        if dt is np.uint32:
            c = np.uint32(rng.getrandbits(32))
            lit, t = f"{int(c)}u", "uint"
        else:
            c = np.float32(rng.uniform(-4, 4))
            lit, t = f"({float(c).hex()}f)", "float"
        src = COLD_CL.format(name=f"cold{i}", t=t, g=g[0].format(x="x", y="y"), f=f[0].format(x="g", y=lit))
        out.append(ColdKernel(f"cold{i}", src, dt, lambda x, y, g=g[1], f=f[1], c=c: f(g(x, y), c)))
    return out


def cold_inputs(dtype: type) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(4)
    if dtype is np.uint32:
        return tuple(rng.integers(0, 1 << 32, BLOCK, dtype=np.uint64).astype(np.uint32) for _ in range(2))
    return tuple((rng.standard_normal(BLOCK) * 8).astype(np.float32) for _ in range(2))


def run_cold(gpu: GPU, kernels: list[ColdKernel], codes: list[bytes], prof: cProfile.Profile | None) -> Row:
    """Load and launch each kernel once on BLOCK elements; time load+launch per kernel (results checked)."""
    inputs = {dt: cold_inputs(dt) for dt in (np.uint32, np.float32)}
    bufs = {dt: _upload(gpu, *inputs[dt], np.zeros(BLOCK, dt)) for dt in inputs}
    work, times = Work(), []
    for k, code in zip(kernels, codes, strict=True):
        a, b, out = bufs[k.dtype]
        gpu.write(out, np.zeros(BLOCK, k.dtype))
        if prof:
            prof.enable()
        t = time.perf_counter()
        stats = gpu.launch(gpu.load(code), k.name, grid=(1,), block=(BLOCK,), args=[a, b, out])
        dt = time.perf_counter() - t
        if prof:
            prof.disable()
        work.add(stats)
        times.append(dt * 1e3)
        _expect(np.frombuffer(gpu.read(out), k.dtype), k.reference(*inputs[k.dtype]), k.name)
    work.seconds = sum(times) / 1e3
    return Row("cold", "", f"{len(kernels)} kernels x {BLOCK} items", work, times)


# -- running ----------------------------------------------------------------------------------------------------
def seconds_since_process_start() -> float:
    """Seconds since this process started (Linux /proc; clock-tick resolution)."""
    start = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
    return float(Path("/proc/uptime").read_text().split()[0]) - start / os.sysconf("SC_CLK_TCK")


def first_launch(arch: str, code: bytes, since_start: float, clang: float, t_mark: float) -> str:
    """The process's first launch (add_f32 on BLOCK items): time to its end from process start and from GPU()."""
    t0 = time.perf_counter()
    from emu.amd import GPU
    t1 = time.perf_counter()
    gpu = GPU(arch)
    x = np.arange(BLOCK, dtype=np.float32)
    a, b, c = _upload(gpu, x, x, np.zeros(BLOCK, np.float32))
    gpu.launch(gpu.load(code), "add_f32", grid=(1,), block=(BLOCK,), args=[a, b, c, np.int32(BLOCK)])
    t2 = time.perf_counter()
    _expect(_f32(gpu, c), x + x, "first launch")
    tier = os.environ.get("HWEMU_TIER") or "default"
    return (f"first launch ({tier} tier, add_f32 x {BLOCK}): {since_start + t2 - t_mark - clang:.2f} s after process "
            f"start (clang {clang:.2f} s excluded), {t2 - t0:.2f} s after importing emu, {t2 - t1:.2f} s after GPU()")


def run_hot(name: str, tiers: list[str], scale: Callable[[str], str], arch: str, code: dict[str, bytes],
            prof: cProfile.Profile | None, prof_tier: str | None, rounds: tuple[int, int, float]) -> list[Row]:
    """Each tier's case is loaded and launched once to warm up; then rounds launch every tier in turn (`rounds`:
    at least, at most, and more while the rounds so far took under these seconds), and each tier keeps its fastest
    round: the machine's speed drifts (other load, clocks), and interleaving the tiers gives each the same chances.
    A tier that fails gives its row the error and leaves the rounds."""
    from emu.amd import GPU
    cases: dict[str, Case] = {}
    rows = {tier: Row(name, tier) for tier in tiers}
    for tier in tiers:
        os.environ["HWEMU_TIER"] = tier
        try:
            case = HOT[name](GPU(arch), code, SIZES[name][scale(tier)])
            case.launch()  # warm-up: decode, plans, compiles
            case.check()
            cases[tier], rows[tier].problem = case, case.problem
        except Exception as e:  # a failing tier is reported in its row; the others still run
            rows[tier].error = _failed(e)
    least, most, seconds = rounds
    t_rounds = time.perf_counter()
    for k in range(most):
        if k >= least and time.perf_counter() - t_rounds > seconds:
            break
        for tier, case in list(cases.items()):
            p = prof if tier == prof_tier else None
            try:
                if p:
                    p.enable()
                try:
                    t = time.perf_counter()
                    work = case.launch()
                    work.seconds = time.perf_counter() - t
                finally:
                    if p:
                        p.disable()
                case.check()
            except Exception as e:
                rows[tier].error, rows[tier].work = _failed(e), None
                del cases[tier]
                continue
            best = rows[tier].work
            if best is None or work.seconds < best.seconds:
                rows[tier].work = work
    return [rows[tier] for tier in tiers]


def _failed(e: Exception) -> str:
    return f"FAILED: {type(e).__name__}: {e}".splitlines()[0]


def compile_cold(tiers: list[str], count: int, arch: str) -> dict[str, tuple[list[ColdKernel], list[bytes]]]:
    """Per tier, `count` cold kernels with constants of their own, all compiled up front (2 clang jobs at once)."""
    rng = random.Random()  # seeded from the OS: a new set every run
    sets = {t: cold_kernels(count, rng) for t in tiers}
    with ThreadPoolExecutor(2) as pool:
        return {t: (ks, list(pool.map(lambda k: compile_cl(k.source, arch), ks))) for t, ks in sets.items()}


def _si(x: float) -> str:
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= div:
            return f"{x / div:.3g}{unit}"
    return f"{x:.3g}"


def _us(seconds: float) -> str:
    us = seconds * 1e6
    return f"{us:.2f}" if us < 10 else f"{us:.1f}" if us < 1000 else f"{us:.0f}"


def table(rows: list[Row]) -> list[str]:
    head = ("workload", "tier", "problem", "waves", "wave-instr", "time s", "wave-instr/s", "lane-instr/s",
            "us/wave", "cold ms med", "cold ms mean", "vs ref")
    ref = {r.workload: r for r in rows if r.tier == "ref" and r.work}
    lines = [head]
    for r in rows:
        if not r.work:
            lines.append((r.workload, r.tier, r.error) + ("",) * (len(head) - 3))
            continue
        w = r.work
        rate = w.wave_instructions / w.seconds
        cold = (f"{statistics.median(r.cold_ms):.2f}", f"{statistics.mean(r.cold_ms):.2f}") if r.cold_ms else ("", "")
        base = ref.get(r.workload)
        if base is None:
            vs = "-"
        elif r.cold_ms:  # cold kernels: ratio of the median cold times
            vs = f"{statistics.median(base.cold_ms) / statistics.median(r.cold_ms):.1f}x"
        else:  # rates, since the reference tier ran a reduced problem
            vs = f"{rate / (base.work.wave_instructions / base.work.seconds):.1f}x"
        lines.append((r.workload, r.tier, r.problem, str(w.waves), str(w.wave_instructions), f"{w.seconds:.3f}",
                      _si(rate), _si(w.lane_instructions / w.seconds), _us(w.seconds / w.waves), *cold, vs))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    return ["  ".join(c.ljust(wd) for c, wd in zip(line, widths, strict=True)).rstrip() for line in lines]


def _names(text: str, allowed: tuple[str, ...]) -> list[str]:
    names = [s for s in text.split(",") if s]
    bad = [s for s in names if s not in allowed]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"{', '.join(bad) or 'none given'}; choose from {', '.join(allowed)}")
    return names


def main(argv: list[str] | None = None) -> int:
    since_start, t_mark = seconds_since_process_start(), time.perf_counter()
    os.environ.setdefault("HWEMU_TIMEOUT", "0")  # the reference tier's problems run longer than the watchdog's 10 s
    ap = argparse.ArgumentParser(prog="python -m tools.bench", description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="gfx1100")
    ap.add_argument("--only", type=lambda s: _names(s, WORKLOADS), default=list(WORKLOADS),
                    help=f"comma-separated workloads ({','.join(WORKLOADS)})")
    ap.add_argument("--tiers", type=lambda s: _names(s, TIER_NAMES), default=list(TIER_NAMES),
                    help="comma-separated tiers (default: all; those the engine lacks print n/a)")
    ap.add_argument("--quick", action="store_true", help="small problems for every tier (a smoke test)")
    ap.add_argument("--profile", nargs="?", const="", metavar="TIER",
                    help="cProfile the timed runs of TIER (default: the last tier run) and print the top entries; "
                         "that tier's rates are then slowed by the profiler")
    args = ap.parse_args(argv)

    t = time.perf_counter()
    code = {k: compile_cl(f.read_text(), args.arch) for k, f in (("bench", BENCH_CL), ("matmul", MATMUL_CL))}
    header = first_launch(args.arch, code["bench"], since_start, time.perf_counter() - t, t_mark)

    import emu.amd.exec as engine
    from emu.amd import GPU
    have = getattr(engine, "TIERS", ("ref",))  # an engine from before the tiers has only the reference one
    tiers = [t for t in args.tiers if t in have]
    prof_tier = (args.profile or (tiers[-1] if tiers else None)) if args.profile is not None else None
    if args.profile and args.profile not in tiers:
        ap.error(f"--profile {args.profile}: not a tier that runs here ({', '.join(tiers) or 'none'})")
    prof = cProfile.Profile() if prof_tier else None
    scale = (lambda tier: "quick") if args.quick else (lambda tier: "ref" if tier == "ref" else "full")
    cold = compile_cold(tiers, SIZES["cold"]["quick" if args.quick else "full"], args.arch) \
        if "cold" in args.only else {}

    rows: list[Row] = []
    t_start = time.perf_counter()
    for name in args.only:
        if name == "cold":
            got = []
            for tier in tiers:
                os.environ["HWEMU_TIER"] = tier
                try:
                    row = run_cold(GPU(args.arch), *cold[tier], prof if tier == prof_tier else None)
                    row.tier = tier
                except Exception as e:  # a failing tier is reported in its row; the others still run
                    row = Row(name, tier, error=_failed(e))
                got.append(row)
        else:
            got = run_hot(name, tiers, scale, args.arch, code, prof, prof_tier, (1, 1, 0) if args.quick else ROUNDS)
        measured = {r.tier: r for r in got}
        for tier in args.tiers:
            row = measured.get(tier) or Row(name, tier, error="n/a")
            rows.append(row)
            done = row.error or f"{row.work.seconds:.2f} s timed"
            print(f"bench: {name} {tier}: {done}", file=sys.stderr, flush=True)

    print(f"hwemu bench, {args.arch}, engine tiers {','.join(have)}{', quick' if args.quick else ''}")
    print(header)
    print("\n".join(table(rows)))
    now = time.perf_counter()
    print(f"run time {since_start + now - t_mark:.0f} s from process start ({now - t_start:.0f} s in workloads, "
          "warm-ups and checks included)")
    if prof:
        print(f"\nprofile of the timed {prof_tier} runs:")
        pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(25)
    return 1 if any(r.error.startswith("FAILED") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
