"""Operands of a decoded AMD instruction: register classes, inline constants, widths, LLVM mnemonics.

Register numbering of the 9-bit source operand (SGPR-space values 0..255, VGPRs at 256..511) as LLVM
decodes it; the scalar part is shared by 7/8-bit SGPR fields.
"""
from __future__ import annotations

import functools
import math
import struct
from dataclasses import dataclass
from typing import Protocol

from emu.amd import target
from emu.amd.isa import ISA, Encoding, Op
from emu.amd.isa import Operand as IsaOperand
from emu.amd.regs import (
    EXEC,
    EXECZ,
    LDS_DIRECT,
    LITERAL,
    POPS_EXITING_WAVE_ID,
    PRIVATE_BASE,
    PRIVATE_LIMIT,
    SCC,
    SHARED_BASE,
    SHARED_LIMIT,
    TTMP0,
    TTMP_END,
    VCC,
    VCCZ,
)


class Decoder(Protocol):
    """What operand classification needs of a decoder (emu.amd.decode.Decoder): its instruction set's name and
    tables."""
    family: str
    isa: ISA



@dataclass(frozen=True, slots=True)
class Operand:
    kind: str  # sgpr, vgpr, agpr, ttmp, special, inline, literal, invalid
    index: int  # first register, or the encoded value for special/inline/literal
    count: int = 1  # 32-bit registers
    value: int | None = None  # constant bits (inline, literal)
    name: str = ""  # name of a special register (vcc_lo, exec, m0, null, scc, ...)
    valid: bool = True

# SGPR-space specials per family: value -> (name, name when the operand is 64 bits wide)
_SPECIAL_COMMON = {
    VCC: ("vcc_lo", "vcc"), VCC + 1: ("vcc_hi", None), EXEC: ("exec_lo", "exec"), EXEC + 1: ("exec_hi", None),
    SHARED_BASE: ("src_shared_base", "src_shared_base"), SHARED_LIMIT: ("src_shared_limit", "src_shared_limit"),
    PRIVATE_BASE: ("src_private_base", "src_private_base"), PRIVATE_LIMIT: ("src_private_limit", "src_private_limit"),
    VCCZ: ("src_vccz", "src_vccz"), EXECZ: ("src_execz", "src_execz"), SCC: ("src_scc", "src_scc"),
    POPS_EXITING_WAVE_ID: ("src_pops_exiting_wave_id", "src_pops_exiting_wave_id"),
    LDS_DIRECT: ("src_lds_direct", None)}
# gfx9's SGPR-space registers between its 102 SGPRs and VCC
_GFX9_SPECIALS = {102: ("flat_scratch_lo", "flat_scratch"), 103: ("flat_scratch_hi", None),
                  104: ("xnack_mask_lo", "xnack_mask"), 105: ("xnack_mask_hi", None)}


@functools.cache
def specials(fam: str) -> dict[int, tuple[str, str | None]]:
    """SGPR-space special registers of a family: code -> (name, name when the operand is 64 bits wide)."""
    g = target.generation(fam)
    return {**_SPECIAL_COMMON, **(_GFX9_SPECIALS if g.sgprs < VCC else {}), g.m0: ("m0", None),
            g.null: ("null", "null")}
TTMP = range(TTMP0, TTMP_END)
# inline float constants: encoded value -> value
INLINE_FLOAT = {240: 0.5, 241: -0.5, 242: 1.0, 243: -1.0, 244: 2.0, 245: -2.0, 246: 4.0, 247: -4.0,
                248: 1 / (2 * math.pi)}
_INV2PI_BITS = {16: 0x3118, 32: 0x3E22F983, 64: 0x3FC45F306DC9C882}


def inline_bits(v: int, bits: int) -> int | None:
    """The bits an inline constant stands for in an operand of `bits` width, None if not an inline constant."""
    mask = (1 << bits) - 1
    if 128 <= v <= 192:
        return v - 128
    if 193 <= v <= 208:
        return (128 - v) & mask
    if v == 248:
        return _INV2PI_BITS[bits]
    if v in INLINE_FLOAT:
        f = INLINE_FLOAT[v]
        if bits == 64:
            return struct.unpack("<Q", struct.pack("<d", f))[0]
        if bits == 16:
            return struct.unpack("<H", struct.pack("<e", f))[0]
        return struct.unpack("<I", struct.pack("<f", f))[0]
    return None


