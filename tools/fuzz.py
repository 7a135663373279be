"""Fuzz campaigns against the emulator: every input runs in a worker process under a time and memory limit, and
each outcome is counted by class.

    python -m tools.fuzz streams [--arch gfx1100,gfx1201,gfx942] [-n 2000]   valid instruction streams, one wave
    python -m tools.fuzz codeobjects [-n 3000]                               corrupted code objects: load + launch
    python -m tools.fuzz clis [-n 3000]                                      the same through the CLIs' main()s
    python -m tools.fuzz cli-processes [-n 200]                              the same through `python -m` processes
    python -m tools.fuzz misuse [-n 2000]                                    wrong arguments to the GPU API
    python -m tools.fuzz kfd [-n 5000]                                       a hostile raw client of MOCKKFD
    python -m tools.fuzz all                                                 all of them, default sizes

Outcome classes: `completed`, `fault:KIND` (a GPU fault the emulated code caused), `rejected:ERROR` (bad input
named by a clean error), `exit:N` (a CLI's status); the bad ones are `fault:emulator-error` (a bug in hwemu),
`uncaught:ERROR` (an exception that is neither), `traceback` (a CLI printed one, or one escaped its main()), `hang`
(over the CPU time limit), `memory` (over the memory limit), `over-limit` (a VM allocation beyond the documented
limits of objfile.codeobj), `leak` (mappings left after free and unload), `crash` (the worker died), and those of
tools.hostile_kfd (`internal`, `changed-on-error`, `dead-engine`, `canary`, `saxpy`, `stuck`). Corrupted code
objects are flipped bytes, extreme values written into ELF, program and section header fields, kernel descriptor
fields and metadata integers, cuts and spliced chunks. The kfd campaign takes ioctl structs, PM4, SDMA and AQL
streams in turn, each input followed by tools.hostile_kfd's checks (engine, canary, saxpy, nothing changed by a
failed ioctl). Exit status 1 when any bad outcome occurred.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import multiprocessing as mp
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable

import numpy as np

from objfile.codeobj import MAX_BUFFER

ARCHES = ("gfx1100", "gfx1201", "gfx942")
BAD = ("fault:emulator-error", "uncaught", "traceback", "hang", "memory", "over-limit", "leak", "crash",
       "internal", "changed-on-error", "dead-engine", "canary", "saxpy", "stuck")
SAXPY = """__kernel void saxpy(__global float *y, __global const float *x, float a, uint n) {
  uint i = get_global_id(0);
  if (i < n) y[i] = a * x[i] + y[i];
}"""
PROCESS_TIMEOUT = 300  # seconds of wall time for one CLI process: a bound against hangs on a loaded machine
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


def allocation_limit(name: str, arch: str) -> int:
    """The most a VM allocation of the runner named `name` may take under the documented limits."""
    from objfile import codeobj as co
    waves = co.MAX_WORKGROUP_SIZE // 32  # scratch: one slot per wave of a workgroup, each at most the largest
    return {"code object": co.MAX_IMAGE, "kernargs": co.MAX_KERNARG_SEGMENT, "buffer": co.MAX_BUFFER,
            "scratch": waves * co.max_wave_scratch(arch)}.get(name, 4096)


@contextlib.contextmanager
def watch_allocations(arch: str):
    """Record every VM allocation beyond `allocation_limit` while the block runs: yields the list of them."""
    from emu.amd.memory import VM
    over: list[str] = []
    alloc = VM.alloc

    def checked(vm, size, *args, name="", **kw):
        if size > allocation_limit(name, arch):
            over.append(f"over-limit:{name} {size}")
        return alloc(vm, size, *args, name=name, **kw)
    VM.alloc = checked
    try:
        yield over
    finally:
        VM.alloc = alloc


def run_codeobject(arch: str, blob: bytes) -> str:
    """Load a (corrupted) code object, launch its first kernel with saxpy's arguments, unload it and free the
    buffers: the GPU must have no mapping left but its queue."""
    from emu.amd import GPU, GPUFault
    with watch_allocations(arch) as over:
        gpu = GPU(arch)
        idle = len(gpu.vm.mappings)
        y, x = gpu.alloc(4096), gpu.alloc(4096)
        try:
            with gpu.load(blob) as prog:
                name = prog.kernels[0] if prog.kernels else "saxpy"
                gpu.launch(prog, name, grid=(2,), block=(64,), args=[y, x, np.float32(2), np.uint32(100)])
            out = "completed"
        except GPUFault as e:
            out = fault_class(e)
        except (ValueError, TypeError) as e:  # CodeObjectError is a ValueError: a clean, named rejection
            out = f"rejected:{type(e).__name__}"
        gpu.free(y)
        gpu.free(x)
    left = len(gpu.vm.mappings) - idle
    return over[0] if over else f"leak:{left} mappings" if left else out


BAD_VALUES = (0, -1, 1.5, "x", None, True, b"", 1 << 32, 1 << 64, 10**30, np.int64(-5), np.float64(1e300),
              np.int32(7), np.float32(2), (1, 2, 3, 4), [1 << 31], 1e300)


def run_misuse(arch: str, code: bytes, seed: int) -> str:
    """One wrong call to the GPU API (a bad size, a foreign, freed or forged buffer, a wrong kernel argument, an
    unloaded program, bad launch dimensions); it must be refused with ValueError or TypeError, and a correct saxpy
    must work afterwards."""
    from emu.amd import GPU, GPUFault
    from emu.amd.gpu import Buffer
    rng = np.random.default_rng(seed)
    gpu, other = GPU(arch), GPU(arch)
    y, x, freed = gpu.alloc(256), gpu.alloc(256), gpu.alloc(64)
    gpu.free(freed)
    prog, gone = gpu.load(code), gpu.load(code)
    gpu.unload(gone)
    bufs = (freed, other.alloc(256), Buffer(y.addr, 1 << 20), Buffer(y.addr, y.size), y.addr, None, "buf")

    def pick(seq):
        return seq[int(rng.integers(len(seq)))]
    args = [y, x, np.float32(2), np.uint32(64)]
    args[int(rng.integers(4))] = pick(BAD_VALUES + bufs)
    calls = (lambda: gpu.alloc(pick(BAD_VALUES + (MAX_BUFFER + 1,))),
             lambda: gpu.write(pick(bufs), pick((b"abcd", np.zeros(1 << 10), 5, "x"))),
             lambda: gpu.write(y, b"abcd", offset=pick(BAD_VALUES)),
             lambda: gpu.read(pick(bufs + (y,)), pick(BAD_VALUES), pick((0, -1, 1 << 40))),
             lambda: gpu.free(pick(bufs)),
             lambda: gpu.load(pick(BAD_VALUES + (bytearray(100),))),
             lambda: gpu.unload(pick((gone, code, None))),
             lambda: gpu.launch(pick((gone, code, None)), "saxpy", grid=1, block=64, args=[y, x, 2.0, 64]),
             lambda: gpu.launch(prog, "saxpy", grid=1, block=64, args=args),
             lambda: gpu.launch(prog, "saxpy", grid=pick(BAD_VALUES), block=64, args=[y, x, 2.0, 64]),
             lambda: gpu.launch(prog, "saxpy", grid=1, block=pick(BAD_VALUES), args=[y, x, 2.0, 64]),
             lambda: gpu.launch(prog, "saxpy", grid=1, block=64, args=[y, x, 2.0, 64], dynamic_lds=pick(BAD_VALUES)),
             lambda: gpu.launch(prog, pick(("", "nope", None, 5)), grid=1, block=64, args=[y, x, 2.0, 64]),
             lambda: gpu.launch(prog, "saxpy", kernargs=pick(BAD_VALUES + (bytes(1 << 20),))))
    which = int(rng.integers(len(calls)))
    try:
        calls[which]()
        out = f"completed:call {which}"
    except GPUFault as e:  # a launch with a bad pointer
        out = fault_class(e)
    except (ValueError, TypeError) as e:
        out = f"rejected:{type(e).__name__}"
    host = np.arange(64, dtype=np.float32)
    gpu.write(x, host)
    gpu.write(y, host)
    gpu.launch(prog, "saxpy", grid=1, block=64, args=[y, x, 2.0, 64])
    if not np.array_equal(np.frombuffer(gpu.read(y), np.float32), 3 * host):
        return f"uncaught:wrong result after call {which}"
    return out


def _cli_commands(arch: str, path: str, out: str) -> list[list[str]]:
    return [["disasm", "--arch", arch, path],
            ["kernel", path, "--kernel", "saxpy", "--grid", "1", "--block", "64", "--arg", "buf:out:f32:64",
             "--arg", "buf:out:f32:64", "--arg", "f32:2", "--arg", "u32:64", "--out", out]]


def run_cli(arch: str, blob: bytes) -> str:
    """The corrupted code object through `hwemu disasm` and `hwemu kernel` (the main()s of emu.amd.asm.disasm and
    emu.amd.run) in this process: an exception escaping main() is a traceback; otherwise exit 0, 1 or 2."""
    from emu import cli
    with tempfile.TemporaryDirectory() as d, watch_allocations(arch) as over:
        path = os.path.join(d, "k.hsaco")
        with open(path, "wb") as f:
            f.write(blob)
        outs = []
        for cmd in _cli_commands(arch, path, d):
            err = io.StringIO()
            try:
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                    status = cli.main(cmd)
            except SystemExit as e:  # argparse
                status = e.code
            except Exception as e:  # noqa: BLE001 - what the interpreter would print as a traceback
                return f"traceback:{cmd[0]}: {type(e).__name__}: {str(e)[:100]}"
            if not _cli_status_ok(status, err.getvalue()):
                return f"uncaught:{cmd[0]} exit {status}: {err.getvalue()[:100]!r}"
            outs.append(f"exit:{status}")
    return over[0] if over else "+".join(outs)


def _cli_status_ok(status, stderr: str) -> bool:
    """Exit 0; 2 with one line; or 1 (a GPU fault) with the fault report, whose first line is the fault."""
    lines = stderr.splitlines()
    if status == 1:
        return bool(lines) and lines[0].startswith("GPU fault: ")
    return status == 0 or status == 2 and len(lines) == 1


def run_cli_process(arch: str, blob: bytes) -> str:
    """The same through `python -m emu.amd.asm.disasm` and `python -m emu.amd.run` processes."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.hsaco")
        with open(path, "wb") as f:
            f.write(blob)
        outs = []
        for cmd in _cli_commands(arch, path, d):
            module = {"disasm": "emu.amd.asm.disasm", "kernel": "emu.amd.run"}[cmd[0]]
            try:
                p = subprocess.run([sys.executable, "-m", module, *cmd[1:]], capture_output=True, text=True,
                                   timeout=PROCESS_TIMEOUT)
            except subprocess.TimeoutExpired:
                return f"hang:{module}"
            if "Traceback" in p.stderr:
                return f"traceback:{module}"
            if not _cli_status_ok(p.returncode, p.stderr):
                return f"uncaught:{module} exit {p.returncode}: {p.stderr[:100]!r}"
            outs.append(f"exit:{p.returncode}")
        return "+".join(outs)


