"""Execution tiers, and the LLVM tier's compiled regions.

`HWEMU_TIER` selects how a program's instructions run (read when a program is created, e.g. at `GPU.load`):
- `ref`: the reference engine, one plan closure per instruction (emu.amd.exec.plan);
- `interp`: the lean interpreter, one fused generated function per instruction (emu.amd.exec.interp), never native;
- `threaded`: the lean interpreter and the threaded tier (emu.amd.exec.threaded: a native interpreter whose handlers
  are compiled once per kind of instruction), each handler compiled when first asked for, no regions;
- `jit`: regions compiled to native code (emu.amd.exec.translate) from the first execution of each region entry;
- `auto` (default): the lean interpreter, the threaded tier's handlers (each compiled when first asked for, as
  under `threaded`: a cold run waits some 10 ms a handler rather than interpret meanwhile, whose first runs cost
  more; HWEMU_THREADED=0 leaves them out), and regions where they pay back. A region entry that has run HWEMU_HOT
  times (default 64) is looked at on a background thread: a region another run compiled (the disk cache) is
  installed at once; otherwise it is compiled once the time its instructions have spent interpreted (or in
  handlers), and will spend in the rest of the running dispatch
  (projected from its workgroups run so far), reaches what its compile is expected to cost, and looked at again
  each time the entry's run count doubles. That is the ski-rental rule: code never costs more than twice the better
  of the two choices in hindsight, and a test suite that runs each kernel a few times does not burn a core compiling
  regions that never pay back. The expected cost
  is the region's instruction count times the seconds per instruction this process's compiles took so far
  (starting from COMPILE_PRIOR); HWEMU_COMPILE_COST=<seconds per instruction> fixes it (0: compile every hot
  region). Code that runs long never stalls while a large region compiles (seconds for a few hundred
  instructions): the waves go on interpreted meanwhile.
Whatever a region cannot take runs on the lean interpreter (whose own gaps are reference steps), so every tier runs
every program.

Compiled regions are cached in the process and on disk (emu.pcode.llvmjit: $HWEMU_CACHE/llvm), keyed by the
region's code bytes at their offsets from its entry (the code is position-independent: one compile serves every
process and every address a client loads the program at), processor, wave size, MODE and whether it tallies
categories (HWEMU_STATS), and by the source of the translator and the pcode compiler (a change to either compiles
anew).
"""
from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import queue
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np

from emu.amd.exec import TIERS, access, takes, translate
from emu.amd.exec.state import WaveState
from emu.amd.exec.translate import BASE, CTR_WORDS, LDS_SIZE, Region
from emu.amd.exec.translate_state import Exit
from emu.pcode.llvmjit import Closed, engine

BUDGET = 1 << 20  # instructions per native call before the host gets control back
HANG_WALL = 3600.0  # seconds of wall time after which a wait for the compile thread gives up whatever its CPU time
NO_MAPPINGS = np.zeros(1, np.uint64)  # the VM table of a wave without a VM
_SIG = ctypes.CFUNCTYPE(ctypes.c_int64, *[ctypes.c_void_p] * 4)
_cache: dict[tuple, int] = {}  # a region's key (code by offsets from its entry) -> its address
_lock = threading.Lock()
COMPILE_PRIOR = (32, 0.005)  # (instructions, seconds each) assumed before this process has compiled anything
_compiling = [0.0]  # seconds spent compiling regions in this process (compiles that ended)
_compiled = list(COMPILE_PRIOR)  # [instructions compiled, seconds per instruction] of this process's compiles
_inflight: dict[int, float] = {}  # thread -> when the compile it runs began
# (processor, wave size, MODE, instruction bytes) the translator failed on: later regions end before them at once
# instead of finding out again by building their module (each failure costs a build of the region so far). They
# are kept on disk too (refused()), so that every process shapes its regions alike and finds them in the disk cache.
_refused: set[tuple] = set()
_refused_read = [False]
LLVM_FAILED = (RuntimeError,)  # what llvmlite raises when LLVM rejects a module (parsing, verification, codegen)
# HWEMU_STRICT=1 (hwemu's own tests): a translator bug on the compile thread is raised on the waves' thread, where it
# becomes an emulator-error fault; otherwise the region stays interpreted (correct, slower) and the bug is reported.
STRICT = os.environ.get("HWEMU_STRICT") == "1"


def compile_seconds() -> float:
    """Seconds this process has spent building and compiling regions, those in flight included (the dispatch
    watchdog does not count them)."""
    now = time.monotonic()
    return _compiling[0] + sum(now - t for t in list(_inflight.values()))


# the modules of emu/amd/exec the compiled code depends on: the translator, the operand binder and what it reads, the
# tables of what the tier takes, the state layout, the categories it tallies, the threaded tier, the accesses and
# the workgroup launcher
NATIVE_SOURCES = ("translate*.py", "threaded.py", "kinds.py", "access.py", "bind.py", "operands.py", "hwreg.py",
                  "state.py", "control.py", "takes.py", "category.py", "launch.py")


