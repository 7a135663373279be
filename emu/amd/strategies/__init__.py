"""Hypothesis strategies that produce valid encoded AMD GPU instructions, built from the vendor tables.

    from emu.amd import strategies
    instructions(arch, encoding=None, opcode=None) -> SearchStrategy[bytes]   one valid instruction, little-endian
    opcodes(arch, encoding) -> list[str]                           the opcodes an encoding draws
    encodings(arch) -> list[str]                                   the encoding names instructions() supports
    programs(arch, max_size=16) -> SearchStrategy[list[bytes]]     1..max_size instructions of mixed encodings

`arch` is a gfx name or family ('gfx1100', 'rdna4', 'gfx942', ...); `encoding` a key of
`isa.load(arch).encodings` ('SOP2', 'VOP3', 'VOP1_DPP16', 'VOP3P_MFMA', 'GLOBAL', 'VOP2_LIT', ...); an
unknown one (VOP3PX2 on gfx942: not in its instruction set), or one without a single drawable opcode
(VOP1_SDST_LIT), is a ValueError.

Everything is table driven, no per-opcode code: the opcode comes from the encoding's opcode set, fixed
fields get their value, operand fields are filled by the opcode's operand kind, format and width in
`emu.amd.isa` (register numbers in range, SGPR tuples and CDNA VGPR tuples aligned, inline constants and
special registers where the kind takes them), modifiers where the operand types take them (neg/abs on
float sources, clamp/omod on float results, VOP3P op_sel, DPP/SDWA source modifiers and selects, MFMA
broadcast and AGPR selects, image channel masks), control fields from their valid ranges (DPP controls,
lane selects, export targets, buffer formats, cache bits, offsets), and the _LIT variants select the
literal in a source field and carry a 32-bit literal that is not an inline constant. Fields an opcode
does not use stay at their default, so each instruction is LLVM's canonical encoding of itself.

Modules: emu.amd.strategies.fields (registers, operands, each field's values), memory (memory forms), valu
(VALU rules: modifiers, the literal, the constant bus, VOPD banks), this one (the instruction, the encodings' plans).

Validation (tests/test_strategies.py): LLVM 19's disassembler accepts every draw on gfx1100, gfx1201, gfx942
and gfx90a as one instruction of exactly its size and re-encodes it to the same bytes. A chip draws the opcodes
of its instruction set (emu.amd.isa.load: a family name the whole table); opcodes the set has but LLVM 19 lacks
are listed, with the reason, in _LLVM_LACKS (matched against the gfx name), and fields LLVM reads only as 0 for
some opcodes in fields._LLVM_ZERO; gfx950 cannot be checked (LLVM 19 does not know it).
"""
from __future__ import annotations

import dataclasses
import functools
import re
import struct

from hypothesis import strategies as st

from emu.amd import isa
from emu.amd.regs import DPP8, DPP8FI, DPP16, SDWA, VGPR0
from emu.amd.strategies.fields import ACCEPTS, Enc, regs
from emu.amd.strategies.memory import MemoryForms
from emu.amd.strategies.valu import ValuRules