KFD_GROWTH = 512  # MiB one hostile input may add to the worker's peak (the mock's heaps are sparse address space)
_BENCH: list = []  # the worker's hostile-client bench, made at its first kfd input


def run_kfd(kind: str, seed: int) -> str:
    """One hostile input of `kind` (tools.hostile_kfd) on the worker's mock system; fault reports go to a temporary
    directory and a dispatch's budgets are short (random code may loop). The worker has no address-space limit
    (MOCKKFD reserves its heaps sparsely), so a blowup is the input's growth of the peak resident size."""
    from tools import hostile_kfd
    if not _BENCH:
        os.environ.update(HWEMU_REPORT_DIR=tempfile.mkdtemp(prefix="hwemu-fuzz-"), HWEMU_TIMEOUT="1",
                          HWEMU_WAVE_LIMIT="200000")
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - the engine thread's fault and CP-error lines, for good
        _BENCH.append(hostile_kfd.Bench())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = hostile_kfd.run(_BENCH[0], kind, seed)
    grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak) >> 10  # MiB
    return f"memory:{kind} input grew the worker by {grew} MiB" if grew > KFD_GROWTH else out


# -- workers: one process at a time, replaced when it hangs, dies or runs out of memory ----------------------------
def _worker(conn, memory: int) -> None:
    if memory:  # 0: no limit
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


