"""Fuzz campaigns against the emulator: every input runs in a worker process under a time and memory limit, and
each outcome is counted by class.

    python -m tools.fuzz streams [--arch gfx1100,gfx1201,gfx942] [-n 2000]   valid instruction streams, one wave
    python -m tools.fuzz codeobjects [-n 3000]                               corrupted code objects: load + launch
    python -m tools.fuzz clis [-n 200]                                       corrupted code objects through the CLIs
    python -m tools.fuzz all                                                 all three, default sizes

Outcome classes: `completed`, `fault:KIND` (a GPU fault the emulated code caused), `rejected:ERROR` (bad input
named by a clean error), `exit:N` (a CLI's status); the bad ones are `fault:emulator-error` (a bug in hwemu),
`uncaught:ERROR` (an exception that is neither), `traceback` (a CLI printed one), `hang` (over the time limit),
`memory` (over the memory limit), `crash` (the worker died). Exit status 1 when any bad outcome occurred.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import resource
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable

import numpy as np

ARCHES = ("gfx1100", "gfx1201", "gfx942")
BAD = ("fault:emulator-error", "uncaught", "traceback", "hang", "memory", "crash")
SAXPY = """__kernel void saxpy(__global float *y, __global const float *x, float a, uint n) {
  uint i = get_global_id(0);
  if (i < n) y[i] = a * x[i] + y[i];
}"""
S_ENDPGM = {"rdna3": bytes.fromhex("0000b0bf"), "rdna4": bytes.fromhex("0000b0bf"), "cdna": bytes.fromhex("000081bf")}


def is_bad(outcome: str) -> bool:
    return outcome.startswith(BAD)


def fault_class(e) -> str:
    """`fault:KIND`; an emulator error (a bug) keeps its message, so that each bug is counted on its own."""
    r = e.record
    return f"fault:{r.kind}" + (f" ({r.instruction}: {r.detail[:100]})" if r.kind == "emulator-error" else "")


# -- what a worker runs for one input --------------------------------------------------------------------------
def run_stream(arch: str, insts: list[bytes], seed: int) -> str:
    """A stream of valid instructions on one wave with random registers and a mapped buffer."""
    from emu.amd import GPUFault, Wave, isa
    w = Wave(arch)
    rng = np.random.default_rng(seed)
    buf = w.vm.alloc(1 << 16, name="data")
    w.sgpr[:100] = rng.integers(0, 1 << 32, 100, dtype=np.uint64).astype(np.uint32)
    w.sgpr[0:2] = (buf & 0xFFFFFFFF, buf >> 32)  # s[0:1] points at the buffer, as a kernarg pointer would
    w.vgpr[:] = rng.integers(0, 1 << 12, w.vgpr.shape, dtype=np.uint32)
    try:
        w.run(b"".join(insts) + S_ENDPGM[isa.family(arch)], limit=20_000)
        return "completed"
    except GPUFault as e:
        return fault_class(e)


def run_codeobject(arch: str, blob: bytes) -> str:
    """Load a (corrupted) code object and launch its first kernel with saxpy's arguments."""
    from emu.amd import GPU, GPUFault
    gpu = GPU(arch)
    y, x = gpu.alloc(4096), gpu.alloc(4096)
    try:
        prog = gpu.load(blob)
        name = prog.kernels[0] if prog.kernels else "saxpy"
        gpu.launch(prog, name, grid=(2,), block=(64,), args=[y, x, np.float32(2), np.uint32(100)])
        return "completed"
    except GPUFault as e:
        return fault_class(e)
    except (ValueError, TypeError) as e:  # CodeObjectError is a ValueError: a clean, named rejection
        return f"rejected:{type(e).__name__}"


