"""One wave: its architectural state in flat arrays and its execution.

State: emu.amd.exec.state.

Execution: code is decoded once and every instruction gets an execution plan on first use (emu.amd.exec.plan): a
closure holding its operand fetchers, the compiled pcode semantics and its result writers. The hot loop only
looks up the step for the PC and calls it. A step returns 0, or BARRIER / END to suspend / finish the wave.
Faults raised while a step runs are completed with the wave's identity, PC, instruction text and active lanes.
In the `threaded` and `auto` tiers a step whose instructions have handlers runs the threaded tier's native loop
(emu.amd.exec.threaded) from its PC; a program's first step asks for its kernel's handlers, compiling those no
other run left on disk. In the `jit` and `auto` tiers (emu.amd.exec.jit) a hot PC's step becomes a
call of the native region that starts there; it runs until an instruction the region does not take and the loop
goes on at that PC. Under `auto` the region is compiled in the background (the step stays as it was until the
region is ready), under `jit` before the step goes on.
Under HWEMU_STATS a program's steps are built tallying their instructions by category into the wave's `tally`
(emu.amd.exec.category.tallied) and its native regions into their counters' TALLY words; without it nothing is added.
"""
from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from emu.amd import isa, target
from emu.amd.debug.history import NATIVE
from emu.amd.decode import decode, decoder
from emu.amd.exec import category, jit, threaded
from emu.amd.exec.hwreg import default_mode
from emu.amd.exec.interp import Interp
from emu.amd.exec.plan import Planner, end_step
from emu.amd.exec.state import ACC, BARRIER, END, WaveState
from emu.amd.exec.translate import BRANCHES, EXECUTED, LANE_OPS, LDS_SIZE, STATUS
from emu.amd.memory import VM, FaultRecord, GPUFault
from emu.amd.memspace import LDS, Flat, Scratch
from emu.pcode.llvmjit import GATE
from emu.pcode.typed import Unsupported as PcodeUnsupported

DEFAULT_LIMIT = 50_000_000  # instructions per wave before the watchdog stops a runaway wave
SLICE = 1 << 16  # instructions between the watchdog's looks at the clock