def _sources_digest() -> str:
    """What the compiled code depends on besides the region: NATIVE_SOURCES, the pcode compiler and its fixups."""
    h = hashlib.sha256()
    here = Path(translate.__file__).parent
    for f in sorted({*(f for pattern in NATIVE_SOURCES for f in here.glob(pattern)),
                     *Path(engine.__code__.co_filename).parent.glob("*.py")}):
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


_SOURCES = _sources_digest()


def sources() -> str:
    """The digest of the sources native code depends on (part of every cache key)."""
    return _SOURCES


def _refusals_file() -> Path:
    """The instructions the translator of these sources refused, one per line: processor, wave size, MODE, bytes."""
    from emu.pcode.llvmjit import cache_dir
    return cache_dir() / f"refused-{_SOURCES}"


def refused(entry: tuple) -> bool:
    """Whether the translator refused the instruction (processor, wave size, MODE, bytes), in any process."""
    if not _refused_read[0]:
        _refused_read[0] = True
        try:
            text = _refusals_file().read_text(errors="replace")
        except OSError:
            text = ""
        for line in text.splitlines():  # lines another process is still writing, or garbage: left out
            parts = line.split()
            if len(parts) == 4 and parts[1].isdigit() and parts[2].isdigit():
                try:
                    _refused.add((parts[0], int(parts[1]), int(parts[2]), bytes.fromhex(parts[3])))
                except ValueError:
                    pass
    return entry in _refused


def _refuse(entry: tuple) -> None:
    _refused.add(entry)
    arch, lanes, mode, raw = entry
    try:  # one short O_APPEND write: whole lines even with several processes appending
        path = _refusals_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{arch} {lanes} {mode} {raw.hex()}\n".encode())
        finally:
            os.close(fd)
    except OSError:  # an unwritable cache: other processes learn it themselves
        pass


def tier() -> str:
    t = os.environ.get("HWEMU_TIER", "auto") or "auto"
    if t not in TIERS:
        raise ValueError(f"HWEMU_TIER={t!r}: expected one of {', '.join(TIERS)}")
    return t


def hot_threshold(t: str) -> int | None:
    """Executions of a region entry before it is compiled (None: never)."""
    if t == "ref":
        return None
    return 1 if t == "jit" else int(os.environ.get("HWEMU_HOT", "64"))


def compile_cost(n: int) -> float:
    """Expected seconds to compile a region of n instructions."""
    fixed = os.environ.get("HWEMU_COMPILE_COST")
    return n * (float(fixed) if fixed else _compiled[1])


def _learn(n: int, seconds: float) -> None:
    total = _compiled[0] + n
    _compiled[1] = (_compiled[0] * _compiled[1] + seconds) / total
    _compiled[0] = total


class Counters:
    """The `ctr` words of a wave's native calls (emu.amd.exec.translate) and the addresses of its arrays."""

    def __init__(self, w: WaveState):
        self.ctr = np.zeros(CTR_WORDS, np.int64)
        lds = w.lds.mem if w.lds is not None else np.zeros(8, np.uint8)
        self.ctr[LDS_SIZE] = w.lds.size if w.lds is not None else 0
        self.lds = lds  # kept alive with the pointer
        self.args = (w.sgpr.ctypes.data, w.vgpr.ctypes.data, self.ctr.ctypes.data, lds.ctypes.data)


def counters(w: WaveState) -> Counters:
    if w.counters is None:
        w.counters = Counters(w)
    return w.counters


class Compiled:
    """A compiled region where it is in a program: `fn` (ctypes), its address, its entry's PC and the PCs it can
    start at. The code is position-independent: a call's counters must hold the entry (`arm`)."""

    def __init__(self, addr: int, entry: int, pcs: frozenset[int]):
        self.addr, self.entry, self.pcs, self.fn = addr, entry, pcs, _SIG(addr)

    def arm(self, ctr: np.ndarray) -> None:
        ctr[BASE] = self.entry


LATER = object()  # native(): the region does not pay back its compile yet


@contextlib.contextmanager
def compiling() -> Iterator[None]:
    """The time spent in it counts as compile time (compile_seconds), which the dispatch watchdog does not count: on
    the background thread the waves that run meanwhile share the host with it, on the waves' thread it is not the
    dispatch's work."""
    me = threading.get_ident()
    if me in _inflight:  # within an outer one
        yield
        return
    t0 = _inflight[me] = time.monotonic()
    try:
        yield
    finally:
        _compiling[0] += time.monotonic() - t0
        del _inflight[me]


def guarded(job: Callable[[], None]) -> None:
    """Run a compile job: LLVM's rejection of a module, or an emulator bug (raised under HWEMU_STRICT), leaves its
    code interpreted, with a warning and a count."""
    try:
        job()
    except LLVM_FAILED as e:  # LLVM rejected a module
        _interpreted("LLVM rejected the module", f"LLVM: {e}")
    except Exception as e:  # a translator bug
        if STRICT:
            raise
        _interpreted(f"emulator bug ({type(e).__name__})", f"an emulator bug: {type(e).__name__}: {e}; please "
                     "report it")