def scalar(fam: str, v: int, count: int, fmt_bits: int = 32) -> Operand:
    """Operand for a value in the SGPR space (0..255)."""
    if v < target.generation(fam).sgprs:
        return Operand("sgpr", v, count)
    if v in TTMP:
        return Operand("ttmp", v - TTMP0, count)
    sp = specials(fam).get(v)
    if sp is not None:
        name = sp[1] if count > 1 else sp[0]
        return Operand("special", v, count, name=name or sp[0], valid=name is not None)
    if v == LITERAL:
        return Operand("literal", v, count)
    bits = inline_bits(v, 64 if fmt_bits > 32 else 16 if fmt_bits == 16 else 32)
    if bits is not None:
        return Operand("inline", v, count, value=bits)
    return Operand("invalid", v, count, valid=False)


_WIDTH_FIELDS = {"vdstx": "vdsty", "srcx0": "srcy0", "vsrcx1": "vsrcy1"}  # VOPD X operands typed like Y's


# Operands the vendor tables omit: (opcode space, name) -> operands
_SDST, _SSRC = IsaOperand("NUM_B32", 32, "SDST"), IsaOperand("NUM_B32", 32, "SSRC")
OPERAND_FIXUPS = {
    **{("SOPK", n): {"sdst": _SDST, "simm16": IsaOperand("NUM_I16", 16, "LABEL")}
       for n in ("S_SUBVECTOR_LOOP_BEGIN", "S_SUBVECTOR_LOOP_END")},
    ("SOPP", "S_WAITCNT"): {"simm16": IsaOperand("NUM_B16", 16, "WAITCNT")},
    ("SOP1", "S_BARRIER_INIT"): {"ssrc0": _SSRC},
    ("SOP1", "S_BARRIER_JOIN"): {"ssrc0": _SSRC},
    ("SOP1", "S_GET_BARRIER_STATE"): {"sdst": _SDST, "ssrc0": _SSRC},
}


def op_info(d: Decoder, enc: Encoding, op: Op | None, fields: dict[str, int], name: str):
    """The vendor operand description of field `name` (VOPD: the X/Y op that owns it)."""
    if op is None:
        return None
    fix = OPERAND_FIXUPS.get((op.enc, op.name))
    if fix and name in fix:
        return fix[name]
    if enc.base == "VOPD":
        which = "opy" if name in ("srcy0", "vsrcy1", "vdsty") else "opx"
        o = d.isa.op("VOPD", fields[which])
        return o and o.operands.get(_WIDTH_FIELDS.get(name, name))
    info = op.operands.get(name)
    if info is None and name in _ALIASES:
        info = op.operands.get(_ALIASES[name])
    return info


_ALIASES = {"src0": "vsrc0", "src1": "vsrc1", "vsrc1": "src1"}  # the tables name some VOP3 sources vsrcN


