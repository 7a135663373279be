"""Instruction categories of the per-kernel statistics (HWEMU_STATS), by the instruction's encoding as the ISA
manuals group them:

- SALU: scalar ALU (SOP1, SOP2, SOPC, SOPK), s_getpc included;
- VALU: vector ALU (VOP1, VOP2, VOPC, VOP3, VOP3SD, VOP3P, VOPD, VINTERP; DPP and SDWA forms);
- VMEM: vector memory (FLAT, GLOBAL, SCRATCH, MUBUF, MTBUF, MIMG; gfx12's VBUFFER, VIMAGE, VSAMPLE, VFLAT, ...);
- SMEM: scalar memory;
- LDS: data share (DS; LDS-direct and parameter loads: LDSDIR, VDSDIR);
- branch: what writes the PC: s_branch, s_cbranch_*, s_setpc, s_swappc, s_call, s_rfe;
- other: program control (SOPP: s_waitcnt, s_nop, s_endpgm, s_barrier, s_sendmsg, s_delay_alu, s_clause, ...; and
  the waits, barriers and messages of other scalar encodings), exports, invalid encodings.
Every instruction is in exactly one, so the categories sum to the wave-instructions.
"""
from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable

from emu.amd.exec.control import BARRIERS, ENDS, ENGINE_NOPS
from emu.amd.exec.state import CATEGORIES

SALU, VALU, VMEM, SMEM, LDS, BRANCH, OTHER = range(len(CATEGORIES))
_BASES = {**dict.fromkeys(("SOP1", "SOP2", "SOPC", "SOPK"), SALU),
          **dict.fromkeys(("VOP1", "VOP2", "VOPC", "VOP3", "VOP3SD", "VOP3P", "VOP3PX2", "VOPD", "VINTERP"), VALU),
          **dict.fromkeys(("FLAT", "GLOBAL", "SCRATCH", "MUBUF", "MTBUF", "MIMG", "VFLAT", "VGLOBAL", "VSCRATCH",
                           "VBUFFER", "VIMAGE", "VSAMPLE"), VMEM),
          "SMEM": SMEM, "DS": LDS, "LDSDIR": LDS, "VDSDIR": LDS}
_BRANCH_PREFIXES = ("S_BRANCH", "S_CBRANCH_", "S_SETPC_", "S_SWAPPC_", "S_CALL_", "S_RFE_")
_CONTROL = ENGINE_NOPS | BARRIERS | ENDS


def category(inst) -> int:
    """The index in CATEGORIES of a decoded instruction (emu.amd.decode.Inst)."""
    if not inst.valid:
        return OTHER
    name = inst.op.name
    if name.startswith(_BRANCH_PREFIXES):
        return BRANCH
    c = _BASES.get(inst.base, OTHER)
    return OTHER if c == SALU and name in _CONTROL else c


def enabled() -> bool:
    """HWEMU_STATS is on (set and not 0): the engine counts wave-instructions by category."""
    return os.environ.get("HWEMU_STATS", "0") not in ("", "0")


def tallied(step: Callable, cats: list[int]) -> Callable:
    """`step`, which runs instructions of categories `cats` in order (a block of the lean interpreter, or one
    instruction), adding what it ran to the wave's tally. A block stops early (its first instruction only, when the
    watchdog allows fewer; a fault, leaving the ones before it) and tells by what it takes from `w.left`
    (emu.amd.exec.interp._block): so it ran `before - w.left + 1` of them, or `before - w.left` when it raised."""
    if len(cats) == 1:
        c = cats[0]

        def one(w) -> int:
            r = step(w)
            w.tally[c] += 1
            return r
        return one
    prefix = [tuple(Counter(cats[:k]).items()) for k in range(len(cats) + 1)]  # (category, count) of the first k

    def block(w) -> int:
        before = w.left
        try:
            r = step(w)
        except BaseException:
            _add(w.tally, prefix[before - w.left])
            raise
        _add(w.tally, prefix[before - w.left + 1])
        return r
    return block


def _add(tally: list[int], counts: tuple) -> None:
    for c, k in counts:
        tally[c] += k