WALL_FACTOR = 10  # a worker that spends no CPU time is hung after this many times the limit of wall time


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` (its threads included); 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14, 15


class Pool:
    def __init__(self, timeout: float, memory: int):
        self.timeout, self.memory = timeout, memory
        self.ctx = mp.get_context("spawn")
        self.proc = None

    def _start(self) -> None:
        self.conn, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_worker, args=(child, self.memory), daemon=True)
        self.proc.start()

    def run(self, fn: Callable, *args, extra_time: float = 0) -> str:
        """fn(*args) in the worker: its outcome, or `hang` once the worker has spent the time limit (+ extra_time
        seconds) of CPU time, or waited WALL_FACTOR times as long (a deadlock spends none): time it waits for a core
        on a loaded machine does not count, so the verdict does not depend on the load."""
        if self.proc is None or not self.proc.is_alive():
            self._start()
        limit, start, cpu0 = self.timeout + extra_time, time.monotonic(), _cpu_seconds(self.proc.pid)
        self.conn.send((fn, args))
        while not self.conn.poll(min(1.0, limit)):
            if _cpu_seconds(self.proc.pid) - cpu0 > limit or time.monotonic() - start > WALL_FACTOR * limit:
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


EXTREMES = (0, 1, 0x7F, 0xFF, 0x7FFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 1 << 30, 1 << 40, (1 << 63) - 1, (1 << 64) - 1)
# (offset, width) of ELF header fields; of each program header (56 bytes) and section header (64 bytes) entry
ELF_FIELDS = ((24, 8), (32, 8), (40, 8), (48, 4), (52, 2), (54, 2), (56, 2), (58, 2), (60, 2), (62, 2))
PHDR_FIELDS = ((0, 4), (4, 4), (8, 8), (16, 8), (32, 8), (40, 8), (48, 8))
SHDR_FIELDS = ((0, 4), (4, 4), (8, 8), (16, 8), (24, 8), (32, 8), (40, 4), (44, 4), (48, 8), (56, 8))
KD_FIELDS = ((0, 4), (4, 4), (8, 4), (16, 8), (44, 4), (48, 4), (52, 4), (56, 2), (58, 2))
METADATA_KEYS = (".kernarg_segment_size", ".group_segment_fixed_size", ".private_segment_fixed_size",
                 ".max_flat_workgroup_size", ".wavefront_size", ".kernarg_segment_align", ".offset", ".size",
                 ".value_kind", ".type_name", ".symbol", ".name", ".args")
METADATA_VALUES = (*EXTREMES, -1, -(1 << 63), "x", "", None, 1.5, [], {}, True)


class Target:
    """What the structured mutations aim at in one pristine code object: the file offsets of its header fields
    and kernel descriptors, and its metadata (msgpack) with where it lies."""

    def __init__(self, blob: bytes):
        import msgpack

        from objfile.codeobj import CodeObject
        co = CodeObject.parse(blob)
        self.blob = blob
        self.phoff, shoff = (int.from_bytes(blob[at:at + 8], "little") for at in (32, 40))
        phnum, shnum = (int.from_bytes(blob[at:at + 2], "little") for at in (56, 60))
        self.fields = [*ELF_FIELDS]
        self.fields += [(self.phoff + 56 * i + at, w) for i in range(phnum) for at, w in PHDR_FIELDS]
        self.fields += [(shoff + 64 * i + at, w) for i in range(shnum) for at, w in SHDR_FIELDS]
        self.descriptors = {}  # kernel name -> file offset of its descriptor (through the segment holding it)
        for k in co.kernels.values():
            seg = next(s for s in co.segments if s.vaddr <= k.descriptor_address < s.vaddr + len(s.data))
            self.descriptors[k.name] = at = blob.find(seg.data) + k.descriptor_address - seg.vaddr
            self.fields += [(at + off, w) for off, w in KD_FIELDS]
        self.metadata = co.metadata
        self.packed = msgpack.packb(co.metadata)
        self.metadata_at = blob.find(self.packed)

    def with_metadata(self, key: str, value, arg: int | None = None) -> bytes | None:
        """The code object with metadata `key` of its first kernel (of its explicit argument `arg`) set to `value`,
        in place: '.language' (which nothing reads) is shortened or padded so that the note keeps its length.
        None when that cannot make up the difference."""
        import copy

        import msgpack
        meta = copy.deepcopy(self.metadata)
        kernel = meta["amdhsa.kernels"][0]
        (kernel if arg is None else kernel[".args"][arg])[key] = value
        grow = len(msgpack.packb(meta)) - len(self.packed)
        kernel[".language"] = (kernel[".language"] + " " * 31)[:len(kernel[".language"]) - grow]
        packed = msgpack.packb(meta)
        if len(packed) != len(self.packed):
            return None
        return self.blob[:self.metadata_at] + packed + self.blob[self.metadata_at + len(packed):]


def _set_metadata(blob: bytearray, t: Target, rng: np.random.Generator) -> None:
    """Give one metadata field of the pristine code object an extreme or wrong-typed value."""
    key = str(rng.choice(METADATA_KEYS))
    arg = int(rng.integers(len(t.metadata["amdhsa.kernels"][0][".args"]))) \
        if key in (".offset", ".size", ".value_kind", ".type_name") else None
    changed = t.with_metadata(key, METADATA_VALUES[int(rng.integers(len(METADATA_VALUES)))], arg)
    if changed is not None:
        blob[:] = changed


def mutate(blob: bytes, rng: np.random.Generator, target: Target | None = None) -> bytes:
    """A corrupted copy: flipped bytes, an extreme value written at a random place or into a header, descriptor or
    metadata field (with a `target`), a cut, or a spliced chunk."""
    b = bytearray(blob)
    kind = rng.integers(6 if target else 4)
    if kind == 0:
        for _ in range(rng.integers(1, 9)):
            b[rng.integers(len(b))] ^= int(rng.integers(1, 256))
    elif kind in (1, 4):
        if kind == 4:
            at, width = target.fields[int(rng.integers(len(target.fields)))]
        else:
            width = int(rng.choice([2, 4, 8]))
            at = int(rng.integers(0, len(b) - width)) // width * width
        value = int(rng.choice(EXTREMES))
        b[at:at + width] = (value & ((1 << (8 * width)) - 1)).to_bytes(width, "little")
    elif kind == 2:
        b = b[:rng.integers(0, len(b))]
    elif kind == 3:
        at = int(rng.integers(len(b)))
        b[at:at] = rng.integers(0, 256, int(rng.integers(1, 64)), dtype=np.uint8).tobytes()
    else:
        _set_metadata(b, target, rng)
    return bytes(b)


def code_objects(n: int, seed: int) -> Iterable[tuple[str, bytes]]:
    from stack.codegen.opencl import compile_cl
    rng = np.random.default_rng(seed)
    base = {arch: compile_cl(SAXPY, arch) for arch in ARCHES}
    targets = {arch: Target(blob) for arch, blob in base.items()}
    for i in range(n):
        arch = ARCHES[i % len(ARCHES)]
        yield arch, mutate(base[arch], rng, targets[arch])


# -- campaigns ---------------------------------------------------------------------------------------------------
def campaign(kind: str, n: int, arches: Iterable[str], seed: int, pool: Pool,
             progress: Callable[[str], None] = lambda s: None) -> Counter:
    counts: Counter = Counter()
    if kind == "streams":
        for arch in arches:
            for i, prog in enumerate(streams(arch, n, seed)):
                counts[pool.run(run_stream, arch, prog, seed + i)] += 1
            progress(f"streams {arch}: {sum(counts.values())} runs")
    elif kind in ("codeobjects", "clis", "cli-processes"):
        fn = {"codeobjects": run_codeobject, "clis": run_cli, "cli-processes": run_cli_process}[kind]
        extra = 2 * PROCESS_TIMEOUT if kind == "cli-processes" else 0  # the processes have time limits of their own
        for i, (arch, blob) in enumerate(code_objects(n, seed)):
            counts[pool.run(fn, arch, blob, extra_time=extra)] += 1
            if i % 500 == 499:
                progress(f"{kind}: {i + 1} runs")
    elif kind == "misuse":
        from stack.codegen.opencl import compile_cl
        code = {arch: compile_cl(SAXPY, arch) for arch in ARCHES}
        for i in range(n):
            arch = ARCHES[i % len(ARCHES)]
            counts[pool.run(run_misuse, arch, code[arch], seed + i)] += 1
    elif kind == "kfd":
        from tools.hostile_kfd import KINDS
        for i in range(n):
            out = pool.run(run_kfd, KINDS[i % len(KINDS)], seed + i)
            counts[out] += 1
            if is_bad(out):  # the input: hostile_kfd.run(bench, kind, seed) (after the same worker's earlier ones)
                progress(f"kfd: {KINDS[i % len(KINDS)]} seed {seed + i}: {out}")
            if i % 500 == 499:
                progress(f"kfd: {i + 1} runs")
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
    ap.add_argument("campaign", choices=["streams", "codeobjects", "clis", "cli-processes", "misuse", "kfd", "all"])
    ap.add_argument("-n", type=int, default=None, help="inputs per arch (streams) or in all (code objects)")
    ap.add_argument("--arch", default=",".join(ARCHES))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=30.0, help="CPU seconds per input")
    ap.add_argument("--memory", type=int, default=4096,
                    help="MiB of address space per worker (kfd: no limit; a blowup is its growth of the peak RSS)")
    a = ap.parse_args(argv)
    defaults = {"streams": 2000, "codeobjects": 3000, "clis": 3000, "cli-processes": 200, "misuse": 2000,
                "kfd": 5000}
    kinds = list(defaults) if a.campaign == "all" else [a.campaign]
    results = {}
    for kind in kinds:
        pool = Pool(a.timeout, 0 if kind == "kfd" else a.memory << 20)
        try:
            results[kind] = campaign(kind, a.n or defaults[kind], a.arch.split(","), a.seed, pool,
                                     lambda s: print(s, file=sys.stderr, flush=True))
        finally:
            pool.close()
    print(table(results))
    return int(any(is_bad(k) for c in results.values() for k in c))


if __name__ == "__main__":
    sys.exit(main())