def run_cli(arch: str, blob: bytes) -> str:
    """The corrupted code object through `emu.amd.asm.disasm` and `emu.amd.run`: one line on error, exit 2 or 1."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.hsaco")
        with open(path, "wb") as f:
            f.write(blob)
        outs = []
        for cmd in (["emu.amd.asm.disasm", "--arch", arch, path],
                    ["emu.amd.run", path, "--kernel", "saxpy", "--grid", "1", "--block", "64", "--arg",
                     "buf:out:f32:64", "--arg", "buf:out:f32:64", "--arg", "f32:2", "--arg", "u32:64", "--out", d]):
            p = subprocess.run([sys.executable, "-m", *cmd], capture_output=True, text=True, timeout=60)
            if "Traceback" in p.stderr:
                return "traceback"
            if p.returncode not in (0, 1, 2):
                return f"uncaught:exit {p.returncode}"
            outs.append(f"exit:{p.returncode}")
        return "+".join(outs)


# -- workers: one process at a time, replaced when it hangs, dies or runs out of memory ----------------------------
def _worker(conn, memory: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    while True:
        job = conn.recv()
        if job is None:
            return
        fn, args = job
        try:
            out = fn(*args)
        except MemoryError:
            out = "memory"
        except Exception as e:  # noqa: BLE001 - classifying every escape is the point
            out = f"uncaught:{type(e).__name__}: {str(e)[:120]}"
        conn.send(out)


class Pool:
    def __init__(self, timeout: float, memory: int):
        self.timeout, self.memory = timeout, memory
        self.ctx = mp.get_context("spawn")
        self.proc = None

    def _start(self) -> None:
        self.conn, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_worker, args=(child, self.memory), daemon=True)
        self.proc.start()

    def run(self, fn: Callable, *args) -> str:
        if self.proc is None or not self.proc.is_alive():
            self._start()
        self.conn.send((fn, args))
        if not self.conn.poll(self.timeout):
            self.proc.kill()
            self.proc = None
            return "hang"
        try:
            return self.conn.recv()
        except EOFError:
            self.proc = None
            return "crash"

    def close(self) -> None:
        if self.proc is not None:
            self.conn.send(None)
            self.proc.join(5)


# -- inputs ------------------------------------------------------------------------------------------------------
def streams(arch: str, n: int, seed: int) -> list[list[bytes]]:
    """n instruction streams of arch, drawn by the hypothesis strategies (derandomized from the seed)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as with_seed
    from hypothesis import strategies as st

    from emu.amd.strategies import programs
    out: list[list[bytes]] = []

    @with_seed(seed)
    @settings(max_examples=n, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def collect(data):
        out.append(data.draw(programs(arch, 8)))
    collect()
    return out[:n]


def mutate(blob: bytes, rng: np.random.Generator) -> bytes:
    """A corrupted copy: flipped bytes, an extreme value written into a field, a cut, or a spliced chunk."""
    b = bytearray(blob)
    kind = rng.integers(4)
    if kind == 0:
        for _ in range(rng.integers(1, 9)):
            b[rng.integers(len(b))] ^= int(rng.integers(1, 256))
    elif kind == 1:
        width = int(rng.choice([2, 4, 8]))
        at = int(rng.integers(0, len(b) - width)) // width * width
        value = int(rng.choice([0, 1, 0x7F, 0xFF, 0x7FFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 1 << 40, (1 << 64) - 1]))
        b[at:at + width] = (value & ((1 << (8 * width)) - 1)).to_bytes(width, "little")
    elif kind == 2:
        b = b[:rng.integers(0, len(b))]
    else:
        at = int(rng.integers(len(b)))
        b[at:at] = rng.integers(0, 256, int(rng.integers(1, 64)), dtype=np.uint8).tobytes()
    return bytes(b)


def code_objects(n: int, seed: int) -> Iterable[tuple[str, bytes]]:
    from stack.codegen.opencl import compile_cl
    rng = np.random.default_rng(seed)
    base = {arch: compile_cl(SAXPY, arch) for arch in ARCHES}
    for i in range(n):
        arch = ARCHES[i % len(ARCHES)]
        yield arch, mutate(base[arch], rng)


# -- campaigns ---------------------------------------------------------------------------------------------------
def campaign(kind: str, n: int, arches: Iterable[str], seed: int, pool: Pool,
             progress: Callable[[str], None] = lambda s: None) -> Counter:
    counts: Counter = Counter()
    if kind == "streams":
        for arch in arches:
            for i, prog in enumerate(streams(arch, n, seed)):
                counts[pool.run(run_stream, arch, prog, seed + i)] += 1
            progress(f"streams {arch}: {sum(counts.values())} runs")
    elif kind in ("codeobjects", "clis"):
        fn = run_codeobject if kind == "codeobjects" else run_cli
        for arch, blob in code_objects(n, seed):
            counts[pool.run(fn, arch, blob)] += 1
    else:
        raise ValueError(f"unknown campaign {kind!r}")
    return counts


def table(results: dict[str, Counter]) -> str:
    lines = []
    for kind, counts in results.items():
        total, bad = sum(counts.values()), sum(v for k, v in counts.items() if is_bad(k))
        lines.append(f"{kind}: {total} inputs, {bad} bad")
        for outcome, v in counts.most_common():
            lines.append(f"  {v:7d}  {outcome}{'   <-- bad' if is_bad(outcome) else ''}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.fuzz", description=__doc__.splitlines()[0])
    ap.add_argument("campaign", choices=["streams", "codeobjects", "clis", "all"])
    ap.add_argument("-n", type=int, default=None, help="inputs per arch (streams) or in all (code objects)")
    ap.add_argument("--arch", default=",".join(ARCHES))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per input")
    ap.add_argument("--memory", type=int, default=4096, help="MiB of address space per worker")
    a = ap.parse_args(argv)
    defaults = {"streams": 2000, "codeobjects": 3000, "clis": 200}
    kinds = list(defaults) if a.campaign == "all" else [a.campaign]
    pool = Pool(a.timeout, a.memory << 20)
    results = {}
    try:
        for kind in kinds:
            results[kind] = campaign(kind, a.n or defaults[kind], a.arch.split(","), a.seed, pool,
                                     lambda s: print(s, file=sys.stderr, flush=True))
    finally:
        pool.close()
    print(table(results))
    return int(any(is_bad(k) for c in results.values() for k in c))


if __name__ == "__main__":
    sys.exit(main())
