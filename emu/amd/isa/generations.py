"""One instruction set per generation: what each lacks of the instruction set it is derived from, what it adds, and
the mnemonics LLVM 19 spells differently for it.

The vendor tables of a family are the instruction set of its newest generation (CDNA's are CDNA4's, gfx950). An
older generation's set is derived from a newer one's by a `Delta`: the opcodes it lacks (regular expressions over
vendor names, every opcode space), the opcodes it has that the tables do not list (emu.pcode.added, with their
pcode), encoding fields it does not have or names otherwise, and LLVM's spellings for it. A chip of a new generation
is one more `Delta` row here (and its `Generation` in emu.amd.target).

Sources of the lacks: llvm-mc-19 -mcpu=<chip> decodes none of the opcode's instructions drawn by emu.amd.strategies
from the set it is derived from (eight per opcode and encoding): for gfx942 the CDNA4 (gfx950) additions, for gfx90a
the CDNA3 (gfx940) ones, which llvm-mc-19 -mcpu=gfx942 does decode. For gfx90a, random words of every opcode number
were also disassembled by llvm-mc-19, to find the opcodes it has at numbers where the tables list another instruction
or none (emu.pcode.added). Spellings: llvm-mc-19's.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

from emu.amd.isa.tables import ISA, Encoding, Op


@dataclass(frozen=True)
class Delta:
    base: str  # the instruction set this one is derived from (a family's tables' name, or another Delta's)
    lacks: tuple[tuple[str, str], ...]  # (regex over vendor opcode names, where the fact comes from)
    spellings: dict[str, str] = field(default_factory=dict)  # vendor name -> LLVM 19's mnemonic (no _e32/_e64)
    fields: dict[tuple[str, str], str | None] = field(default_factory=dict)  # (encoding base, field) -> new name
    # (None: the generation's encoding has no such field)
    widths: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)  # (encoding base, field) ->
    # (its width in bits from its low bit, where the fact comes from)


_GFX950 = "CDNA4 (gfx950) additions: llvm-mc-19 -mcpu=gfx942 decodes none of them"
_GFX940 = "CDNA3 (gfx940) additions: llvm-mc-19 -mcpu=gfx90a decodes none of them, -mcpu=gfx942 does"
_FLAT_OFFSET = ("gfx9's FLAT encodings have a 13-bit OFFSET [12:0] (LLVM 19's FLAT_Real for gfx90a and gfx940 encode "
                "and llvm-mc-19 prints all 13 bits); the tables give the FLAT segment's [11:0], the bits the hardware "
                "reads: it ignores the MSB there (emu.amd.exec.bind.memory_offset)")
_MOVED = ("CDNA3 moved gfx90a's bf16 MFMAs with four elements per source (the _1k forms) from VOP3P 0x63..0x67 to "
          "0x5d..0x61 (llvm-mc-19): gfx90a has them at the old numbers (emu.pcode.added)")

DELTAS: dict[str, Delta] = {
    "cdna3": Delta("cdna", lacks=(
        (r"DS_READ_B\d+_TR_B\d+|S_SET_VALU_COEXEC_MODE|V_ASHR_PK_[IU]8_I32|V_BITOP3_B(16|32)|V_CVT_PK_(BF16|F16)_F32|"
         r"V_CVT_SCALEF32_\w+|V_CVT_SR_(BF16|F16)_F32|V_CVT_F32_BF16|V_DOT2C?_F32_BF16|V_PERMLANE(16|32)_SWAP_B32|"
         r"V_PK_(MAXIMUM|MINIMUM)3_F16|V_(MAXIMUM|MINIMUM)3_F32|V_PRNG_B32|BUFFER_ATOMIC_PK_ADD_BF16|"
         r"GLOBAL_LOAD_LDS_DWORDX[34]|V_MFMA_\w+_F8F6F4|V_MFMA_(LD_)?SCALE_\w+|V_MFMA_F32_(16X16X32|32X32X16)_B?F16|"
         r"V_MFMA_I32_(16X16X64|32X32X32)_I8|V_SMFMAC_[FI]32_(16X16X128|32X32X64)_\w+|"
         r"V_SMFMAC_F32_(16X16X64|32X32X32)_B?F16", _GFX950),),
        widths={("FLAT", "offset"): (13, _FLAT_OFFSET)}),
    "cdna2": Delta("cdna3", lacks=(
        (r"DS_PK_ADD_(RTN_)?B?F16|FLAT_ATOMIC_ADD_F32|(FLAT|GLOBAL)_ATOMIC_PK_ADD_BF16|FLAT_ATOMIC_PK_ADD_F16|"
         r"(GLOBAL|SCRATCH)_LOAD_LDS_\w+|V_CVT_\w*(FP8|BF8)\w*|V_MOV_B64|V_LSHL_ADD_U64|V_FMAMK_F32|V_FMAAK_F32|"
         r"V_MFMA_F32_\w+_XF32|V_MFMA_F32_\w+_(FP8|BF8)_(FP8|BF8)|V_MFMA_I32_(16X16X32|32X32X16)_I8|V_SMFMAC_\w+",
         _GFX940),
        (r"V_MFMA_F32_(32X32X4_2B|16X16X4_4B|4X4X4_16B|32X32X8|16X16X16)_BF16", _MOVED)),
        # gfx90a's FLAT bit 13 loads to LDS (LLVM: `lds`); CDNA3 made it SVE, which says a scratch access has a VGPR
        # address (gfx90a's scratch has one exactly when SADDR is off)
        fields={(seg, "sve"): "lds" for seg in ("FLAT", "GLOBAL", "SCRATCH")},
        spellings={
            "BUFFER_INV": "buffer_invl2",
            "V_MFMA_F32_32X32X1_2B_F32": "v_mfma_f32_32x32x1f32", "V_MFMA_F32_16X16X1_4B_F32": "v_mfma_f32_16x16x1f32",
            "V_MFMA_F32_4X4X1_16B_F32": "v_mfma_f32_4x4x1f32", "V_MFMA_F32_32X32X2_F32": "v_mfma_f32_32x32x2f32",
            "V_MFMA_F32_16X16X4_F32": "v_mfma_f32_16x16x4f32", "V_MFMA_F32_32X32X4_2B_F16": "v_mfma_f32_32x32x4f16",
            "V_MFMA_F32_16X16X4_4B_F16": "v_mfma_f32_16x16x4f16", "V_MFMA_F32_4X4X4_16B_F16": "v_mfma_f32_4x4x4f16",
            "V_MFMA_F32_32X32X8_F16": "v_mfma_f32_32x32x8f16", "V_MFMA_F32_16X16X16_F16": "v_mfma_f32_16x16x16f16",
            "V_MFMA_I32_32X32X4_2B_I8": "v_mfma_i32_32x32x4i8", "V_MFMA_I32_16X16X4_4B_I8": "v_mfma_i32_16x16x4i8",
            "V_MFMA_I32_4X4X4_16B_I8": "v_mfma_i32_4x4x4i8", "V_MFMA_I32_32X32X8_I8": "v_mfma_i32_32x32x8i8",
            "V_MFMA_I32_16X16X16_I8": "v_mfma_i32_16x16x16i8",
            "V_MFMA_F32_32X32X4_2B_BF16": "v_mfma_f32_32x32x4bf16_1k",
            "V_MFMA_F32_16X16X4_4B_BF16": "v_mfma_f32_16x16x4bf16_1k",
            "V_MFMA_F32_4X4X4_16B_BF16": "v_mfma_f32_4x4x4bf16_1k",
            "V_MFMA_F32_32X32X8_BF16": "v_mfma_f32_32x32x8bf16_1k",
            "V_MFMA_F32_16X16X16_BF16": "v_mfma_f32_16x16x16bf16_1k",
            "V_MFMA_F32_32X32X2_2B_BF16": "v_mfma_f32_32x32x2bf16",
            "V_MFMA_F32_16X16X2_4B_BF16": "v_mfma_f32_16x16x2bf16",
            "V_MFMA_F32_4X4X2_16B_BF16": "v_mfma_f32_4x4x2bf16", "V_MFMA_F32_32X32X4_BF16": "v_mfma_f32_32x32x4bf16",
            "V_MFMA_F32_16X16X8_BF16": "v_mfma_f32_16x16x8bf16",
            "V_MFMA_F64_16X16X4_F64": "v_mfma_f64_16x16x4f64", "V_MFMA_F64_4X4X4_4B_F64": "v_mfma_f64_4x4x4f64"}),
}


def derive(base: ISA, name: str) -> ISA:
    """The instruction set `name` from the set its Delta derives it from."""
    from emu.pcode.added import ADDED  # data only: the pcode of the opcodes the tables do not list
    d = DELTAS[name]
    lacks = re.compile("|".join(f"(?:{r})" for r, _ in d.lacks))
    ops = {k: o for k, o in base.ops.items() if not lacks.fullmatch(o.name)}
    likes: dict[tuple[str, int], int] = {}  # added opcode -> the number of the opcode it copies
    for a in ADDED.get(name, ()):
        like = base.by_name[(a.space, a.like)]
        operands = {k: dataclasses.replace(v, bits=a.bits.get(k, v.bits)) for k, v in like.operands.items()
                    if k not in a.drop}
        ops[(a.space, a.value)] = Op(a.space, a.name, a.value, operands, a.pcode)
        likes[(a.space, a.value)] = like.value
    encodings = {}
    for e in base.encodings.values():
        enc = _encoding(e, d, ops, likes)
        if enc is not None:
            encodings[enc.name] = enc
    return ISA(base.family, encodings, ops, base.enums, name, {**base.spellings, **d.spellings})


def _encoding(e: Encoding, d: Delta, ops: dict, likes: dict) -> Encoding | None:
    """`e` in the derived set: its opcode set without the opcodes lacked and with those added whose model it
    admits (None when no opcode is left), its fields renamed or dropped as the Delta says."""
    admitted = e.ops
    if admitted is not None:
        admitted = frozenset(v for v in admitted if (e.space, v) in ops and (e.space, v) not in likes) | frozenset(
            v for (sp, v), like in likes.items() if sp == e.space and like in e.ops)
        if not admitted:
            return None
    fields = []
    for f in e.fields:
        new = d.fields.get((e.base, f.name), f.name)
        width = d.widths.get((e.base, f.name), (f.width,))[0]
        if new is not None:
            fields.append(dataclasses.replace(f, name=new, hi=f.lo + width - 1))
    return dataclasses.replace(e, fields=tuple(fields), ops=admitted)