# Opcodes the vendor tables admit that LLVM 19 does not decode: (arch, encoding, opcode) regexes and why.
_LLVM_LACKS = (
    (r"gfx110\d", r"SOP[12C](_LIT)?", r"S_\w*F(16|32)\w*", "scalar floating point is gfx1150+"),
    (r"gfx11\d\d", r"DS", r"DS_GWS_SEMA_P|DS_(ADD|SUB)_GS_REG_RTN", "not in LLVM 19's gfx11 DS table"),
    (r".*", r"DS", r"DS_GWS_\w+|DS_ORDERED_COUNT", "LLVM wants the gds bit, the table does not say so"),
    (r"gfx1\d+", r"VOP1\w*", r"V_SWAP_B16", "not in LLVM 19 (true16 only)"),
    (r"gfx11\d\d", r".*", r"FLAT_ATOMIC_CSUB_U32|S_ENDPGM_ORDERED_PS_DONE", "not in LLVM 19 for gfx11"),
    (r"gfx12\d\d", r".*", r"S_ALLOC_VGPR|DS_BPERMUTE_FI_B32|DS_BVH_STACK_PUSH\w+", "not in LLVM 19 for gfx12"),
    (r"gfx12\d\d", r"SOP1\w*", r"S_BARRIER_INIT|S_BARRIER_JOIN|S_GET_BARRIER_STATE", "the table lists no operands"),
    (r"gfx9(42|0a)", r".*", r"V_MAD_MIX\w*", "gfx90a and gfx940 have V_FMA_MIX, not V_MAD_MIX"),
    (r"gfx950", r".*", r"V_MFMA_F32_\w+_XF32", "the table lists no operands for it (CDNA4 has no XF32 MFMAs)"),
    (r"gfx9\w+", r"VOP3|VOP1_DPP16", r"V_ACCVGPR_MOV_B32|V_SWAP_B32", "LLVM 19 decodes only its VOP1 form"),
    (r"gfx9\w+", r"VOP3", r"V_PK_FMAC_F16", "LLVM 19: 'e64 variant of this instruction is not supported'"),
    (r"gfx9\w+", r"VOP[12]_SDWA\w*", r"V_ACCVGPR_MOV_B32|V_DOT\w+|V_MAC_F(16|32)|V_FMAC_F32|V_PK_FMAC_F16|V_SWAP_B32",
     "no SDWA form"),
    (r"gfx9\w+", r"VOP1_SDWA", r"V_CVT_F32_(FP8|BF8)", "LLVM 19 rejects most of their SDWA encodings"),
    (r".*", r"V?FLAT", r"GLOBAL_\w+", "GLOBAL opcodes the table also lists under FLAT"),
    (r"gfx11\d\d", r"GLOBAL|SCRATCH", r"\w+_LOAD_LDS_\w+", "LDS-DMA loads are not in LLVM 19 for gfx11"),
    (r"gfx11\d\d", r"VOPD(_LIT)?", r"V_DUAL_DOT2ACC_F32_BF16", "not in LLVM 19's gfx11 VOPD table"),
    (r"gfx12\d\d", r"VOPD(_LIT)?", r"V_DUAL_DOT2ACC_\w+", "not in LLVM 19's gfx12 VOPD table"),
    (r"gfx1\d+", r"MIMG|VIMAGE", r"IMAGE_BVH\w*", "address size depends on a16 / BVH8 rules the table lacks"),
    (r".*", r"VOP1_DPP\w*", r"V_(SWAP|SWAPREL)_B\d+|V_PERMLANE64_B32", "no DPP form"),
    (r".*", r"VOP2_DPP\w*", r"V_FMAC_DX9_ZERO_F32|V_PK_FMAC_F16", "no DPP form"),
    (r".*", r"VOP3_DPP\w*", r"V_(FMAC?_DX9_ZERO_F32|DIV_FIXUP_F32|DIV_FMAS_F32|M?QSAD\w+|PERMLANEX?16\w*|"
     r"MUL_LO_U32|MUL_HI_[IU]32|READLANE_B32|WRITELANE_B32)", "no e64_dpp form in LLVM 19"),
    (r"gfx1\d+", r"VOP3\w*", r"V_MOV_B16|V_READFIRSTLANE_B32", "no e64 form in LLVM 19"),
    (r".*", r"VOP3SD_DPP\w*", r"V_DIV_SCALE_F32", "no DPP form"),
    (r".*", r"VOP3P_DPP\w*", r"(?!V_DOT2_F32_F16|V_FMA_MIX|V_DOT4_F32_).*", "only these VOP3P opcodes have DPP forms"),
)

# Literal-only opcodes carry an implicit constant (the K of FMAMK/FMAAK) instead of a source field.
_IMPLICIT_K = re.compile(r"_(MK|AK)_|(MK|AK)_[A-Z]\d+$")

# Export targets (RDNA): mrt0..7, mrtz, pos0..4, prim, dual_src_blend0/1.
_EXP_TARGETS = (*range(0, 9), *range(12, 17), 20, 21, 22)
_VALU = ("VOP1", "VOP2", "VOPC", "VOP3", "VOP3SD", "VOP3P", "VOPD", "VINTERP")


def _inline_patterns() -> frozenset[int]:
    """32-bit literal values LLVM would re-encode as inline constants (integers, f32/f16/bf16/f64-high floats)."""
    ints = {*range(65), *range(2**32 - 16, 2**32)}
    floats = [0.5, 1.0, 2.0, 4.0]
    f32 = {struct.unpack("<I", struct.pack("<f", s * x))[0] for x in floats for s in (1, -1)} | {0x3E22F983}
    f16 = {struct.unpack("<H", struct.pack("<e", s * x))[0] for x in floats for s in (1, -1)} | {0x3118}
    bf16 = {x >> 16 for x in f32}
    f64 = {struct.unpack("<Q", struct.pack("<d", s * x))[0] >> 32 for x in floats for s in (1, -1)}
    return frozenset(ints | f32 | f16 | bf16 | f64)


