"""The last instructions a wave ran, kept at the cost of one append per step of the run loop.

A wave's `history` (a deque of the last HISTORY ints) records where its steps started, not every instruction:
- a PC (0 <= pc < 2**48): the run loop started a step there (one instruction of the reference engine, or a
  straight-line block of the lean interpreter, emu.amd.exec.interp);
- NATIVE + n: the step before was a native region call (emu.amd.exec.translate) whose taken branches are the
  entries n.. of the wave's branch ring (the call counters' words BRANCH_RING..; the next NATIVE marker, or the
  ring's count, ends them);
- LAUNCHED, then -1 - pc for each taken branch: the step before ran in the native launcher (emu.amd.exec.launch;
  its hand-over writes these).
`instructions` expands this into the instructions run up to and including the faulting one: a block runs whole
(or only its first instruction when the watchdog's slice had too few instructions left; the next start says which),
native code from its start through each recorded taken branch to where the next step starts.
"""
from __future__ import annotations

import numpy as np

from emu.amd.exec.translate import BRANCH_RING, BRANCHES, RING, Region

NATIVE = 1 << 62
LAUNCHED = NATIVE - 1
WALK = 4096  # instructions a straight-line walk may take before the history is given up as inconsistent


def handed_over(hist, start: int, ctr: np.ndarray) -> None:
    """The history of a wave the native launcher hands to Python: its last call from `start`, with the taken
    branches that call recorded in `ctr` (counted from 0 by the launcher)."""
    hist.clear()
    hist.extend((start, LAUNCHED))
    n = int(ctr[BRANCHES])
    hist.extend(-1 - int(ctr[BRANCH_RING + i % RING]) for i in range(max(0, n - RING), n))


def instructions(hist, prog, ring: np.ndarray | None, last_pc: int, limit: int = 32, single: bool = False) -> list[int]:
    """The PCs of the last `limit` instructions the wave ran, ending with `last_pc` (the faulting one), from its
    history; `ring` is the wave's own call counters (None: it made no native call); `single`: its steps ran one
    instruction each (a traced wave)."""
    segments: list[list] = []  # [start, kind ('step' | 'native'), taken branch PCs]
    events = list(hist)
    for k, e in enumerate(events):
        if e == LAUNCHED and segments:
            segments[-1][1] = "native"
        elif 0 <= e < NATIVE:
            segments.append([e, "step", []])
        elif e >= NATIVE and segments and ring is not None:
            n0 = e - NATIVE
            n1 = next((x - NATIVE for x in events[k + 1:] if x >= NATIVE), int(ring[BRANCHES]))
            seg = segments[-1]
            seg[1] = "native"
            if int(ring[BRANCHES]) - n0 > RING:  # the ring has lost this call's first branches: begin after them
                n0 = int(ring[BRANCHES]) - RING
                segments[:] = [seg]
                seg[0] = None
            seg[2] = [int(ring[BRANCH_RING + i % RING]) for i in range(n0, n1)]
        elif e < 0 and segments:
            segments[-1][2].append(-1 - e)
    out: list[int] = []
    for i, (start, kind, branches) in enumerate(segments):
        nxt = segments[i + 1][0] if i + 1 < len(segments) else None
        if kind == "native":
            run = _native(prog, start, branches, last_pc if nxt is None else nxt, inclusive=nxt is None)
        else:
            run = _step(prog, start, nxt, last_pc, single)
        if run is None:  # inconsistent with the code (it changed?): keep what follows only
            out = []
            continue
        out.extend(run)
    return out[-limit:]


def _native(prog, start, branches: list[int], stop: int, inclusive: bool) -> list[int] | None:
    out: list[int] = []
    cur = start
    for b in branches:
        if cur is None:  # the history begins at a branch whose segment the ring has lost
            out.append(b)
            cur = Region._target(prog.inst(b))
            continue
        run = _walk(prog, cur, b, True)
        if run is None:
            return None
        out.extend(run)
        cur = Region._target(prog.inst(b))
    if cur is None:
        return out
    run = _walk(prog, cur, stop, inclusive)
    return None if run is None else out + run


def _step(prog, start: int, nxt: int | None, last_pc: int, single: bool) -> list[int] | None:
    """The instructions of the step that started at `start`, given where the next began (None: it faulted at
    last_pc)."""
    inst = prog.inst(start)
    interp = prog.interp
    members = interp.members(inst) if interp is not None and not single else [inst]
    pcs = [i.pc for i in members]
    if nxt is None:
        return pcs[:pcs.index(last_pc) + 1] if last_pc in pcs else _walk(prog, start, last_pc, True)
    tail = members[-1]
    if _writes_pc(prog, tail) or nxt == tail.pc + tail.size:
        return pcs
    first = members[0]
    if nxt == first.pc + first.size:  # the watchdog's slice allowed only the block's first instruction
        return pcs[:1]
    return pcs


def _walk(prog, pc: int, stop: int, inclusive: bool) -> list[int] | None:
    """The straight-line instructions from pc to stop."""
    out = []
    for _ in range(WALK):
        if pc == stop:
            return out + [pc] if inclusive else out
        out.append(pc)
        try:
            pc += prog.inst(pc).size
        except Exception:
            return None
    return None


def _writes_pc(prog, inst) -> bool:
    if not inst.valid:
        return True
    try:
        return "PC" in prog.planner.sem(inst.op).writes
    except Exception:
        return inst.base == "SOPP"