class Program:
    """Decoded code with lazily built execution plans, for one processor (or family) and wave size."""

    def __init__(self, arch: str, lanes: int, fetch, stats: bool | None = None):
        """`fetch(pc, n) -> bytes` reads up to n bytes of code at pc (raises GPUFault when unmapped); `stats`: tally
        wave-instructions by category (default: HWEMU_STATS)."""
        self.family, self.lanes = isa.name(arch), lanes  # its instruction set (the generation's)
        self.fetch = fetch
        self.steps: dict[int, object] = {}
        self.compiled: dict[tuple[int, int], jit.Compiled] = {}  # (pc, MODE) -> the native region holding pc
        self.spent: dict[int, list[float]] = {}  # pc -> seconds its step has run interpreted (under `auto`)
        self.looks: dict[int, tuple[int, int]] = {}  # entry pc -> (launches, the launch of the next look at it)
        self.ahead = 0.0  # the running dispatch's workgroups still to start, per workgroup started
        self.insts: dict[int, object] = {}
        self.planner = Planner(arch, lanes)
        self.tier = jit.tier()
        self.hot = None if self.tier in ("interp", "threaded") else jit.hot_threshold(self.tier)
        self.stats = category.enabled() if stats is None else stats  # steps and native regions tally by category
        lean = self.tier != "ref"  # the lean interpreter runs what native code does not
        self.interp = Interp(self.planner, self.inst) if lean else None
        self.threaded = threaded.Table(self) \
            if self.tier in ("threaded", "auto") and threaded.enabled() else None

    def predecode(self, code: bytes, base: int) -> None:
        for inst in decode(code, self.family, base):
            self.insts[inst.pc] = inst

    def inst(self, pc: int):
        i = self.insts.get(pc)
        if i is None:
            d = decoder(self.family)
            raw = self.fetch(pc, 16)
            i = d.decode_one(raw, 0, pc)
            self.insts[pc] = i
        return i

    def build(self, pc: int):
        inst = self.inst(pc)
        if self.threaded is not None:  # the interpreter's step is built only if the native loop cannot start at pc
            s = self.threaded.fallback(lambda until: self._plan(inst, until))
            s = self.threaded.step(pc, s, lambda fn, arm, s=s: self._call(pc, fn, s, arm))
        else:
            s = self._plan(inst)
        if self.hot is not None:
            s = self._counted(pc, s)
        self.steps[pc] = s
        return s

    def _plan(self, inst, until=None):
        """The interpreter's step at inst (its block ends before the first PC for which `until` holds)."""
        s = self.interp.plan(inst, until) if self.interp is not None else self.planner.plan(inst)
        if self.stats:
            members = self.interp.members(inst, until) if self.interp is not None else [inst]
            s = category.tallied(s, [category.category(i) for i in members])
        return s

    def threaded_step(self, pc: int, step, ran: Callable[[WaveState, list[int]], None] | None = None,
                      accessed: Callable[[np.ndarray], None] | None = None):
        """The step at pc of a wave that leaves the native launcher (traced, or counted): the threaded tier's loop
        once it has pc's handler, logging the PCs it runs for `ran(w, pcs)` and the memory accesses for
        `accessed(records)` (emu.amd.exec.threaded.Table.step); else `step`."""
        if self.threaded is None:
            return step
        return self.threaded.step(pc, step, lambda fn, arm: self._call(pc, fn, step, arm), ran, accessed)

    def single(self, pc: int):
        """The step of the one instruction at pc (no block, no native code: what a traced wave runs)."""
        inst = self.inst(pc)
        s = self.interp.single(inst) if self.interp is not None else self.planner.plan(inst)
        return category.tallied(s, [category.category(inst)]) if self.stats else s

    def _counted(self, pc: int, step):
        """`step`, until it has run `hot` times: then the native region at pc replaces it (if there is one). Under
        `auto` the step's interpreted time is kept (`spent`) and the region is looked at whenever its run count
        doubles, until it pays back its compile (emu.amd.exec.jit.native)."""
        if self.tier == "jit":
            def first(w):
                s = self.steps[pc] = self._native(pc, step, w.mode) or step
                return s(w)
            return first
        clock = time.perf_counter
        runs, look, spent = [0], [self.hot], self.spent.setdefault(pc, [0.0])

        def counted(w):
            t0 = clock()
            r = step(w)
            spent[0] += clock() - t0
            runs[0] += 1
            if runs[0] == look[0]:  # compiled off this thread; the waves go on interpreted meanwhile
                look[0] = -1  # one look at a time
                jit.background(lambda mode=w.mode: self._consider(pc, step, mode, runs, look))
            return r
        return counted

    def launched(self, pc: int, seconds: float, mode: int) -> None:
        """The native launcher ran waves from the entry `pc` on the threaded loop for `seconds`: that time counts as
        the entry's (as an interpreted step's does), and the region from `pc` is looked at (compiled once it pays
        back, emu.amd.exec.jit.native) at the first launch and whenever the launches have doubled since."""
        if self.hot is None:
            return
        self.spent.setdefault(pc, [0.0])[0] += seconds
        n, look = self.looks.get(pc, (0, 1))
        self.looks[pc] = n + 1, look
        if n + 1 != look:
            return
        self.looks[pc] = n + 1, -1  # one look at a time

        def consider():
            if self._region(pc, mode, self._spent) is jit.LATER:
                self.looks[pc] = self.looks[pc][0], 2 * (n + 1)
        jit.background(consider)

    def _consider(self, pc: int, step, mode: int, runs: list[int], look: list[int]) -> None:
        s = self._native(pc, step, mode, self._spent)
        if s is jit.LATER:
            look[0] = 2 * runs[0]
        elif s is not None:
            self.steps[pc] = s

    def _spent(self, pcs) -> float:
        """Seconds the steps at `pcs` have run interpreted, and will run in the rest of the dispatch running them
        (`ahead` times as long: workgroups do alike work)."""
        spent = self.spent
        return sum(spent[p][0] for p in pcs if p in spent) * (1 + self.ahead)

    def _native(self, pc: int, step, mode: int, spent=None):
        region = self._region(pc, mode, spent)
        return region if region is None or region is jit.LATER else self._call(pc, region.fn, step, region.arm)

    def _region(self, pc: int, mode: int, spent=None):
        """The compiled region from pc (jit.native: None, or LATER while it does not pay back), installed."""
        region = self.compiled.get((pc, mode))
        if region is None:
            region = jit.native(self, pc, mode, spent)
            if region is None or region is jit.LATER:
                return region
            for p in region.pcs:  # a wave that comes to any of its instructions can start there
                self.compiled.setdefault((p, mode), region)
        return region

    def _call(self, pc: int, fn, step, arm: Callable[[np.ndarray], None]):
        """The step that runs native `fn` (a region's signature) from pc, and `step` where it runs nothing;
        `arm(ctr)` fills in the counters' words that `fn` needs (a region's entry, the threaded tier's tables)."""
        def run_native(w):
            if w.gpr_idx:  # CDNA VGPR indexing mode: the interpreter's (regions never turn it on)
                return step(w)
            c = jit.counters(w)
            ctr = c.ctr
            ix = w.vm.index if w.vm is not None else None  # held during the call: the mapped buffers stay alive
            table = jit.NO_MAPPINGS if ix is None else ix.table
            ctr[:STATUS + 1] = (min(jit.BUDGET, w.left), 0, 0, ctr[LDS_SIZE], table.ctypes.data, pc, 0)
            arm(ctr)
            branches = int(ctr[BRANCHES])
            if not GATE.enter():  # the process is exiting
                return step(w)
            try:
                nxt = fn(*c.args)
            finally:
                GATE.leave()
            if nxt < 0 or not ctr[EXECUTED]:  # not the region's MODE, or its first access needs the VM
                return step(w)
            w.history.append(NATIVE + branches)
            w.pc = nxt
            w.left -= int(ctr[EXECUTED]) - 1  # the run loop counts this step as one
            w.lane_ops += int(ctr[LANE_OPS])
            if w.exec != w.active_mask:
                w.set_exec(w.exec)
            return int(ctr[STATUS])
        return run_native


