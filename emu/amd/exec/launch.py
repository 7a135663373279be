"""The native workgroup launcher of the LLVM tier: starts a dispatch's workgroups and runs their waves in one native
loop, so that a wave costs no Python at all while its code is in a compiled region.

It does natively what emu.amd.dispatch does in Python: for each workgroup (linear index, x fastest) it resets every
wave's registers to its initial image (the SGPR file, the VGPRs zeroed, v0..v2's work-item ids), zeroes the LDS,
writes the workgroup ids, then runs the waves round-robin through the region function (emu.amd.exec.translate),
each until s_barrier or s_endpgm; a barrier releases when every wave still running has reached it. The loop leaves
to Python when a wave needs the interpreter (an instruction no region takes, a memory access the region's VM table
cannot place, another MODE, the watchdog), with everything in place to go on there, or when the call's instruction
budget is spent (so that the host can check the clock and Ctrl-C; `run` just calls again).

All of its state is the int64 array `Launch.d`: a header (the words below) and one record of WAVE_WORDS per wave.
"""
from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
from llvmlite import ir

from emu.amd.debug.history import handed_over
from emu.amd.exec import jit
from emu.amd.exec.state import BARRIER, END, SLOTS, WaveState
from emu.amd.exec.translate import (
    BRANCHES,
    BUDGET,
    CTR_WORDS,
    EXECUTED,
    LANE_OPS,
    LDS_SIZE,
    START,
    STATUS,
    VM_TABLE,
)
from emu.pcode.llvmjit import GATE, engine

if TYPE_CHECKING:
    from emu.amd.exec.wave import Deadline

# Header words: the progress (WG, PHASE: 0 at a workgroup's start, POS: the next wave of the round, ANY_BARRIER),
# the call's budget and result, the totals of the workgroups finished, and the dispatch's constants.
(WG, WG_END, PHASE, POS, CHUNK, RESULT, EXECUTED_SUM, LANE_OPS_SUM, WAVES_SUM, GX, GY, SX, SY, SZ, NWAVES,
 VGPR_BYTES, LDS_BYTES, REGION, CTR, LDS, ANY_BARRIER, LIMIT, SLOT_X, SLOT_Y, SLOT_Z, SLOT_INFO, TTMP, V012_BYTES,
 ENTRY) = range(29)
HEADER = 32
# Wave record words: the arrays (SGPR file, VGPRs, initial SGPR image, initial v0..v2) and the wave's progress.
W_SGPR, W_VGPR, W_SGPR0, W_V012, W_PC, W_STATE, W_LEFT, W_EXECUTED, W_LANE_OPS = range(9)
WAVE_WORDS = 10
RUNS, WAITS, ENDED = 0, 1, 2  # W_STATE: runs in the current round / waits at the barrier / reached s_endpgm
DONE, PAUSED, LEFT_TO_PYTHON = 0, 1, 2  # RESULT
TTMP7, TTMP9 = 115, 117  # gfx12's architected workgroup ids: ttmp9 = x, ttmp7 = y | z << 16

I8, I32, I64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()
_SIG = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)
CHUNK_SIZE = 1 << 22  # instructions per call before the host looks at the clock (and Ctrl-C)
_fn = None
_lock = threading.Lock()


def launcher():
    """The compiled launcher (one per process: everything it depends on is in its data block)."""
    global _fn
    with _lock:
        if _fn is None:
            _fn = _SIG(engine().compile(_module(), "launch", key=f"launch {jit.sources()}"))
    return _fn


