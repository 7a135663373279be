"""Operand text shared by the printers of emu.amd.asm (alu, memory): registers, inline constants, literals and
source modifiers as LLVM prints them."""
from __future__ import annotations

import re
import struct

from emu.amd import target
from emu.amd.asm import syntax as syn
from emu.amd.asm.operands import INLINE_FLOAT, Operand, op_info
from emu.amd.decode import Inst
from emu.amd.regs import LDS_DIRECT, TTMP0


def reg(prefix: str, i: int, n: int) -> str:
    return f"{prefix}{i}" if n == 1 else f"{prefix}[{i}:{i + n - 1}]"

def _float(bits: int, width: int) -> str | None:
    if width == 64:
        f = struct.unpack("<d", struct.pack("<Q", bits))[0]
    elif width == 16:
        f = struct.unpack("<e", struct.pack("<H", bits & 0xFFFF))[0]
    else:
        f = struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]
    if f in INLINE_FLOAT.values():
        return repr(f)
    return None

def literal_text(v: int, bits: int = 32, fp: bool = False) -> str:
    """A 32-bit literal as LLVM prints it: as the inline constant it equals, else in hex (16-bit operands: the
    low half)."""
    if bits == 16:
        v &= 0xFFFF
    sv = v - (1 << bits) if v >> (bits - 1) and bits <= 32 else v
    if -16 <= sv <= 64:
        return str(sv)
    f = _float(v, 32) if bits == 32 else None
    return f if f is not None else f"0x{v:x}"

def bad_class(count: int) -> str:
    return f"/*Invalid register, operand has 'SReg_{32 * count}' register class*/"

def operand_text(inst: Inst, o: Operand, info=None) -> str:
    k = o.kind
    if k == "vgpr":
        return reg("v", o.index, o.count)
    if k == "agpr":
        return reg("a", o.index, o.count)
    if k in ("sgpr", "ttmp") and o.count > 1 and (o.index % (2 if o.count == 2 else 4) or k == "ttmp" and o.count == 3):
        # a misaligned tuple (LLVM has no 96-bit trap-temporary tuples)
        if inst.base.startswith("SOP"):
            return f"{o.index + (TTMP0 if k == 'ttmp' else 0)}/*Invalid immediate*/"
        return f"{'s' if k == 'sgpr' else 'ttmp'}{o.index}" + bad_class(o.count)
    if k == "sgpr":
        return reg("s", o.index, o.count)
    if k == "ttmp":
        return reg("ttmp", o.index, o.count)
    if k == "special":
        return o.name + (bad_class(o.count) if o.count > 2 and o.name != "null" and o.name[:4] != "src_" else "")
    if k == "imm":  # decimal when an inline integer, like LLVM's 16-bit immediates
        return str(o.value) if o.value <= 64 else f"0x{o.value:x}"
    fmt = info.fmt if info is not None else "NUM_B32"
    bits = info.bits if info is not None else 32
    if k == "inline":
        if 128 <= o.index <= 208:
            return str(o.index - 128 if o.index <= 192 else 192 - o.index)
        if o.index == 248:
            return syn.INV2PI.get(64 if bits == 64 else 16 if bits == 16 and "F" in fmt else 32)
        return repr(INLINE_FLOAT[o.index])
    if k == "literal":  # a 16-bit VALU operand, and an f16 one of SOP2 / SOPC, reads the literal's low half; LLVM 19
        # prints the other SALU literals (SOP1's f16 operands too) in all 32 bits
        low = inst.base.startswith("V") or inst.base in ("SOP2", "SOPC") and "F" in fmt
        return literal_text(o.value or 0, bits if low else max(bits, 32), "F" in fmt)
    return f"<invalid operand {o.index}>"