class Cancel:
    """A request to stop a dispatch at its next watchdog check, from another thread (a queue destroyed while its
    dispatch runs): `why` names it."""
    why = ""


class Deadline:
    """The work a dispatch may do, as CPU time of the thread running it (checked there): time the thread waits (for
    the GIL, for other processes on a loaded machine) is not counted, so the verdict does not depend on the machine's
    load; nor is time spent compiling native regions meanwhile. A `cancel` with a reason ends it too. The clock
    starts at the first check (after a slice of a wave's instructions, or 16 waves): reading a thread's CPU time is a
    system call, which costs more than most dispatches' waves, and a short dispatch never reads it."""

    def __init__(self, seconds: float, cancel: Cancel | None = None):
        self.seconds, self.cancel = seconds, cancel
        self.end: float | None = None  # the thread's CPU time at which it passes, from the first check
        self.compiled = 0.0
        self.asked = 0
        self.over = False  # passed() has said so (the native launcher asks, the waves it hands over then know)

    def passed(self) -> bool:
        if self.end is None:
            self.end, self.compiled = time.thread_time() + self.seconds, jit.compile_seconds()
        self.over = self.over or bool(self.cancel and self.cancel.why) or \
            time.thread_time() - (jit.compile_seconds() - self.compiled) > self.end
        return self.over

    def reason(self) -> str:
        """Why the watchdog stops the dispatch."""
        if self.cancel and self.cancel.why:
            return self.cancel.why
        return (f"dispatch ran longer than {self.seconds:g} s of engine CPU time (HWEMU_TIMEOUT=S raises the budget, "
                "0 removes it)")

    def passed_lately(self) -> bool:
        """`passed`, the clocks looked at every 16th time asked (each wave's start asks: they cost more than a short
        wave), the cancel each time."""
        self.asked += 1
        return self.over or bool(self.cancel and self.cancel.why) or not self.asked & 15 and self.passed()


def run(w: WaveState, prog: Program, limit: int = DEFAULT_LIMIT, left: int | None = None,
        deadline: Deadline | None = None, errstate: bool = True) -> int:
    """Run `w` until it reaches s_barrier (returns BARRIER) or s_endpgm (returns END). The watchdog allows `limit`
    instructions (or `left`, what a wave resumed from native code has left of them) and time until `deadline`,
    checked every SLICE instructions. `w.left` counts down the instructions of the current slice
    (a native region step takes its instructions from it too). The interp tier's fused steps set no np.errstate of
    their own: run sets it, or, with `errstate=False`, its caller has (once around many waves)."""
    if errstate:
        with np.errstate(all="ignore"):
            return run(w, prog, limit, left, deadline, errstate=False)
    steps, build = (prog.steps, prog.build) if w.trace is None else (w.trace.steps, w.trace.build)
    allowed = rest = limit if left is None else left
    w.left = 0
    started = w.history.append  # where each step starts: the fault report's last instructions (emu.amd.debug)
    try:
        while True:
            if w.left <= 0:
                if rest <= 0:
                    raise _watchdog(w, prog, f"wave ran {limit} instructions without ending or reaching a barrier "
                                             "(HWEMU_WAVE_LIMIT=N raises the budget)")
                # at a wave's start the clocks are looked at lately, after each slice every time (16 slices of
                # the reference tier are half a minute)
                if deadline is not None and (deadline.passed() if rest < allowed else deadline.passed_lately()):
                    raise _watchdog(w, prog, deadline.reason())
                w.left = min(rest, SLICE)
                rest -= w.left
            pc = w.pc
            s = steps.get(pc)
            if s is None:
                s = build(pc)
            started(pc)
            r = s(w)
            w.left -= 1
            if r:
                return r
    except GPUFault as e:
        _complete(e.record, w, prog)
        raise
    except PcodeUnsupported as e:  # a case the semantics say is not modelled (the fixup table's unsupported())
        rec = FaultRecord("unsupported-instruction", detail=f"not modelled: {e}")
        _complete(rec, w, prog)
        raise GPUFault(rec) from e
    except Exception as e:  # an emulator gap must not take the host down: report it as a fault of this wave
        rec = FaultRecord("emulator-error", detail=f"{type(e).__name__}: {e}")
        _complete(rec, w, prog)
        raise GPUFault(rec) from e
    finally:
        w.executed += allowed - rest - max(w.left, 0)
        w.left += rest  # what the watchdog still allows