class Launch:
    """The native launches of one dispatch: the data block over its wave slots (the waves' arrays are reused by every
    workgroup; `initial` holds each wave's initial SGPR image and v0..v2)."""

    def __init__(self, waves: list[WaveState], initial: list[tuple[np.ndarray, np.ndarray]], lds, entry: int,
                 grid: tuple[int, int, int], start: tuple[int, int, int], id_slots: tuple[int, int, int, int],
                 limit: int):
        d = self.d = np.zeros(HEADER + WAVE_WORDS * len(waves), np.int64)
        self.ctr = np.zeros(CTR_WORDS, np.int64)
        self.ctr[LDS_SIZE] = lds.size
        d[GX], d[GY] = grid[:2]
        d[SX], d[SY], d[SZ] = start
        d[NWAVES], d[VGPR_BYTES], d[V012_BYTES] = len(waves), waves[0].vgpr.nbytes, initial[0][1].nbytes
        d[LDS_BYTES], d[LDS], d[CTR] = lds.mem.nbytes, lds.mem.ctypes.data, self.ctr.ctypes.data
        d[SLOT_X:SLOT_INFO + 1] = id_slots
        d[TTMP], d[LIMIT], d[ENTRY] = waves[0].gen.architected_ids, limit, entry
        for i, (w, (sgpr0, v012)) in enumerate(zip(waves, initial, strict=True)):
            rec = self._record(i)
            rec[W_SGPR], rec[W_VGPR] = w.sgpr.ctypes.data, w.vgpr.ctypes.data
            rec[W_SGPR0], rec[W_V012] = sgpr0.ctypes.data, v012.ctypes.data
        self.waves, self._alive = waves, (initial, lds)  # the arrays stay alive with their addresses

    def _record(self, i: int) -> np.ndarray:
        return self.d[HEADER + i * WAVE_WORDS:HEADER + (i + 1) * WAVE_WORDS]

    def run(self, region: int, arm: Callable[[np.ndarray], None], table: np.ndarray, first: int, end: int,
            deadline: Deadline | None) -> int:
        """Run workgroups first..end-1 (linear indices) with the native function at address `region` (a region's
        signature: the compiled region holding the entry, or the threaded loop), whose counters' words `arm(ctr)`
        fills in; returns `end`, or the index of the workgroup it left in the middle for `hand_over`. The counts
        of the workgroups it finished are in `totals`."""
        d = self.d
        d[WG], d[WG_END], d[PHASE], d[REGION] = first, end, 0, region
        self.ctr[VM_TABLE] = table.ctypes.data  # `table` stays alive in the caller during the call
        arm(self.ctr)
        fn = launcher()
        while True:
            d[CHUNK] = CHUNK_SIZE
            fn(d.ctypes.data)
            if d[RESULT] != PAUSED or GATE.closed or deadline is not None and deadline.passed():
                return end if d[RESULT] == DONE else int(d[WG])

    def totals(self) -> tuple[int, int, int]:
        """(waves, wave-instructions, lane-instructions) of the workgroups finished natively since the last call."""
        d = self.d
        out = int(d[WAVES_SUM]), int(d[EXECUTED_SUM]), int(d[LANE_OPS_SUM])
        d[WAVES_SUM] = d[EXECUTED_SUM] = d[LANE_OPS_SUM] = 0
        return out

    def executed(self) -> list[int]:
        """Each wave's wave-instructions in the workgroup the launcher last finished."""
        return [int(self._record(i)[W_EXECUTED]) for i in range(len(self.waves))]

    def hand_over(self) -> tuple[list[WaveState], list[WaveState], int]:
        """The workgroup `run` left, as Python goes on with it: the waves' pc, counts and EXEC cache brought up to
        date; returns the waves still to run in the current round (the first resumes with `left` instructions of
        its watchdog) and those waiting at the barrier."""
        d = self.d
        pos = int(d[POS])
        pending, waiting = [], []
        for i, w in enumerate(self.waves):
            rec = self._record(i)
            w.pc, w.executed, w.lane_ops = int(rec[W_PC]), int(rec[W_EXECUTED]), int(rec[W_LANE_OPS])
            w.set_exec(w.exec)
            if i == pos:  # the wave the launcher left with: its last call's instructions, for a fault report
                handed_over(w.history, int(self.ctr[START]), self.ctr)
            else:
                w.history.clear()
            if rec[W_STATE] == WAITS:
                waiting.append(w)
            elif rec[W_STATE] == RUNS and i >= pos:
                pending.append(w)
        d[PHASE] = 0
        d[WG] += 1
        return pending, waiting, int(self._record(pos)[W_LEFT])


class _Builder:
    """Helpers over an IRBuilder for the data block's words."""

    def __init__(self, fn: ir.Function, d):
        self.fn, self.d = fn, d
        self.entry = fn.append_basic_block("entry")
        self.b = ir.IRBuilder(self.entry)

    def block(self, name: str) -> ir.Block:
        return self.fn.append_basic_block(name)

    def at(self, block: ir.Block) -> None:
        self.b.position_at_end(block)

    def word(self, base, i):
        return self.b.gep(base, [i if isinstance(i, ir.Value) else I64(i)], source_etype=I64)

    def get(self, base, i):
        return self.b.load(self.word(base, i), typ=I64)

    def put(self, base, i, v) -> None:
        self.b.store(v if isinstance(v, ir.Value) else I64(v), self.word(base, i))

    def add(self, base, i, v) -> None:
        self.put(base, i, self.b.add(self.get(base, i), v))

    def ptr(self, base, i):
        return self.b.inttoptr(self.get(base, i), PTR)

    def leave(self, result: int) -> None:
        """Return to the host with `result` in RESULT."""
        self.put(self.d, RESULT, result)
        self.b.ret(I64(0))

    def wave(self, i):
        """The record of wave i (an i64 value)."""
        return self.word(self.d, self.b.add(I64(HEADER), self.b.mul(i, I64(WAVE_WORDS))))

    def each_wave(self, name: str, body) -> None:
        """Emit `body(record)` for every wave, in order."""
        b = self.b
        with b.goto_block(self.entry):  # the loop counter lives in the entry block (a register after mem2reg)
            i = b.alloca(I64, name=f"{name}_i")
        b.store(I64(0), i)
        head, loop, done = self.block(f"{name}_head"), self.block(f"{name}_body"), self.block(f"{name}_done")
        b.branch(head)
        self.at(head)
        n = b.load(i, typ=I64)
        b.cbranch(b.icmp_signed("<", n, self.get(self.d, NWAVES)), loop, done)
        self.at(loop)
        body(self.wave(n))
        b.store(b.add(n, I64(1)), i)
        b.branch(head)
        self.at(done)