def width(d: Decoder, info) -> int:
    """Number of 32-bit registers of an operand; lane masks are one register in wave32."""
    if info is None:
        return 1
    if info.fmt.startswith("NUM_M") and d.gen.wave_size == 32:
        return 1
    return max(1, (info.bits + 31) // 32)


def operands(d: Decoder, enc: Encoding, op: Op | None, fields: dict[str, int]) -> dict[str, Operand]:
    out: dict[str, Operand] = {}
    fam = d.family
    dpp_src = "vsrc0" in fields  # DPP/SDWA: the vsrc0 field holds src0 (src0 itself holds the DPP/SDWA marker)
    for f in enc.fields:
        if f.kind not in ("vgpr", "sgpr", "ssrc", "src", "sbase", "srsrc", "vdsty") or (dpp_src and f.name == "vsrc0"):
            continue
        info = op_info(d, enc, op, fields, f.name)
        if info is None:  # not an operand of this opcode
            continue
        n = width(d, info)
        v = fields[f.name]
        if f.name == "vdst" and op is not None and "CMPSWAP" in op.name and "_ATOMIC" in op.name \
                and info.bits == next(op.operands[k].bits for k in ("data", "vsrc") if k in op.operands):
            n = max(1, n // 2)  # table fixup (RDNA3 GLOBAL): compare-swap returns one value, its data is a pair
        if f.name == "vdata" and fields.get("tfe"):
            n += 1  # texture-fail-enable returns one more dword
        if dpp_src and f.name == "src0":
            v = fields["vsrc0"] + (0 if fields.get("s0") else 256)
        fb = info.bits if info is not None else 32
        ok = info.kind if info is not None else ""
        if ok.startswith("SIMM") or ok == "SENDMSG_RTN":  # an immediate in a register field (s_atc_probe, ...)
            out[f.name] = Operand("imm", v, value=v)
            continue
        if f.kind == "vgpr" and (ok.startswith("SREG") or ok == "SDST"):  # VOP3 writing an SGPR (v_readlane)
            o = scalar(fam, v, n)
        elif f.kind == "vgpr" and ok == "ACCVGPR" or (f.kind == "src" and v >= 256 and ok == "SRC_ACCVGPR"):
            o = Operand("agpr", v & 0xFF, n)
        elif f.kind == "vgpr" and f.name == "vsrc1" and fields.get("s1"):  # SDWA: an SGPR source 1
            o = scalar(fam, v, n, fb)
        elif f.kind == "vgpr":
            o = Operand("vgpr", v, n)
        elif f.kind == "vdsty":
            o = Operand("vgpr", (v << 1) | ((fields["vdstx"] & 1) ^ 1), n)
        elif f.kind == "sbase":
            o = Operand("sgpr", v * 2, n) if v * 2 < d.gen.sgprs else scalar(fam, v * 2, n)
        elif f.kind == "srsrc":
            o = scalar(fam, v * 4, n)
        elif f.kind == "src" and v >= 256:
            o = Operand("vgpr", v - 256, n)
        else:
            o = scalar(fam, v, n, fb)
            if o.kind == "literal":
                o = Operand("literal", v, n, value=fields.get("literal"))
        if o.kind == "vgpr" and _is_acc(enc, fields, f.name, op is not None and "SMFMAC" in op.name):
            o = Operand("agpr", o.index, o.count)
        out[f.name] = _ONE.setdefault(o, o)
    return out


_ONE: dict[Operand, Operand] = {}  # one object per distinct operand: a program's decoded instructions share them


_ACC_DATA = ("vdst", "vdata", "data", "data0", "data1")


def _is_acc(enc: Encoding, fields: dict[str, int], name: str, op_is_smfmac: bool = False) -> bool:
    """CDNA: whether a VGPR-field names an accumulation register (AGPR)."""
    if enc.variant.startswith("MFMA"):
        if name == "vdst" or (name == "src2" and fields["src2"] >= 256 and not op_is_smfmac):
            return bool(fields.get("acc_cd"))
        return bool(fields.get("acc", 0) >> ("src0", "src1").index(name) & 1) if name in ("src0", "src1") else False
    return name in _ACC_DATA and bool(fields.get("acc"))


def vop3_twin(d: Decoder, op: Op) -> bool:
    """Whether a VOP1/VOP2/VOPC opcode also exists in the VOP3 space (LLVM then suffixes _e32/_e64)."""
    return (("VOP3", op.name) in d.isa.by_name or ("VOP3SD", op.name) in d.isa.by_name)


def vop12c_twin(d: Decoder, op: Op) -> bool:
    return any((s, op.name) in d.isa.by_name for s in ("VOP1", "VOP2", "VOPC"))


# VOP1 opcodes that LLVM defines without a VOP3 form (no _e32 suffix) although the vendor tables list one.
NO_E32 = {"V_SWAP_B32", "V_ACCVGPR_MOV_B32"}
# Vendor opcode names that LLVM spells differently (on every chip; a generation's own: ISA.spellings).
RENAMES = {"V_ACCVGPR_READ": "v_accvgpr_read_b32", "V_ACCVGPR_WRITE": "v_accvgpr_write_b32",
           "V_MAD_MIX_F32": "v_fma_mix_f32", "V_MAD_MIXLO_F16": "v_fma_mixlo_f16", "V_MAD_MIXHI_F16": "v_fma_mixhi_f16"}


def mnemonic(d: Decoder, enc: Encoding, op: Op | None, fields: dict[str, int]) -> str:
    if op is None:
        return "<unknown>"
    name = d.isa.spellings.get(op.name) or RENAMES.get(op.name) or op.name.lower()
    mod = enc.variant
    if enc.base == "VOPD":
        return name
    if enc.base in ("VOP1", "VOP2", "VOPC"):
        if "SDWA" in mod:
            return name + "_sdwa"
        if "DPP" in mod:
            return name if enc.base == "VOPC" else name + "_dpp"  # LLVM spells VOPC DPP without a suffix
        vdst = op.operands.get("vdst")
        if "SDST" in mod or (vdst is not None and vdst.kind.startswith("SREG")):  # v_readfirstlane_b32: no VOP3
            return name
        return name + "_e32" if vop3_twin(d, op) and op.name not in NO_E32 and op.operands else name
    if enc.base in ("VOP3", "VOP3SD", "VOP3P") and "DPP" in mod:
        return name + "_e64_dpp"
    if enc.base in ("VOP3", "VOP3SD"):
        return name + "_e64" if vop12c_twin(d, op) and op.operands else name
    return name
