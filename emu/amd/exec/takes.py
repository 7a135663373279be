"""What each fast tier takes: one explicit predicate per tier saying why it does not run an instruction itself (None:
it does), and the count of what they declined.

- `lean`: the lean interpreter's generated code (emu.amd.exec.interp); what it declines runs as the reference plan's
  step (which faults where the instruction has no semantics or a bad operand, as on every tier). Past this table its
  code generators may still find no form for an instruction's pcode (npback.Decline, the binding's OperandError or
  Unsupported), and its fused memory steps take only plain dword moves (emu.amd.exec.interp_mem): those decline too.
- `native`: the LLVM tier's regions and the threaded tier's handlers (emu.amd.exec.translate, threaded); what it
  declines is an exit to the interpreter. The translator may still refuse an instruction it takes here (its Exit).

Under HWEMU_STATS every tier's declines are counted, distinct instructions by reason, and printed at exit.
"""
from __future__ import annotations

import atexit
import sys
from collections import defaultdict

from emu.amd.exec import category
from emu.amd.exec.bind import Binder, Unsupported
from emu.amd.exec.control import BARRIERS, CONTROL, ENDS, ENGINE_NOPS, SOPP_BRANCHES

SALU = ("SOP1", "SOP2", "SOPC", "SOPK", "SOPP")
VALU = ("VOP1", "VOP2", "VOPC", "VOP3", "VOP3SD")  # the VALU encodings the fast tiers run (and VOPD)
GLOBAL = ("GLOBAL", "VGLOBAL", "FLAT", "VFLAT")  # the LLVM tier's (flat apertures leave the region at run time)
MATRIX = ("V_WMMA_",)  # the VOP3P matrix ops the LLVM tier takes (their operands index the register file)
_FORMS = ("DPP16", "DPP8", "SDWA", "SDWA_SDST")  # VALU forms only the reference runs
_HARDWARE = frozenset({"HW_REGISTERS", "HwRegWriteMask"})  # state the fused SALU step does not move


def lean(inst, b: Binder) -> str | None:
    """Why the lean interpreter's generated code does not take `inst`, or None."""
    if not inst.valid:
        return "not an instruction"
    name, base = inst.op.name, inst.base
    if name in ENGINE_NOPS or base in ("GLOBAL", "VGLOBAL", "SMEM"):  # the PC moves on; a fused memory step
        return None
    if name in CONTROL:
        return "program control"
    if not (base in SALU or base in VALU or base in ("VOPD", "DS")):
        return f"{base} encoding"
    if inst.enc.endswith(_FORMS):
        return "DPP or SDWA form"
    if base == "VOPD":  # its halves' semantics are looked at as they are generated
        return None
    try:
        sem = b.sem(inst.op)
    except Unsupported:
        return "no semantics"
    if base in SALU and ((sem.reads | sem.writes) & _HARDWARE or sem.ir.files):
        return "hardware registers or register files"
    if base == "DS" and (sem.serial or not sem.ir.files <= {"MEM", "LDS"}):
        return "atomic or register files"
    if base in VALU and sem.ir.files:
        return "register files"
    return None


def native(inst) -> str | None:
    """Why the LLVM tier does not take `inst` (it leaves the region or handler loop there), or None."""
    if not inst.valid:
        return "not an instruction"
    name, base = inst.op.name, inst.base
    if name in ENDS or name in BARRIERS or name in SOPP_BRANCHES or name in ENGINE_NOPS or base in SALU[:4]:
        return None
    if base in VALU or base == "VOPD":  # DPP16 runs natively; DPP8 and SDWA leave there
        return "DPP8 or SDWA form" if inst.enc.endswith(_FORMS[1:]) else None
    if base == "VOP3P":  # packed math and WMMA (a mix, dot or 16-bit form leaves at the translator)
        return None
    if base == "SMEM":
        return None if name.startswith(("S_LOAD_", "S_BUFFER_LOAD_")) else "SMEM other than loads"
    if base == "DS" or base in GLOBAL:
        return None
    return "program control" if name in CONTROL or base == "SOPP" else f"{base} encoding"


_declined: dict[str, dict[str, set]] = defaultdict(lambda: defaultdict(set))  # tier -> reason -> instructions


def declined(tier: str, inst, reason: str) -> None:
    """Count that `tier` declined `inst` for `reason` (under HWEMU_STATS; each instruction once; None: code that is no
    one instruction, such as a region LLVM rejected, each time)."""
    if not category.enabled():
        return
    if not _declined:
        atexit.register(_report)
    insts = _declined[tier][reason]
    insts.add((inst.family, inst.raw) if inst is not None else len(insts))


def report() -> str:
    """The declines counted so far, one line per tier ("" when none)."""
    lines = [f"  {tier}: " + ", ".join(f"{reason} {len(insts)}" for reason, insts in
                                       sorted(by.items(), key=lambda r: (-len(r[1]), r[0])))
             for tier, by in sorted(_declined.items())]
    return "hwemu: instructions the fast tiers left to a slower one (distinct instructions by reason):\n" + \
        "\n".join(lines) if lines else ""


def _report() -> None:
    text = report() if category.enabled() else ""
    if text:
        print(text, file=sys.stderr, flush=True)