_INLINE_PATTERNS = _inline_patterns()
_INLINE16 = frozenset(x for x in _INLINE_PATTERNS if x < 0x10000) | frozenset(range(0xFFF0, 0x10000))
_LITERALS = st.integers(0, 2**32 - 1).filter(lambda x: x not in _INLINE_PATTERNS and x & 0xFFFF not in _INLINE16)


class _Gen(ValuRules, MemoryForms):
    """Draws one instruction of one encoding for one chip (or family)."""

    # -- the instruction ----------------------------------------------------------------------------------
    def draw(self, draw) -> bytes:
        enc, e = self.e.enc, self.e
        if enc.base == "VOPD":
            ops = {"opx": draw(st.sampled_from(e.xops)), "opy": draw(st.sampled_from(e.ops))}
        else:
            ops = {"op": draw(st.sampled_from(e.ops))} if e.ops else {}
        lit = "LIT" in enc.variant
        v: dict[str, int] = {}
        for f in enc.fields:
            if f.kind == "fixed":
                v[f.name] = f.value
            elif f.name in ops:
                v[f.name] = ops[f.name].value
            elif f.name == "literal":
                v[f.name] = draw(_LITERALS)
            else:
                op, operand = self.operand(ops, f.name)
                v[f.name] = self.field(draw, op, operand, f, lit)
        self.fixup(draw, ops, v, lit)
        word = sum(x << f.lo for f in enc.fields if (x := v[f.name]))
        return word.to_bytes(enc.size, "little")

    def fixup(self, draw, ops: dict[str, isa.Op], v: dict[str, int], lit: bool) -> None:
        """Rules across fields: DPP/SDWA markers, matrix and export controls, memory forms, modifiers, the
        literal, the constant bus, VOPD banks."""
        variant, op = self.e.enc.variant, ops.get("op")
        if variant.startswith(("DPP16", "DPP8", "SDWA")):
            v["src0"] = draw(st.sampled_from((DPP8, DPP8FI))) if variant.startswith("DPP8") else \
                DPP16 if variant.startswith("DPP16") else SDWA
        if variant == "MFMA":  # matrix ops: broadcast controls, AGPR selects for A/B and C/D
            for name in ("cbsz", "abid", "acc_cd", "acc", "blgp"):
                if name != "blgp" or not op.name.startswith("V_SMFMAC"):  # sparse MFMA has no B-lane group pattern
                    v[name] = draw(st.integers(0, (1 << self.e.enc.field(name).width) - 1))
            n, c = regs(op.operands["vdst"].bits), v["src2"] - VGPR0
            if c >= 0 and regs(op.operands["src2"].bits) == n and c != v["vdst"] and abs(c - v["vdst"]) < n:
                v["src2"] = VGPR0 + v["vdst"]  # C and D are the same registers or disjoint
        if "target" in v:  # export: a target, and a VGPR for each enabled channel
            v["target"] = draw(st.sampled_from(_EXP_TARGETS))
            for i in range(4):
                v[f"vsrc{i}"] = self.vgpr(draw, 1) if v["en"] >> i & 1 else 0
        if op is not None:
            self.memory(draw, op, v)
            self.modifiers(draw, op, v)
        if lit:
            self.literal(draw, ops, v)
        if self.e.enc.base in _VALU:
            self.constant_bus(draw, ops, v)
        if "vsrcy1" in v:
            self.vopd_banks(ops, v)


def _dpp_capable(op: isa.Op) -> bool:
    """DPP and SDWA apply to opcodes with a source, a VGPR result, and only 32-bit-or-narrower operands."""
    vdst = op.operands.get("vdst")
    return any(k.startswith(("src", "vsrc")) for k in op.operands) and (vdst is None or ACCEPTS[vdst.kind] == "v") \
        and all(o.bits <= 32 or o.fmt == "NUM_M64" for o in op.operands.values())  # lane masks do not count