def _watchdog(w: WaveState, prog: Program, why: str) -> GPUFault:
    """The watchdog's fault: the wave runs its last WATCHDOG_TAIL instructions recorded (the hot loop keeps no
    history), then stops; the record gives where it stopped and the wave's state there."""
    ran = []
    try:
        for _ in range(WATCHDOG_TAIL):
            ran.append(f"{w.pc:#x}: {prog.inst(w.pc)}")
            w.history.append(w.pc)
            r = (prog.steps.get(w.pc) or prog.build(w.pc))(w)
            w.executed += 1
            if r:
                break
    except Exception as e:  # the dump must not hide the watchdog
        ran.append(f"({type(e).__name__} while recording)")
    pc = w.pc
    dump = (f"wave dump: pc {pc:#x} exec {w.exec:#x} vcc {w.vcc:#x} scc {w.scc} "
            f"s0..s7 {' '.join(f'{int(x):#x}' for x in w.sgpr[:8])}; last instructions: {' | '.join(ran)}")
    return GPUFault(FaultRecord("watchdog", pc=pc, instruction=str(prog.inst(pc)), detail=f"{why}; {dump}"))


WATCHDOG_TAIL = 8  # instructions the watchdog's wave dump shows


def _complete(rec: FaultRecord, w: WaveState, prog: Program) -> None:
    rec.dispatch = rec.dispatch if rec.dispatch is not None else w.dispatch
    rec.workgroup = rec.workgroup or w.workgroup
    rec.wave = rec.wave if rec.wave is not None else w.wave_id
    if rec.pc is None:
        rec.pc = w.pc
        i = prog.insts.get(w.pc)
        rec.instruction = str(i) if i is not None else None
    if rec.active_lanes is None:
        rec.active_lanes = tuple(int(x) for x in np.flatnonzero(w.active))
    if rec.report is None:
        from emu.amd.debug import fault
        rec.report = fault.wave_report(rec, w, prog)


class Wave(WaveState):
    """A free-standing wave for running register-only instruction snippets, e.g. to fuzz semantics:

        w = Wave("gfx1100"); w.vgpr[1] = ...; w.run(code_bytes); w.vgpr[0]

    `run` executes until s_endpgm or the end of the code. MODE starts as a clang-19 kernel's descriptor sets it
    (emu.amd.exec.hwreg.default_mode: denormals kept, IEEE and DX10_CLAMP on). The wave has 64 KiB of LDS; its VM
    (`.vm`) starts empty, so global memory instructions fault unless something is mapped."""

    def __init__(self, arch: str, wave_size: int | None = None):
        gen = target.generation(arch)
        lanes = wave_size or gen.wave_size
        if lanes not in gen.wave_sizes:
            raise ValueError(f"{arch} runs waves of {' or '.join(map(str, gen.wave_sizes))} lanes, not {lanes}")
        super().__init__(arch, lanes, agprs=gen.agprs)
        self.arch = arch
        self.mode = default_mode(gen.name)
        self.vm = VM()
        self.lds = LDS(65536)
        self.scratch = Scratch(self.vm, 0, lanes, 0)  # no private segment: scratch accesses fault
        self.flat = Flat(self.vm, self.lds, self.scratch)

    def run(self, code: bytes, pc: int = 0, limit: int = 1_000_000) -> None:
        code = bytes(code)
        end = pc + len(code)

        def fetch(at: int, n: int) -> bytes:
            if not pc <= at < end:
                raise GPUFault(FaultRecord("illegal-instruction", detail=f"pc {at:#x} outside the snippet"))
            return code[at - pc:at - pc + n]
        prog = Program(self.arch, self.lanes, fetch)
        prog.predecode(code, pc)
        prog.steps[end] = end_step
        self.pc = pc
        run(self, prog, limit)


__all__ = ["Wave", "WaveState", "Program", "run", "END", "BARRIER", "ACC"]