def native(prog, pc: int, mode: int, spent: Callable[[Iterable[int]], float] | None = None) -> Compiled | None:
    """The compiled region that starts at `pc` for `mode`, or None when the tier takes no instruction there (or the
    process is exiting). With `spent` (the seconds the given PCs' steps have run interpreted) a region that is not
    compiled yet (nor cached) is compiled only once that reaches its expected compile cost, else LATER is returned.
    The time it takes counts as compile time (`compiling`)."""
    with compiling():
        try:
            return _native(prog, pc, mode, spent)
        except Closed:
            return None


class _Background:
    """One thread that runs compile jobs in order, so that the waves never wait for LLVM under `auto`: its optimizer
    and code generator run without the GIL, on another core, while the waves go on interpreted."""

    def __init__(self) -> None:
        self._jobs: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.failed: Exception | None = None  # what a job raised, for raise_failure
        self.stopped = False  # the process is exiting (stop): no thread runs the jobs any more

    def __call__(self, job: Callable[[], None]) -> None:
        """Queue `job` (after `stop`: run it here). A failure of an earlier job is raised here (raise_failure)."""
        self.raise_failure()
        with self._lock:
            here = self.stopped
            if not here and self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="hwemu-compile", daemon=True)
                self._thread.start()
            if not here:
                self._jobs.put(job)
        if here:
            self._run(job)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the jobs submitted so far have run (True), or until the compile thread has spent `timeout`
        seconds of CPU time on them (False): a loaded machine slows the compiles, it does not make them look hung.
        A thread that stops using the CPU without finishing (a deadlock) is given up on after HANG_WALL seconds."""
        done = threading.Event()
        self(done.set)
        if timeout is None or done.is_set():
            done.wait()
            self.raise_failure()
            return True
        clock = time.pthread_getcpuclockid(self._thread.ident)
        start, began = time.clock_gettime(clock), time.monotonic()
        while not done.wait(0.5):
            if time.clock_gettime(clock) - start > timeout or time.monotonic() - began > HANG_WALL:
                return False
        self.raise_failure()
        return True

    def stop(self, timeout: float) -> bool:
        """The process is exiting: the compile thread ends after the jobs queued so far and is joined (up to `timeout`
        seconds: whether it ended). Later jobs run on the thread that submits them."""
        with self._lock:
            self.stopped, thread = True, self._thread
        if thread is None:
            return True
        self._jobs.put(None)
        thread.join(timeout)
        return not thread.is_alive()

    def _loop(self) -> None:
        while (job := self._jobs.get()) is not None:
            self._run(job)

    def _run(self, job: Callable[[], None]) -> None:
        try:
            guarded(job)
        except Exception as e:  # kept for the waves' thread, which raises it (raise_failure)
            self.failed = self.failed or e

    def raise_failure(self) -> None:
        """Raise, on the calling thread, what a job failed with other than LLVM's rejection (once)."""
        e, self.failed = self.failed, None
        if e is not None:
            raise e


background = _Background()  # background(job): run job() on the compile thread


def _interpreted(reason: str, detail: str) -> None:
    """Code that could not be compiled (a region, a handler) stays interpreted, which is always correct: counted
    under HWEMU_STATS and said once per detail. A client's warning filter that makes it an error raises it where the
    compile ran (on the compile thread: on the waves' thread later, raise_failure)."""
    takes.declined("native", None, reason)
    warnings.warn(f"hwemu: native code was not compiled ({detail}); it runs interpreted", RuntimeWarning,
                  stacklevel=1)


def _native(prog, pc: int, mode: int, spent) -> Compiled | None:
    exits: set[int] = set()
    arch, lanes = prog.planner.arch, prog.lanes

    def refusal(inst) -> tuple:  # an instruction's entry in _refused
        return arch, lanes, mode, inst.raw
    for _ in range(64):  # each failed attempt turns one more instruction into an exit
        region = Region(prog, pc, mode)
        try:
            insts = region.discover(exits, lambda i: refused(refusal(i)))
        except Exit:
            return None
        key = (arch, lanes, mode, tuple((p - pc, i.raw) for p, i in insts.items()), prog.stats)
        with _lock:
            addr = _cache.get(key)
            if addr is not None:
                return Compiled(addr, pc, frozenset(insts))
            disk_key = f"region {_SOURCES} {key!r}"
            access.ensure(prog.lanes, _SOURCES)
            addr = engine().load(disk_key)
            if addr is None:
                if spent is not None and spent(insts) < compile_cost(len(insts)):
                    return LATER
                t0 = time.monotonic()
                try:
                    mod = region.module("region", insts)
                    addr = engine().compile(mod, "region", disk_key)
                except Exit as e:
                    bad = e.args[0] if e.args and isinstance(e.args[0], int) else None  # the instruction's PC
                    if bad in insts:
                        _refuse(refusal(insts[bad]))
                        takes.declined("native", insts[bad], str(e.args[-1]))
                    if bad is None or bad == pc:
                        return None
                    exits.add(bad)
                    continue
                _learn(len(insts), time.monotonic() - t0)
            _cache[key] = addr
            return Compiled(addr, pc, frozenset(insts))
    return None