def _module() -> ir.Module:
    """`i64 launch(ptr d)`: runs the workgroups the data block `d` says, as far as it can (its result in RESULT)."""
    m = engine().module("launch")
    fn = ir.Function(m, ir.FunctionType(I64, [PTR]), "launch")
    g = _Builder(fn, fn.args[0])
    ctr = g.ptr(g.d, CTR)
    wg_loop, start, round_, pick, run, next_, round_end = (g.block(n) for n in (
        "workgroup", "start_workgroup", "round", "pick", "run", "next", "round_end"))
    g.b.branch(wg_loop)
    _next_workgroup(g, wg_loop, start, round_)
    _round(g, ctr, round_, pick, run, next_, round_end)
    _round_end(g, round_end, round_, wg_loop)
    return m


def _next_workgroup(g: _Builder, wg_loop: ir.Block, start: ir.Block, round_: ir.Block) -> None:
    """At `wg_loop`: the next workgroup (its waves started from their initial images, the LDS zeroed), or on with
    the current one at `round_`; done after the last."""
    b, d = g.b, g.d
    memcpy = ir.Function(g.fn.module, ir.FunctionType(ir.VoidType(), [PTR, PTR, I64, ir.IntType(1)]),
                         "llvm.memcpy.p0.p0.i64")
    memset = ir.Function(g.fn.module, ir.FunctionType(ir.VoidType(), [PTR, I8, I64, ir.IntType(1)]),
                         "llvm.memset.p0.i64")
    g.at(wg_loop)
    fresh = b.icmp_signed("==", g.get(d, PHASE), I64(0))
    finished = g.block("finished")
    b.cbranch(b.and_(fresh, b.icmp_signed(">=", g.get(d, WG), g.get(d, WG_END))), finished, start)
    g.at(finished)
    g.leave(DONE)
    g.at(start)
    init = g.block("init")
    b.cbranch(fresh, init, round_)
    g.at(init)
    wg = g.get(d, WG)
    gx, gy = g.get(d, GX), g.get(d, GY)
    ids = (b.add(g.get(d, SX), b.urem(wg, gx)), b.add(g.get(d, SY), b.urem(b.udiv(wg, gx), gy)),
           b.add(g.get(d, SZ), b.udiv(wg, b.mul(gx, gy))))
    b.call(memset, [g.ptr(d, LDS), I8(0), g.get(d, LDS_BYTES), ir.IntType(1)(0)])

    def start_wave(w) -> None:
        sgpr, vgpr = g.ptr(w, W_SGPR), g.ptr(w, W_VGPR)
        b.call(memcpy, [sgpr, g.ptr(w, W_SGPR0), I64(SLOTS * 4), ir.IntType(1)(0)])
        b.call(memset, [vgpr, I8(0), g.get(d, VGPR_BYTES), ir.IntType(1)(0)])
        b.call(memcpy, [vgpr, g.ptr(w, W_V012), g.get(d, V012_BYTES), ir.IntType(1)(0)])
        for slot, value in ((SLOT_X, ids[0]), (SLOT_Y, ids[1]), (SLOT_Z, ids[2]), (SLOT_INFO, I64(0))):
            s = g.get(d, slot)
            with b.if_then(b.icmp_signed(">=", s, I64(0))):
                b.store(b.trunc(value, I32), b.gep(sgpr, [s], source_etype=I32))
        with b.if_then(b.icmp_signed("!=", g.get(d, TTMP), I64(0))):
            b.store(b.trunc(ids[0], I32), b.gep(sgpr, [I64(TTMP9)], source_etype=I32))
            b.store(b.trunc(b.or_(ids[1], b.shl(ids[2], I64(16))), I32), b.gep(sgpr, [I64(TTMP7)], source_etype=I32))
        for word, v in ((W_PC, g.get(d, ENTRY)), (W_STATE, RUNS), (W_LEFT, g.get(d, LIMIT)), (W_EXECUTED, 0),
                        (W_LANE_OPS, 0)):
            g.put(w, word, v)
    g.each_wave("start", start_wave)
    for word in (PHASE, POS, ANY_BARRIER):
        g.put(d, word, 1 if word == PHASE else 0)
    b.branch(round_)


