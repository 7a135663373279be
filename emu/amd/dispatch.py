"""Kernel dispatch: workgroups, their waves, LDS, barriers, scratch and the initial register state.

The initial state follows LLVM AMDGPUUsage "Initial Kernel Execution State": enabled user SGPRs in order
(private segment buffer, dispatch ptr, queue ptr, kernarg segment ptr, dispatch id, flat scratch init, private
segment size), then from `user_sgpr_count` the system SGPRs (workgroup id x/y/z, workgroup info, private
segment wave offset without architected flat scratch; on gfx12 the workgroup ids are also in ttmp9 and
ttmp7, its architected SGPRs); work-item ids packed 10:10:10 in v0 (gfx90a+, gfx11+) or
in v0..v2. Each wave is given a slot of the scratch buffer (COMPUTE_DISPATCH_SCRATCH_BASE + slot *
TMPRING_SIZE.WAVESIZE). With architected flat scratch (gfx942+, gfx11+) scratch instructions (and flat accesses to the
private aperture) reach that slot through the VM (emu.amd.memspace); without it (gfx90a) the wave is told its slot's
offset in the private segment wave offset SGPR, and reaches its scratch through the FLAT_SCRATCH base the kernel
computes from it, or through the private segment buffer resource.

Workgroups run one after another; the waves of a workgroup run round-robin, each until it reaches s_barrier
or s_endpgm; a barrier releases when every wave still running has reached it.
"""
from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from emu.amd import target, timeline
from emu.amd.debug import fault, wavetrace
from emu.amd.exec.hwreg import gpr_alloc, initial_mode
from emu.amd.exec.launch import Launch
from emu.amd.exec.state import CATEGORIES
from emu.amd.exec.translate import TALLY
from emu.amd.exec.wave import BARRIER, DEFAULT_LIMIT, Cancel, Deadline, Program, WaveState, run
from emu.amd.hw.kd import Rsrc1, Rsrc2
from emu.amd.limits import MAX_WORKGROUP_SIZE, Kernel, LimitError, check_grid, check_private
from emu.amd.memory import VM, GPUFault
from emu.amd.memspace import LDS, Flat, Scratch
from emu.amd.regs import TTMP0
from emu.amd.symbols import dispatch_name
from emu.pcode.llvmjit import GATE

DEFAULT_TIMEOUT = 60.0  # seconds of engine CPU time per dispatch before the watchdog stops it (amdgpu's compute
# lockup timeout; CPU time, not wall time: a loaded machine does not make a correct kernel look hung)


@dataclass
class Dispatch:
    """One dispatch as the command processor starts it: everything comes from the compute registers a runtime
    programmed (the kernel descriptor is not consulted), plus the grid of DISPATCH_DIRECT."""
    program: Program
    entry: int  # COMPUTE_PGM_LO/HI: address of the first instruction
    grid: tuple[int, int, int]  # workgroups per dimension
    block: tuple[int, int, int]  # COMPUTE_NUM_THREAD_X/Y/Z
    lanes: int  # 32 with DISPATCH_INITIATOR.CS_W32_EN on gfx10+, else 64
    rsrc2: Rsrc2
    user_sgprs: tuple[int, ...]  # COMPUTE_USER_DATA_0.. (RSRC2.USER_SGPR of them are loaded)
    lds_size: int  # bytes (RSRC2.LDS_SIZE granules)
    scratch_base: int = 0  # COMPUTE_DISPATCH_SCRATCH_BASE
    scratch_wave_bytes: int = 0  # TMPRING_SIZE.WAVESIZE in bytes
    scratch_waves: int = 0  # TMPRING_SIZE.WAVES
    start: tuple[int, int, int] = (0, 0, 0)  # COMPUTE_START_X/Y/Z: first workgroup id
    dispatch_id: int = 0
    rsrc1: Rsrc1 = field(default_factory=lambda: Rsrc1(0))  # COMPUTE_PGM_RSRC1 (float modes at wave start)
    kernel: fault.Kernel | None = None  # what the launcher knows of the kernel, for fault reports
    cancel: Cancel | None = None  # its queue's: set when the queue is destroyed while the dispatch runs
    trace: object | None = None  # what records its waves' instructions (emu.amd.sqtt.Recording), beside HWEMU_TRACE
    counters: object | None = None  # what is told the statistics after each workgroup (emu.amd.perfmon.Counting)