def src_text(inst: Inst, d, name: str, mods: bool = True) -> str | None:
    o = inst.operands.get(name)
    if o is None:
        return None
    enc = d.isa.encodings[inst.enc]
    info = op_info(d, enc, inst.op, inst.fields, name)
    t = operand_text(inst, o, info)
    if o.kind == "vgpr" and inst.op.name in _TRUE16 and inst.base == "VOP1":
        t = f"v{o.index & 127}.{'h' if o.index >= 128 else 'l'}"  # the high bit of the number picks the half
    elif o.kind == "vgpr" and o.index >= 128 and info is not None and info.bits == 16 \
            and target.generation(inst.family).vgpr_halves and inst.base in ("VOP1", "VOP2", "VOPC") \
            and inst.op.name not in _WHOLE_VGPR:
        # 16-bit VALU e32/DPP operands reach only v0..v127
        cls = "VS_32_Lo128" if name == "src0" and "vsrc0" not in inst.fields else "VGPR_32_Lo128"
        t += f"/*Invalid register, operand has '{cls}' register class*/"
    elif inst.base == "VOP1" and name == "src0" and info is not None and info.kind in _VGPR_ONLY and (
            scalar_register(o) or info.kind == "SRC_VGPR" and o.kind == "special" and o.index == LDS_DIRECT):
        # a VOP1 source that must be a VGPR (LDS direct reads allowed only where the class says so)
        t += f"/*Invalid register, operand has '{_VGPR_ONLY[info.kind]}' register class*/"
    elif inst.base == "VINTERP" and scalar_register(o):
        t += "/*Invalid register, operand has 'VGPR_32' register class*/"
    elif inst.base == "VINTERP" and o.kind in ("inline", "literal"):
        t += "/*Invalid immediate*/"
    elif o.kind == "special" and o.index == LDS_DIRECT and not inst.base.startswith("V"):
        t += "/*Invalid register, operand has 'SReg_32' register class*/"
    i = {"src0": 0, "src1": 1, "vsrc1": 1, "src2": 2}.get(name)
    if mods and i is not None and inst.fields.get(f"src{i}_sext"):
        t = f"sext({t})"
    if mods and i is not None and _fp(inst, info):
        f = inst.fields
        mix = "_MIX" in inst.op.name
        absv = (f.get("neg_hi" if mix else "abs", 0) >> i) & 1 or f.get(f"src{i}_abs", 0)
        if absv:
            t = f"|{t}|"
        if (f.get("neg", 0) >> i) & 1 or f.get(f"src{i}_neg", 0):
            t = f"-{t}" if absv or o.kind not in ("inline", "literal") else f"neg({t})"
    return t

# 16-bit opcodes LLVM 19 prints with true16 register halves (v1.l, v1.h) in their e32/DPP forms
_TRUE16 = {"V_MOV_B16"}
# 16-bit sources (two fp8 / bf8 values) LLVM 19 reads as a whole VGPR, any of v0..v255, in the e32 form
_WHOLE_VGPR = {"V_CVT_PK_F32_FP8", "V_CVT_PK_F32_BF8"}
# VOP1 sources the tables type VGPR-only: operand kind -> LLVM's register class
_VGPR_ONLY = {"SRC_VGPR": "VGPR_32", "VGPR": "VRegOrLds_32"}


def scalar_register(o: Operand) -> bool:
    return o.kind in ("sgpr", "ttmp") or (o.kind == "special" and o.name != "null" and o.name[:4] != "src_")

def _fp(inst: Inst, info) -> bool:
    """Whether an operand takes float source modifiers (neg, abs): float-typed operands, v_cndmask's (whose sources
    are untyped bits) and the fma_mix ops."""
    if inst.base == "VOP3P":
        return "_MIX" in inst.op.name
    return inst.op.name in _FLOAT_MODIFIED or info is not None and bool(re.search(r"(^|_)B?F\d", info.fmt))


_FLOAT_MODIFIED = {"V_CNDMASK_B32", "V_CNDMASK_B16"}

def join(name: str, ops: list[str | None], mods: list[str] = ()) -> str:
    s = name
    ops = [o for o in ops if o is not None]
    if ops:
        s += " " + ", ".join(ops)
    mods = [m for m in mods if m]
    if mods:
        s += " " + " ".join(mods)
    return s

def bits_text(v: int, n: int) -> str:
    return f"[{','.join(str((v >> i) & 1) for i in range(n))}]"