@functools.cache
def _plan(arch: str, name: str) -> Enc:
    t = isa.load(arch)
    enc = t.encodings.get(name)
    if enc is None:
        raise ValueError(f"{arch}: unknown encoding {name!r}; known: {', '.join(t.encodings)}")
    space = "VOPD" if enc.base == "VOPD" else enc.space
    lacks = [re.compile(op) for a, en, op, _ in _LLVM_LACKS if re.fullmatch(a, arch) and re.fullmatch(en, name)]
    ops = [o for o in t.ops_of(space) if (enc.ops is None or o.value in enc.ops)
           and not any(r.fullmatch(o.name) for r in lacks)] if space else []
    lit = "LIT" in enc.variant
    if space == "VOPD":
        literal_only = frozenset(o.name for o in ops if _IMPLICIT_K.search(o.name))
        if not lit:
            ops = [o for o in ops if o.name not in literal_only]
        xops = [o for o in ops if o.value < 1 << enc.field("opx").width]
        return Enc(enc, tuple(ops), tuple(xops), literal_only)
    literal_only = frozenset()
    if lit:  # the opcodes of the base encoding, plus those only a literal encoding has
        plain = {o for n, e in t.encodings.items() if e.space == space and "LIT" not in e.variant for o in e.ops or ()}
        literal_only = frozenset(o.name for o in ops if o.value not in plain)
        base = t.encodings[name.removesuffix("_LIT")]
        ops = [o for o in ops if o.name in literal_only or base.ops is None or o.value in base.ops]
    vdst = enc.field("vdst")
    if vdst is not None and vdst.kind == "vgpr":  # opcodes that write an SGPR have their own encoding (.._SDST)
        ops = [o for o in ops if "vdst" not in o.operands or ACCEPTS.get(o.operands["vdst"].kind) == "v"]
    if enc.variant.startswith(("DPP", "SDWA")):
        ops = [o for o in ops if _dpp_capable(o)]
    e = Enc(enc, tuple(ops), (), literal_only)
    if lit:  # keep opcodes that can carry a literal at all, and on GFX9 next to an implicit VCC read
        g = _Gen(arch, t, e)
        ops = [o for o in ops if (o.name in literal_only or g.literal_fields({"op": o}))
               and not (g.gen.constant_bus == 1 and g.reads_vcc(o))]
        e = Enc(enc, tuple(ops), (), literal_only)
    return e


def encodings(arch: str) -> list[str]:
    """Names of the encodings of `arch` that instructions() can produce."""
    return [n for n in isa.load(arch).encodings if _usable(arch, n)]


def _usable(arch: str, name: str) -> bool:
    e = _plan(arch, name)
    return bool(e.ops) or not e.enc.space and e.enc.base != "VOPD"  # EXP has no opcode field


def opcodes(arch: str, encoding: str) -> list[str]:
    """Names of the opcodes instructions(arch, encoding) draws (VOPD: of either half)."""
    e = _plan(arch, encoding)
    return sorted({o.name for o in (*e.ops, *e.xops)})


def llvm_lacks(arch: str, encoding: str, opcode: str) -> str | None:
    """Why instructions() does not draw `opcode` in `encoding` because LLVM 19 does not decode it (None: not so)."""
    return next((why for a, en, op, why in _LLVM_LACKS
                 if re.fullmatch(a, arch) and re.fullmatch(en, encoding) and re.fullmatch(op, opcode)), None)


@functools.cache
def instructions(arch: str, encoding: str | None = None, opcode: str | None = None) -> st.SearchStrategy[bytes]:
    """One valid instruction of `arch` (little-endian bytes) in `encoding`, or in any supported encoding; with
    `opcode` (one of opcodes(arch, encoding)), of that opcode (VOPD: in the X half where it can be, else in Y)."""
    if encoding is None:
        return st.one_of([instructions(arch, n) for n in encodings(arch)])
    e = _plan(arch, encoding)
    if not _usable(arch, encoding):
        raise ValueError(f"{arch}: no opcodes of encoding {encoding!r} can be generated")
    if opcode is not None:
        if opcode not in opcodes(arch, encoding):
            raise ValueError(f"{arch}: {encoding} does not draw {opcode!r}")
        xops = tuple(o for o in e.xops if o.name == opcode)
        ops = e.ops if xops else tuple(o for o in e.ops if o.name == opcode)
        e = dataclasses.replace(e, ops=ops, xops=xops or e.xops)
    g = _Gen(arch, isa.load(arch), e)
    return st.composite(lambda draw: g.draw(draw))()


def programs(arch: str, max_size: int = 16) -> st.SearchStrategy[list[bytes]]:
    """A stream of 1..max_size valid instructions of `arch`, mixed encodings."""
    return st.lists(instructions(arch), min_size=1, max_size=max_size)