@dataclass
class Stats:
    """Work done by a dispatch; under HWEMU_STATS (its program's `stats`) also its wave-instructions by category
    (emu.amd.exec.category: CATEGORIES order), how many of them ran natively, and what the dispatch was given."""
    waves: int = 0
    wave_instructions: int = 0
    lane_instructions: int = 0
    categories: list[int] = field(default_factory=lambda: [0] * len(CATEGORIES))
    native: int = 0  # wave-instructions run in native regions
    kernel: str = ""  # emu.amd.symbols.dispatch_name
    dispatch: int = 0  # the dispatch id
    tier: str = ""  # HWEMU_TIER of the program
    lds_bytes: int = 0  # LDS allocated per workgroup
    scratch_bytes: int = 0  # private (scratch) memory per wave: TMPRING_SIZE.WAVESIZE


def run_dispatch(vm: VM, d: Dispatch, arch: str, timeout: float | None = None) -> Stats:
    """Run every workgroup of `d`; a fault propagates as GPUFault (the dispatch stops there). The watchdog stops a
    dispatch that runs longer than `timeout` seconds of the calling thread's CPU time (default: dispatch_timeout();
    0 or less: no limit); its fault names the kernel."""
    tl = timeline.session()
    if tl is None:
        return _run_dispatch(vm, d, arch, timeout, None)
    record = tl.dispatch(vm, d, arch)
    try:
        stats = _run_dispatch(vm, d, arch, timeout, record.workgroup)
    except GPUFault as e:
        record.finish(e)
        raise
    record.finish(None)
    return stats