def _round(g: _Builder, ctr, round_: ir.Block, pick: ir.Block, run: ir.Block, next_: ir.Block,
           round_end: ir.Block) -> None:
    """At `round_`: every wave that runs, through the region function until it reaches a barrier or its end (or
    leaves to Python); `round_end` after the last."""
    b, d = g.b, g.d
    region_t = ir.FunctionType(I64, [PTR] * 4)
    g.at(round_)
    pos = g.get(d, POS)
    b.cbranch(b.icmp_signed("<", pos, g.get(d, NWAVES)), pick, round_end)
    g.at(pick)
    w = g.wave(pos)
    b.cbranch(b.icmp_signed("==", g.get(w, W_STATE), I64(RUNS)), run, next_)
    g.at(run)
    chunk = g.get(d, CHUNK)
    spent, call = g.block("spent"), g.block("call")
    b.cbranch(b.icmp_signed("<=", chunk, I64(0)), spent, call)
    g.at(spent)
    g.leave(PAUSED)
    g.at(call)
    left = g.get(w, W_LEFT)
    budget = b.select(b.icmp_signed("<", chunk, left), chunk, left)
    for word, v in ((BUDGET, budget), (EXECUTED, 0), (LANE_OPS, 0), (START, g.get(w, W_PC)), (STATUS, 0),
                    (BRANCHES, 0)):
        g.put(ctr, word, v)
    region = b.inttoptr(g.get(d, REGION), ir.PointerType(region_t))
    nxt = b.call(region, [g.ptr(w, W_SGPR), g.ptr(w, W_VGPR), ctr, g.ptr(d, LDS)])
    n = g.get(ctr, EXECUTED)
    g.add(w, W_EXECUTED, n)
    g.add(w, W_LANE_OPS, g.get(ctr, LANE_OPS))
    g.add(w, W_LEFT, b.neg(n))
    g.add(d, CHUNK, b.neg(n))
    stopped, moved = g.block("stopped"), g.block("moved")
    b.cbranch(b.icmp_signed("<", nxt, I64(0)), stopped, moved)
    g.at(stopped)  # not the region's MODE or instruction
    g.leave(LEFT_TO_PYTHON)
    g.at(moved)
    g.put(w, W_PC, nxt)
    ended, waits, other = g.block("ended"), g.block("waits"), g.block("other")
    sw = b.switch(g.get(ctr, STATUS), other)
    sw.add_case(I64(END), ended)
    sw.add_case(I64(BARRIER), waits)
    g.at(ended)
    g.put(w, W_STATE, ENDED)
    b.branch(next_)
    g.at(waits)
    g.put(w, W_STATE, WAITS)
    g.put(d, ANY_BARRIER, 1)
    b.branch(next_)
    g.at(other)  # the budget ran out (the call's chunk: pause; the watchdog's: Python reports it) or an exit
    paused = b.and_(b.icmp_signed("==", n, budget), b.icmp_signed(">", g.get(w, W_LEFT), I64(0)))
    g.put(d, RESULT, b.select(paused, I64(PAUSED), I64(LEFT_TO_PYTHON)))
    b.ret(I64(0))
    g.at(next_)
    g.put(d, POS, b.add(pos, I64(1)))
    b.branch(round_)


def _round_end(g: _Builder, round_end: ir.Block, round_: ir.Block, wg_loop: ir.Block) -> None:
    """At `round_end`: release the barrier (another round), or the workgroup is done (its counts added up)."""
    b, d = g.b, g.d
    g.at(round_end)
    release, complete = g.block("release"), g.block("complete")
    b.cbranch(b.icmp_signed("!=", g.get(d, ANY_BARRIER), I64(0)), release, complete)
    g.at(release)

    def wake(w) -> None:
        with b.if_then(b.icmp_signed("==", g.get(w, W_STATE), I64(WAITS))):
            g.put(w, W_STATE, RUNS)
            g.put(w, W_LEFT, g.get(d, LIMIT))
    g.each_wave("release", wake)
    g.put(d, POS, 0)
    g.put(d, ANY_BARRIER, 0)
    b.branch(round_)
    g.at(complete)

    def total(w) -> None:
        g.add(d, EXECUTED_SUM, g.get(w, W_EXECUTED))
        g.add(d, LANE_OPS_SUM, g.get(w, W_LANE_OPS))
    g.each_wave("total", total)
    g.add(d, WAVES_SUM, g.get(d, NWAVES))
    g.put(d, PHASE, 0)
    g.add(d, WG, I64(1))
    b.branch(wg_loop)