def _run_dispatch(vm: VM, d: Dispatch, arch: str, timeout: float | None, on_workgroup) -> Stats:
    """run_dispatch; `on_workgroup(wg, ids, counts)`, when given, is told each workgroup's wave-instruction counts
    (the native launcher then runs one workgroup per call)."""
    nitems = d.block[0] * d.block[1] * d.block[2]
    slots = _WaveSlots(vm, d, arch, -(-nitems // d.lanes), nitems)
    timeout = dispatch_timeout() if timeout is None else timeout
    deadline = Deadline(timeout if timeout > 0 else math.inf, d.cancel) if timeout > 0 or d.cancel else None
    stats = Stats()
    if d.program.stats:
        stats.kernel, stats.dispatch, stats.tier = dispatch_name(vm, d), d.dispatch_id, d.program.tier
        stats.lds_bytes, stats.scratch_bytes = d.lds_size, d.scratch_wave_bytes
    try:
        with np.errstate(all="ignore"):  # for every wave's run (emu.amd.exec.wave.run) at once
            return _run(vm, d, slots, deadline, on_workgroup, stats)
    except GPUFault as e:
        if d.counters is not None:  # the part of its workgroup the fault left
            d.counters.workgroup(stats)
        rec = e.record
        if rec.kind == "watchdog":
            name = dispatch_name(vm, d)
            rec.detail = f"watchdog stopped kernel {name}: {rec.detail}"
            if rec.report is not None:
                rec.report.summary, rec.report.kernel = rec.line(), name
        if rec.report is not None:
            rec.report.describe(d.grid, d.block, d.kernel)
        raise


def _run(vm: VM, d: Dispatch, slots: _WaveSlots, deadline: Deadline | None, on_workgroup, stats: Stats) -> Stats:
    gx, gy, gz = d.grid
    total = gx * gy * gz
    wg = 0
    each = on_workgroup is not None or d.counters is not None  # one workgroup per native call
    while wg < total:
        launch = None if slots.traced(wg) else slots.launch()
        if launch is None or not GATE.enter():  # traced, no native entry yet, or the process is exiting
            d.program.ahead = (total - wg - 1) / (wg + 1)  # for the compile's cost model (Program._spent)
            _run_workgroup(slots.start(wg), d.program, stats, deadline, slots.limit)
            if on_workgroup is not None:
                on_workgroup(wg, slots.ids(wg), [w.executed for w in slots.waves])
            if d.counters is not None:
                d.counters.workgroup(stats)
            wg += 1
            continue
        end = wg + 1 if each else slots.untraced(wg, total)
        fn, arm, looped = slots.region()
        t0 = time.thread_time()
        try:
            mapped = vm.index  # held during the call: the host buffers its table points into stay alive
            wg = launch.run(fn, arm, mapped.table, wg, end, deadline)
        finally:
            GATE.leave()
            if looped:  # the threaded loop's time counts for the entry's region (its cost model)
                d.program.ahead = (total - wg) / max(wg, 1)  # what is left of this dispatch: mostly nothing
                d.program.launched(d.entry, time.thread_time() - t0, slots.mode)
            waves, executed, lane_ops = launch.totals()
            stats.waves += waves
            stats.wave_instructions += executed
            stats.lane_instructions += lane_ops
            if d.program.stats:
                _add_native(stats, launch.ctr)
        native = wg == end
        if not native:  # a wave needs the interpreter (or the time is up): Python goes on with its workgroup
            ids = slots.ids(wg)
            for w in slots.waves:
                w.workgroup, w.trace = ids, None
            pending, waiting, left = launch.hand_over()
            _run_workgroup(slots.waves, d.program, stats, deadline, slots.limit, pending, waiting, left)
            wg += 1
        if on_workgroup is not None:
            on_workgroup(wg - 1, slots.ids(wg - 1), launch.executed() if native else [w.executed for w in slots.waves])
        if d.counters is not None:
            d.counters.workgroup(stats)
    return stats


def dispatch_timeout() -> float:
    """Seconds of engine CPU time a dispatch may run: HWEMU_TIMEOUT (default 60; 0 or less: no limit)."""
    text = os.environ.get("HWEMU_TIMEOUT", "") or str(DEFAULT_TIMEOUT)
    try:
        t = float(text)
    except ValueError:
        raise ValueError(f"HWEMU_TIMEOUT={text!r}: expected seconds (a number)") from None
    return t


def wave_limit() -> int:
    """Instructions a wave may run between barriers before the watchdog stops it: HWEMU_WAVE_LIMIT (default
    emu.amd.exec.wave.DEFAULT_LIMIT)."""
    text = os.environ.get("HWEMU_WAVE_LIMIT", "") or str(DEFAULT_LIMIT)
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n <= 0:
        raise ValueError(f"HWEMU_WAVE_LIMIT={text!r}: expected a positive number of instructions")
    return n


def _run_workgroup(waves: list[WaveState], program: Program, stats: Stats, deadline: Deadline | None, limit: int,
                   live: list[WaveState] | None = None, waiting: tuple | list = (), left: int | None = None) -> None:
    """Run the waves round-robin, each until s_barrier or s_endpgm, releasing the barrier when every wave still
    running has reached it. A workgroup taken over in the middle of a round gives the waves still to run in it
    (`live`, the first with `left` instructions of its watchdog) and those already `waiting` at the barrier. The
    caller holds np.errstate(all="ignore")."""
    live = list(waves) if live is None else live
    at_barrier = list(waiting)
    try:
        while live:
            for w in live:
                if run(w, program, limit, left=left, deadline=deadline, errstate=False) == BARRIER:
                    at_barrier.append(w)
                left = None
            live, at_barrier = at_barrier, []  # every running wave reached the barrier (or ended): release it
    finally:
        for w in waves:
            stats.waves += 1
            stats.wave_instructions += w.executed
            stats.lane_instructions += w.lane_ops
        if program.stats:
            _add_tallies(stats, waves)


def _add_tallies(stats: Stats, waves: list[WaveState]) -> None:
    """Add the waves' category tallies (of interpreted steps and native calls) to `stats`, clearing them."""
    for w in waves:
        stats.categories = [a + b for a, b in zip(stats.categories, w.tally, strict=True)]
        w.tally = [0] * len(CATEGORIES)
        if w.counters is not None:
            _add_native(stats, w.counters.ctr)


def _add_native(stats: Stats, ctr: np.ndarray) -> None:
    """Add the category words of native calls' counters `ctr` (emu.amd.exec.translate.TALLY) to `stats`, clearing
    them."""
    words = ctr[TALLY:TALLY + len(CATEGORIES)]
    stats.categories = [a + int(b) for a, b in zip(stats.categories, words, strict=True)]
    stats.native += int(words.sum())
    words[:] = 0


class _WaveSlots:
    """The waves of a workgroup, made once per dispatch and reset for each workgroup it runs: their register
    arrays, LDS, scratch slots and native-call counters are reused; only the workgroup ids and the state the
    previous workgroup left change. Once the program's entry has a native region, the native launcher
    (emu.amd.exec.launch) runs the workgroups over the same arrays."""

    def __init__(self, vm: VM, d: Dispatch, arch: str, nwaves: int, nitems: int):
        self.d = d
        self.limit = wave_limit()  # the watchdog's instructions per wave between barriers
        seen = d.counters.accesses if d.counters is not None else None  # counters that need the addresses
        self.lds = LDS(d.lds_size) if seen is None else seen.lds(d.lds_size)
        vm = vm if seen is None else seen.vm(vm)
        self.waves, self.initial = [], []
        chip = target.get(arch)
        offset_slot = -1 if chip.gen.architected_scratch else _wave_offset_slot(d.rsrc2)
        for i in range(nwaves):
            w = _initial_wave(d, i, nitems, chip)
            w.vm, w.lds = vm, self.lds
            slot = i % d.scratch_waves if d.scratch_waves else 0  # the scratch wave slot the wave is given
            if offset_slot >= 0:  # the kernel adds it to the flat scratch init and to buffer scratch offsets
                w.sgpr[offset_slot] = slot * d.scratch_wave_bytes
            w.scratch = Scratch(vm, d.scratch_base + slot * d.scratch_wave_bytes, d.lanes,
                                d.scratch_wave_bytes // d.lanes, None if chip.gen.architected_scratch else w.sgpr)
            w.flat = Flat(vm, self.lds, w.scratch)
            w.dispatch, w.wave_id = d.dispatch_id, i
            self.waves.append(w)
            self.initial.append((w.sgpr.copy(), w.vgpr[:3].copy()))
        self._reset = [(w.vgpr.view(np.uint8), w.active_mask, w.active) for w in self.waves]  # VGPR bytes, EXEC
        self.mode = self.waves[0].mode
        self.id_slots = _id_slots(d.rsrc2)
        self.fresh = True
        self._launch: Launch | None = None
        t, k = wavetrace.tracer(), d.kernel
        self.trace = wavetrace.both(d.trace, t and t.selector(seen or d.program, k and k.name, d.dispatch_id,
                                                              k and k.base))
        if seen is not None:  # every wave runs on the interpreter, its memory accesses seen
            self.trace = seen.beside(self.trace)

    def ids(self, wg: int) -> tuple[int, int, int]:
        """The ids of the workgroup with linear index `wg` (x fastest)."""
        (gx, gy, _), (sx, sy, sz) = self.d.grid, self.d.start
        return sx + wg % gx, sy + wg // gx % gy, sz + wg // (gx * gy)

    def start(self, wg: int) -> list[WaveState]:
        if not self.fresh:  # the previous workgroup's waves: back to the initial state
            self.lds.mem.fill(0)
            for w, (sgpr, v012), (vbytes, mask, lanes) in zip(self.waves, self.initial, self._reset, strict=True):
                w.sgpr[:] = sgpr  # EXEC's slots included
                vbytes.fill(0)  # as bytes: a memset
                w.vgpr[:3] = v012
                w.active_mask, w.active = mask, lanes
                w.pc, w.executed, w.lane_ops, w.gpr_idx = self.d.entry, 0, 0, 0
                w.history.clear()
        self.fresh = False
        ids = self.ids(wg)
        for w in self.waves:
            _set_workgroup(w, self.id_slots, ids)
            if self.trace is not None:
                w.trace = self.trace.wave(ids, w.wave_id)
        return self.waves

    def region(self) -> tuple[int, Callable, bool] | None:
        """The native function the launcher runs the waves with, for their initial MODE, how to arm its counters,
        and whether it is the threaded loop: the region holding the entry once compiled, else the threaded loop once
        the entry's handler is installed."""
        prog = self.d.program
        c = prog.compiled.get((self.d.entry, self.mode))
        if c is not None:
            return c.addr, c.arm, False
        loop = prog.threaded.loop_from(self.d.entry) if prog.threaded is not None else None
        return (loop, prog.threaded.arm, True) if loop is not None else None

    def traced(self, wg: int) -> bool:
        """Whether a wave of workgroup `wg` (linear index) is traced: the workgroup then runs wave by wave here, not
        on the native launcher."""
        if self.trace is None:
            return False
        ids = self.ids(wg)
        return any(self.trace.selects(ids, i) for i in range(len(self.waves)))

    def untraced(self, wg: int, end: int) -> int:
        """The first workgroup after `wg` (before `end`) with a traced wave, else `end`: the native launcher runs
        the ones before it."""
        return next((n for n in range(wg + 1, end) if self.traced(n)), end) if self.trace is not None else end

    def launch(self) -> Launch | None:
        """The native launcher, once the entry has native code (for workgroups whose waves are not traced)."""
        if self._launch is None and self.region() is not None:
            self._launch = Launch(self.waves, self.initial, self.lds, self.d.entry, self.d.grid, self.d.start,
                                  self.id_slots, self.limit)
        if self._launch is not None:
            self.fresh = False  # the launcher leaves the arrays as its last workgroup ended
        return self._launch


def _initial_wave(d: Dispatch, index: int, nitems: int, chip: target.Target) -> WaveState:
    """Wave `index` of a workgroup at its start, but for the workgroup ids (_set_workgroup)."""
    fam = d.program.family
    lanes = d.lanes
    w = WaveState(chip.arch, lanes, agprs=chip.gen.agprs)
    w.mode = initial_mode(fam, d.rsrc1)  # FP_ROUND, FP_DENORM, DX10_CLAMP, IEEE from COMPUTE_PGM_RSRC1
    w.gpr_alloc = gpr_alloc(fam, lanes, d.rsrc1)
    n = d.rsrc2.user_sgpr_count
    w.sgpr[:n] = (list(d.user_sgprs[:n]) + [0] * n)[:n]  # USER_DATA registers a runtime did not write read as 0
    # work-item ids of each lane
    t = index * lanes + np.arange(lanes)
    bx, by, _ = d.block
    x, y, z = t % bx, (t // bx) % by, t // (bx * by)
    ndims = d.rsrc2.enable_vgpr_workitem_id
    ids = [x, y if ndims >= 1 else 0 * y, z if ndims >= 2 else 0 * z]
    if chip.packed_work_item_ids:  # work-item ids packed 10:10:10 in v0
        w.vgpr[0] = (ids[0] | ids[1] << 10 | ids[2] << 20).astype(np.uint32)
    else:
        for dim in range(ndims + 1):
            w.vgpr[dim] = ids[dim].astype(np.uint32)
    w.set_exec((1 << max(0, min(lanes, nitems - index * lanes))) - 1)  # the lanes that hold work-items
    w.pc = d.entry
    return w


def _id_slots(r2: Rsrc2) -> tuple[int, int, int, int]:
    """The SGPRs of workgroup id x, y, z and workgroup info after the user SGPRs (-1: not enabled)."""
    s = r2.user_sgpr_count
    out = []
    for name in ("workgroup_id_x", "workgroup_id_y", "workgroup_id_z", "workgroup_info"):
        on = getattr(r2, f"enable_sgpr_{name}")
        out.append(s if on else -1)
        s += bool(on)
    return tuple(out)


def _wave_offset_slot(r2: Rsrc2) -> int:
    """The SGPR of the private segment wave byte offset, after the workgroup ids and info (-1: not enabled)."""
    if not r2.enable_private_segment:
        return -1
    return r2.user_sgpr_count + sum(bool(getattr(r2, f"enable_sgpr_{n}")) for n in
                                    ("workgroup_id_x", "workgroup_id_y", "workgroup_id_z", "workgroup_info"))


def _set_workgroup(w: WaveState, id_slots: tuple[int, int, int, int], wg: tuple[int, int, int]) -> None:
    """The system SGPRs of workgroup `wg` in their `id_slots` (_id_slots), and gfx12's architected ttmp7 / ttmp9."""
    *ids, info = id_slots
    for slot, value in zip(ids, wg, strict=True):
        if slot >= 0:
            w.sgpr[slot] = value
    if info >= 0:
        w.sgpr[info] = 0
    if w.gen.architected_ids:  # architected SGPRs: workgroup ids in ttmp9 (x) and ttmp7 (y | z << 16)
        w.sgpr[TTMP0 + 9] = wg[0]
        w.sgpr[TTMP0 + 7] = wg[1] | wg[2] << 16
    w.workgroup = wg


def check_launch(kernel: Kernel, grid, block, arch: str, dynamic_lds: int = 0) -> int:
    """Reject, before anything is allocated, launches the hardware could not run or that pass the limits of
    emu.amd.limits (ValueError, LimitError for sizes, naming what is wrong) on `arch`; returns a work-item's private
    segment bytes."""
    where = f"kernel {kernel.name!r}"
    for what, v in (("grid", grid), ("block", block)):
        if any(not isinstance(x, (int, np.integer)) or isinstance(x, bool) or not 1 <= x < 1 << 32 for x in v):
            raise ValueError(f"{what} {tuple(v)}: every dimension must be a positive 32-bit integer")
    n = block[0] * block[1] * block[2]
    limit = min(kernel.max_flat_workgroup_size or MAX_WORKGROUP_SIZE, MAX_WORKGROUP_SIZE)
    if n > limit:
        raise LimitError(f"block {tuple(block)} has {n} work-items; {where} allows at most {limit}")
    if not isinstance(dynamic_lds, (int, np.integer)) or isinstance(dynamic_lds, bool) or dynamic_lds < 0:
        raise ValueError(f"{where}: dynamic_lds must be a non-negative int, not {dynamic_lds!r}")
    check_grid(kernel, arch, grid, block, dynamic_lds)
    return check_private(kernel, arch)
