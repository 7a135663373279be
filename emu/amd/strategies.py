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

Validation (tests/test_strategies.py): LLVM 19's disassembler accepts every draw on gfx1100, gfx1201, gfx942
and gfx90a as one instruction of exactly its size and re-encodes it to the same bytes. A chip draws the opcodes
of its instruction set (emu.amd.isa.load: a family name the whole table); opcodes the set has but LLVM 19 lacks
are listed, with the reason, in _LLVM_LACKS (matched against the gfx name), and fields LLVM reads only as 0 for
some opcodes in _LLVM_ZERO; gfx950 cannot be checked (LLVM 19 does not know it).
"""
from __future__ import annotations

import dataclasses
import functools
import re
import struct
from dataclasses import dataclass

from hypothesis import strategies as st

from emu.amd import isa, target
from emu.amd.exec.state import EXEC, VCC

LITERAL = 255  # source-field value that selects the 32-bit literal after the instruction
VGPR_BASE = 256  # 9-bit source fields: 256 + n selects vN
INLINE_INT = tuple(range(128, 209))  # inline integers 0..64, -1..-16
INLINE = (*INLINE_INT, *range(240, 249))  # and the float constants 0.5 .. 1/(2*pi)
DPP16, DPP8, DPP8_FI, SDWA = 250, 233, 234, 249  # src0 values that announce the DPP / SDWA dword


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

# Fields LLVM 19 decodes only as 0 for some opcodes of a chip (arch, encoding, opcode regexes; field; why).
_LLVM_ZERO = (
    (r"gfx90a", r"FLAT|GLOBAL|MUBUF", r"\w+_ATOMIC_(ADD_F32|PK_ADD_F16|(ADD|MIN|MAX)_F64)", "sc1",
     "its gfx90a float atomics take no scc: the assembler drops it, the disassembler rejects the bit"),
)

# Literal-only opcodes carry an implicit constant (the K of FMAMK/FMAAK) instead of a source field.
_IMPLICIT_K = re.compile(r"_(MK|AK)_|(MK|AK)_[A-Z]\d+$")

# Source operand kinds -> what they accept: s = scalar registers, v = VGPRs, i = inline constants, l = literal.
_ACCEPTS = {
    "SRC": "svil", "SRC_NOLDS": "svil", "SRC_NOLIT": "svi", "SRC_SIMPLE": "svi", "SSRC": "sil",
    "SSRC_NOLIT": "si", "SSRC_LANESEL": "si", "SREG_M0_INL": "si", "SREG_LITERAL": "sl",
    "SRC_VGPR": "v", "VGPR": "v", "VGPR_OR_LDS": "v", "SRC_VGPR_OR_INLINE": "vi", "SRC_VGPR_OR_ACCVGPR": "v",
    "SRC_VGPR_OR_ACCVGPR_OR_CONST": "vi", "SRC_ACCVGPR": "v", "VGPR_OR_ACCVGPR": "v", "ACCVGPR": "v",
    "SREG": "S", "SDST": "s", "SDST_NULL": "s", "SREG_NOVCC": "S", "EXEC": "s", "SMEM_OFFSET": "S",
    "SSRC_BARRIER_ID": "i",
}

# DPP16 dpp_ctrl values per family: quad_perm, row_shl/shr/ror, then family-specific row operations.
_DPP_CTRL = {
    "rdna3": (*range(0x000, 0x100), *range(0x101, 0x110), *range(0x111, 0x120), *range(0x121, 0x130),
              0x140, 0x141, *range(0x150, 0x160), *range(0x160, 0x170)),
    "cdna": (*range(0x000, 0x100), *range(0x101, 0x110), *range(0x111, 0x120), *range(0x121, 0x130),
             0x130, 0x134, 0x138, 0x13C, 0x140, 0x141, 0x142, 0x143),
}
_DPP_CTRL["rdna4"] = _DPP_CTRL["rdna3"]
_NO_D16 = re.compile(r"_PCK|RESINFO|GET_LOD")  # image opcodes whose data is not formatted: no 16-bit data mode
# Export targets (RDNA): mrt0..7, mrtz, pos0..4, prim, dual_src_blend0/1.
_EXP_TARGETS = (*range(0, 9), *range(12, 17), 20, 21, 22)

# RDNA4 cache policy (th, scope) pairs by access: stores take all, loads all but th 7, atomics split by
# whether they return (th bit 0); cascade policies (th 4, 6) only with scope DEV / SYS, NT_RETURN not with SYS.
_TH_SCOPE = {
    "store": tuple((th, sc) for th in range(8) for sc in range(4)),
    "load": tuple((th, sc) for th in range(7) for sc in range(4)),
    "atomic": tuple((th, sc) for th in (0, 2) for sc in range(4)) + ((4, 2), (4, 3), (6, 2), (6, 3)),
    "atomic_return": tuple((1, sc) for sc in range(4)) + ((3, 0), (3, 1), (3, 2)),
}
_WAITCNT_BITS = {"rdna3": 0xFFF7, "rdna4": 0xFFFF, "cdna": 0xCF7F}
_SIMM16_BITS = {"S_SET_GPR_IDX_MODE": 0xF}  # the table types its 4-bit VGPR-index mode as a 16-bit immediate
_VALU = ("VOP1", "VOP2", "VOPC", "VOP3", "VOP3SD", "VOP3P", "VOPD", "VINTERP")
_SHIFT64 = re.compile(r"V_(LSHL|LSHR|ASHR)REV_[BI]64")  # GFX10+: one scalar value only
# Cache-policy fields: any value, for opcodes that move data.
_CACHE_BITS = re.compile(r"glc|slc|dlc|sc0|sc1|nt|scope|th")
_DATA = ("sdata", "vdata", "data", "data0", "vdst", "vsrc")
_ADDRESS = ("sbase", "addr", "vaddr", "saddr", "srsrc", "rsrc")
# Modifier / control fields whose every value is valid.
_FREE_BITS = re.compile(r"offset\d?|ioffset|lane_sel_\d|row_mask|bank_mask|bc|fi|"
                        r"done|en|attr|attr_chan|wait_vdst|wait_va_vdst|wait_vm_vsrc|waitexp")


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
_FLOAT = re.compile(r"F16|F32|F64")  # float operand formats (NUM_F32, NUM_PK2_F16, NUM_BF16, ...)
_INT_SRC1 = re.compile(r"_CLASS_|_LDEXP_")  # src1 is a class mask / an exponent, though typed as a float
_LITERALS = st.integers(0, 2**32 - 1).filter(lambda x: x not in _INLINE_PATTERNS and x & 0xFFFF not in _INLINE16)


def _width(bits: int) -> int:
    """Registers an operand of `bits` bits occupies."""
    return max(1, (bits + 31) // 32)


@dataclass(frozen=True)
class _Enc:
    """Everything instructions() needs about one encoding, computed once."""
    enc: isa.Encoding
    ops: tuple[isa.Op, ...]  # opcodes of the op field (of opy for VOPD)
    xops: tuple[isa.Op, ...] = ()  # VOPD: opcodes of opx
    literal_only: frozenset[str] = frozenset()  # opcodes (names) whose literal is implicit (FMAMK's K, ...)


class _Gen:
    """Draws one instruction of one encoding for one chip (or family)."""

    def __init__(self, arch: str, t: isa.ISA, e: _Enc):
        self.fam, self.t, self.e, self.gen = isa.family(arch), t, e, target.generation(arch)
        self.zero = [(re.compile(op), fld) for a, en, op, fld, _ in _LLVM_ZERO
                     if re.fullmatch(a, arch) and re.fullmatch(en, e.enc.name)]
        self.short = e.enc.base in ("VOP1", "VOP2", "VOPC")  # 32-bit encodings: 16-bit VGPR operands are v0..v127
        self.dpp = e.enc.variant.startswith("DPP")
        self.promoted = e.enc.base in ("VOP3", "VOP3SD") and not self.dpp  # VOP3 forms of 32-bit opcodes

    # -- registers ----------------------------------------------------------------------------------------
    @property
    def saddr_none(self) -> int:
        """The saddr of opcodes without a scalar address, as LLVM encodes them (gfx9: 0)."""
        return 0 if self.gen.gfx == 9 else self.gen.null

    def sgpr(self, draw, n: int) -> int:
        align = 1 if n == 1 else 2 if n == 2 else 4
        return draw(st.integers(0, (self.gen.sgprs - n) // align)) * align

    def vgpr(self, draw, n: int, limit: int = 256) -> int:
        align = 2 if n > 1 and self.gen.vgpr_align64 else 1
        return draw(st.integers(0, (limit - n) // align)) * align

    def scalar(self, draw, n: int, accepts: str) -> int:
        """An SGPR (tuple) or, where `accepts` allows ('s'), a special register."""
        g = self.gen
        # LLVM 19 decodes gfx9's NULL (125) but does not assemble it: drawn from gfx10 on
        specials = [] if "S" in accepts else [VCC, EXEC, g.null] if g.gfx > 9 else [VCC, EXEC]
        if n == 1 and "S" not in accepts:
            specials.append(g.m0)
        if specials and draw(st.integers(0, 3)) == 0:
            return draw(st.sampled_from(specials))
        return self.sgpr(draw, n)

    def source(self, draw, operand: isa.Operand, field: isa.Field, literal: bool) -> int:
        """A value for a register/source field that the operand kind accepts."""
        if operand.kind == "EXEC":
            return EXEC
        if operand.kind == "SDST_NULL":
            return self.gen.null
        accepts = _ACCEPTS.get(operand.kind, "")
        n = _width(operand.bits)
        limit = 128 if self.short and operand.bits == 16 else 256
        if field.kind == "vgpr" or (field.kind == "src" and accepts == "v"):
            return self.vgpr(draw, n, limit) + (VGPR_BASE if field.kind == "src" else 0)
        kinds = [k for k in "svi" if k in accepts.lower() and (k != "v" or field.kind == "src")]
        if literal and "l" in accepts:
            kinds.append("l")
        if not kinds:
            return field.value or 0
        k = draw(st.sampled_from(kinds))
        if k == "v":
            return VGPR_BASE + self.vgpr(draw, n, limit)
        if k == "i":  # LLVM turns float constants into literals for 16-bit integer and SALU operands
            ints = operand.bits == 16 and (field.kind == "ssrc" or re.search(r"[IU]16", operand.fmt))
            return draw(st.sampled_from(INLINE_INT if ints else INLINE))
        if k == "l":
            return LITERAL
        return self.scalar(draw, n, accepts)

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

    def operand(self, ops: dict[str, isa.Op], name: str) -> tuple[isa.Op | None, isa.Operand | None]:
        """The opcode a field belongs to and the operand it encodes (None if the opcode does not use it)."""
        if "opx" in ops:  # VOPD: the table types opy's fields; opx has the same operands
            op = ops["opx"] if name in ("srcx0", "vsrcx1", "vdstx") else ops["opy"]
            name = name.replace("x", "y")
        else:
            op = ops.get("op")
        if op is None:
            return None, None
        o = op.operands
        alias = {"src0": "vsrc0", "vsrc0": "src0", "src1": "vsrc1", "vsrc1": "src1"}
        operand = o.get(name) or o.get(alias.get(name, ""))
        if self.promoted and name in ("src0", "src1") and operand is not None and _ACCEPTS[operand.kind] == "v":
            operand = self.vop3_source(op, operand)
        return op, operand

    def vop3_source(self, op: isa.Op, operand: isa.Operand) -> isa.Operand:
        """The VOP3 form of a VOP1/VOP2/VOPC opcode takes in src0/src1 whatever its 32-bit form's src0 takes;
        the table types them after the 32-bit form's VGPR-only fields."""
        for space in ("VOP1", "VOP2", "VOPC"):
            e32 = self.t.by_name.get((space, op.name))
            if e32 is not None and (src0 := e32.operands.get("src0")) is not None:
                return isa.Operand(operand.fmt, operand.bits, src0.kind) if "s" in _ACCEPTS[src0.kind] else operand
        return operand

    def field(self, draw, op: isa.Op | None, operand: isa.Operand | None, f: isa.Field, lit: bool) -> int:
        if op is not None and not op.operands:  # e.g. S_DCACHE_INV, GLOBAL_WB
            return self.saddr_none if f.name == "saddr" else 0
        if operand is not None and operand.kind.startswith("SIMM") and f.kind != "bits":  # an immediate in a
            bits = min(5, int(operand.kind[4:]))  # register field; LLVM 19 decodes 5 bits of RDNA4's SIMM8
            return draw(st.integers(0, (1 << bits) - 1))
        if self.dpp and f.name in ("src1", "src2") and operand is not None and operand.fmt != "NUM_M64":  # DPP: VGPRs
            return VGPR_BASE + self.vgpr(draw, _width(operand.bits))
        if f.name == "saddr":
            if operand is None:
                return self.saddr_none
            return self.sgpr(draw, _width(operand.bits)) if draw(st.booleans()) else self.gen.saddr_off
        if f.kind in ("vgpr", "src", "ssrc", "sgpr"):
            return self.source(draw, operand, f, lit) if operand else (f.value or 0)
        if f.name in ("rsrc", "samp") and operand is not None:  # RDNA4: SGPR numbers in plain fields
            return self.sgpr(draw, _width(operand.bits))
        if f.name == "vaddr0" and op is not None:  # the first image address VGPR (later ones depend on dim)
            return self.vgpr(draw, 1)
        if f.kind == "sbase":
            return self.sgpr(draw, _width(operand.bits)) >> 1 if operand else 0
        if f.kind == "srsrc":
            return self.sgpr(draw, _width(operand.bits)) >> 2 if operand else 0
        if f.kind == "vdsty":
            return self.vgpr(draw, 1) >> 1 if operand else 0
        if f.name == "dpp":
            return draw(st.sampled_from(_DPP_CTRL[self.fam]))
        if f.name == "simm16":
            return self.simm16(draw, operand, op.name) if operand else 0
        if f.name in ("dfmt", "nfmt") and op is not None and op.name.startswith("TBUFFER"):
            return draw(st.integers(f.name == "dfmt", (1 << f.width) - 1))  # dfmt 0 is invalid
        if f.name == "format":  # buffer data format; 0 is BUF_FMT_INVALID, untyped accesses have 1
            return draw(st.integers(1, 63)) if op is not None and op.name.startswith("TBUFFER") else 1
        if _CACHE_BITS.fullmatch(f.name):
            data = op is not None and any(not o.kind.startswith("SIMM") for n, o in op.operands.items() if n in _DATA) \
                and any(n in op.operands for n in _ADDRESS)
            return draw(st.integers(0, (1 << f.width) - 1)) if data else 0
        if f.name.startswith("attr") and (op is None or "attr" not in op.operands):
            return 0
        if f.name == "attr":  # attr0 .. attr32
            return draw(st.integers(0, 32))
        if f.name in ("offset", "ioffset") and op is not None and op.name.startswith("S_BUFFER_"):
            return draw(st.integers(0, (1 << 20) - 1))  # buffer offsets are unsigned
        if f.name == "offset" and self.e.enc.base == "FLAT":  # the FLAT segment's offset is 12-bit unsigned
            return draw(st.integers(0, 4095)) if op is not None and "addr" in op.operands else 0
        if f.name in ("offset", "ioffset") and op is not None and not any(n in op.operands for n in _ADDRESS):
            return 0  # S_MEMTIME and friends
        if _FREE_BITS.fullmatch(f.name):
            return draw(st.integers(0, (1 << f.width) - 1))
        return f.value or 0

    def simm16(self, draw, operand: isa.Operand, op_name: str) -> int:
        """The 16-bit immediate of SOPP/SOPK, structured where the operand kind says so."""
        if operand.kind == "HWREG":  # register id, bit offset, size - 1
            hwreg = sorted(self.t.enums["HWREG"])
            return draw(st.sampled_from(hwreg)) | draw(st.integers(0, 31)) << 6 | draw(st.integers(0, 31)) << 11
        if operand.kind == "DELAY":  # instid0, instskip, instid1
            return draw(st.integers(0, 11)) | draw(st.integers(0, 5)) << 4 | draw(st.integers(0, 11)) << 7
        if operand.kind == "WAITCNT":  # vmcnt, expcnt, lgkmcnt; the bits between them are unused
            return draw(st.integers(0, 0xFFFF)) & _WAITCNT_BITS[self.fam]
        return draw(st.integers(0, 0xFFFF)) & _SIMM16_BITS.get(op_name, 0xFFFF)

    def fixup(self, draw, ops: dict[str, isa.Op], v: dict[str, int], lit: bool) -> None:
        """Rules across fields: DPP/SDWA markers, matrix and export controls, memory forms, modifiers, the
        literal, the constant bus, VOPD banks."""
        variant, op = self.e.enc.variant, ops.get("op")
        if variant.startswith(("DPP16", "DPP8", "SDWA")):
            v["src0"] = draw(st.sampled_from((DPP8, DPP8_FI))) if variant.startswith("DPP8") else \
                DPP16 if variant.startswith("DPP16") else SDWA
        if variant == "MFMA":  # matrix ops: broadcast controls, AGPR selects for A/B and C/D
            for name in ("cbsz", "abid", "acc_cd", "acc", "blgp"):
                if name != "blgp" or not op.name.startswith("V_SMFMAC"):  # sparse MFMA has no B-lane group pattern
                    v[name] = draw(st.integers(0, (1 << self.e.enc.field(name).width) - 1))
            n, c = _width(op.operands["vdst"].bits), v["src2"] - VGPR_BASE
            if c >= 0 and _width(op.operands["src2"].bits) == n and c != v["vdst"] and abs(c - v["vdst"]) < n:
                v["src2"] = VGPR_BASE + v["vdst"]  # C and D are the same registers or disjoint
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

    def memory(self, draw, op: isa.Op, v: dict[str, int]) -> None:
        """Memory forms: image channels and dimensions, buffer/scratch addressing, cache policies, atomics
        with and without return, GFX9 SMEM offsets."""
        if "dmask" in v:  # image data: up to four channels (the table types some too narrow)
            v["vdata"] = self.vgpr(draw, 4)
            if "ATOMIC" in op.name:  # 32-bit data, two dwords for compare-swap
                v["dmask"] = 3 if "CMPSWAP" in op.name else 1
            else:
                one = "GATHER4" in op.name or "MSAA_LOAD" in op.name  # these take a single channel
                v["dmask"] = 1 << draw(st.integers(0, 3)) if one else draw(st.integers(1, 15))
                for name in ("a16", "d16", "unrm"):
                    if name in v and (name != "d16" or not _NO_D16.search(op.name)):
                        v[name] = draw(st.integers(0, 1))
                if "dim" in v:  # 1D .. 2D_ARRAY; 2D_MSAA(_ARRAY) for the MSAA loads
                    v["dim"] = draw(st.integers(6, 7) if "MSAA" in op.name else st.integers(0, 5))
        if v.get("offen") == v.get("idxen") == 0:  # buffer access without VGPR offset or index
            v["vaddr"] = 0
        if self.e.enc.base in ("SCRATCH", "VSCRATCH"):  # the VGPR address is used only with sve (where there is
            addr = "addr" if "addr" in v else "vaddr"  # one), on gfx90a only where SADDR is off
            if "sve" in v:
                v["sve"] = draw(st.integers(0, 1))
                v[addr] *= v["sve"]
            elif v.get("saddr") != self.gen.saddr_off:
                v[addr] = 0
        if "lds" in v and "vaddr" not in op.operands and "_LDS_" in op.name:
            v["lds"] = 1  # buffer_store_lds_dword (gfx90a): the lds bit is part of the opcode
        for pattern, name in self.zero:
            if pattern.fullmatch(op.name) and name in v:
                v[name] = 0
        if "th" in v and v["th"] | v["scope"]:
            access = "atomic" if "_ATOMIC_" in op.name else "store" if "_STORE_" in op.name else "load"
            if access == "atomic" and v["th"] & 1:
                access = "atomic_return"
            v["th"], v["scope"] = draw(st.sampled_from(_TH_SCOPE[access]))
            v["th"] &= (1 << self.e.enc.field("th").width) - 1  # SMEM has two th bits
        ret = next((n for n in ("glc", "sc0", "th") if n in v), None)
        if "_ATOMIC_" in op.name and "vdst" in op.operands and ret and not v[ret] & 1:
            v["vdst"] = 0  # an atomic without return (GLC / SC0 / TH_ATOMIC_RETURN clear) writes no VGPR
        if "acc" in v and self.e.enc.variant != "MFMA" and "VGPR_OR_ACCVGPR" in {o.kind for o in op.operands.values()}:
            v["acc"] = draw(st.integers(0, 1))  # GFX90A+: the data registers are AGPRs
        if "_LOAD_LDS_" in op.name:  # loads into LDS write no VGPR (or AGPR), though the table lists one
            v.update({k: 0 for k in ("vdst", "acc") if k in v})
        if "imm" in v and "sbase" in op.operands:  # GFX9 SMEM: the offset is an immediate or an SGPR number
            v["imm"] = draw(st.integers(0, 1))
            if not v["imm"]:
                v["offset"] = self.sgpr(draw, 1)
        if v.get("soffset_en") == 0:
            v["soffset"] = 0

    def literal(self, draw, ops: dict[str, isa.Op], v: dict[str, int]) -> None:
        """_LIT variants: a source selects the literal (unless the opcode's K is implicit)."""
        fields = self.literal_fields(ops)
        implicit = [op for op in ops.values() if op.name in self.e.literal_only]
        if not implicit and not any(v[f] == LITERAL for f in fields):
            v[draw(st.sampled_from(fields))] = LITERAL
        users = [self.operand(ops, f)[1] for f in fields if v[f] == LITERAL]
        users += [op.operands["vdst"] for op in implicit if "vdst" in op.operands]
        if all(o.bits == 16 for o in users) or self.e.enc.base == "VOP3P":
            v["literal"] &= 0xFFFF  # a 16-bit operand's literal: LLVM keeps the low half only
        for i, f in enumerate(("src0", "src1", "src2")):
            if v.get(f) == LITERAL and self.operand(ops, f)[1].bits == 64:
                for m in ("neg", "abs"):  # no modifiers on a 64-bit literal
                    if m in v:
                        v[m] &= ~(1 << i)

    def constant_bus(self, draw, ops: dict[str, isa.Op], v: dict[str, int]) -> None:
        """A VALU instruction reads at most 2 scalar values (1 on GFX9, and for 64-bit shifts): distinct SGPRs,
        special registers, the literal, and VCC where the 32-bit form reads it implicitly. Sources over the
        limit that may be VGPRs become VGPRs."""
        limit = 1 if self.gen.constant_bus == 1 or any(_SHIFT64.fullmatch(op.name) for op in ops.values()) else 2
        used: set = set()
        if any(self.reads_vcc(op) for op in ops.values()):
            used.add("vcc")
        if any(op.name in self.e.literal_only for op in ops.values()):
            used.add("lit")  # FMAMK / FMAAK's K
        fields = []
        for f in self.e.enc.fields:
            x = v.get(f.name)
            if f.kind != "src" or x is None or x >= VGPR_BASE or x in (DPP16, DPP8, DPP8_FI, SDWA):
                continue
            operand = self.operand(ops, f.name)[1]
            if operand is None or (x != LITERAL and (x >= 128 or x == self.gen.null)):
                continue  # unused, inline constant, null
            takes_v = "v" in _ACCEPTS.get(operand.kind, "")
            fields.append((takes_v, x != LITERAL, f.name, operand, "lit" if x == LITERAL else x))
        for takes_v, _, name, operand, key in sorted(fields, key=lambda t: t[:2]):  # must-be-scalar, literal first
            if key in used or len(used) < limit:
                used.add(key)
            elif takes_v:
                v[name] = VGPR_BASE + self.vgpr(draw, _width(operand.bits))

    def reads_vcc(self, op: isa.Op) -> bool:
        """Whether the opcode reads VCC without a source field naming it (V_CNDMASK_B32 and carry-in adds in
        their 32-bit forms, V_DIV_FMAS); a VOPD component's pseudocode is its VOP2 twin's."""
        twin = self.t.by_name.get(("VOP2", op.name.replace("V_DUAL_", "V_")))
        code = re.sub(r"//.*", "", op.pcode or (twin.pcode if twin is not None else None) or "")
        explicit = any(o.fmt == "NUM_M64" for n, o in op.operands.items() if n.startswith("src"))
        return not explicit and bool(re.search(r"VCC(?!\.u64\[laneId\] = )", code))

    def vopd_banks(self, ops: dict[str, isa.Op], v: dict[str, int]) -> None:
        """VOPD register banks: X's and Y's src0 differ in reg % 4, so do their src1, and their src2 (the
        accumulator: vdst of FMAC / DOT2ACC, the VGPR after K of FMAMK) differ in reg % 2."""
        for x, y, base in (("srcx0", "srcy0", VGPR_BASE), ("vsrcx1", "vsrcy1", 0)):
            rx, ry = v[x] - base, v[y] - base
            used = self.operand(ops, x)[1] is not None and self.operand(ops, y)[1] is not None
            if used and rx >= 0 and ry >= 0 and rx % 4 == ry % 4:
                v[y] = base + ry - ry % 4 + (rx + 1) % 4

        def src2(c: str) -> str | None:
            name = ops[f"op{c}"].name
            return f"vdst{c}" if re.search("FMAC|DOT2ACC", name) else f"vsrc{c}1" if "FMAMK" in name else None

        def reg(name: str) -> int:
            return v[name] << 1 | (v["vdstx"] & 1 ^ 1) if name == "vdsty" else v[name]

        sx, sy = src2("x"), src2("y")
        if sx and sy and reg(sx) % 2 == reg(sy) % 2:  # one of them is an FMAMK's vsrc1: move that one
            movable, other1 = (sy, "vsrcx1") if sy == "vsrcy1" else (sx, "vsrcy1")
            for flip in (1, 3):  # change parity, keep clear of the other component's src1 bank
                r = v[movable] ^ flip
                if self.operand(ops, other1)[1] is None or r % 4 != v[other1] % 4:
                    v[movable] = r
                    break

    def modifiers(self, draw, op: isa.Op, v: dict[str, int]) -> None:
        """Source/result modifiers where the operand types take them: neg/abs on float sources, clamp and
        omod on float results, op_sel on 16-bit operands, SDWA selects."""
        def mask(pred) -> int:
            return sum(1 << i for i in range(3) if (o := self.operand({"op": op}, f"src{i}")[1]) and pred(o))

        def some(m: int) -> int:
            return draw(st.integers(0, 7)) & m

        vdst = op.operands.get("vdst")
        fres = vdst is not None and vdst.fmt.startswith("NUM_") and bool(_FLOAT.search(vdst.fmt))
        fsrc = mask(lambda o: bool(_FLOAT.search(o.fmt))) & (1 if _INT_SRC1.search(op.name) else 7)
        isrc = mask(lambda o: bool(re.match(r"NUM_[IU]\d", o.fmt)))
        base = self.e.enc.base
        packed = mask(lambda o: o.fmt.startswith("NUM_PK2"))
        if base == "VOP3P" and self.gen.gfx == 9 and not re.match(r"V_PK_|V_(FMA|MAD)_MIX", op.name):
            packed = 0  # GFX9 dot products take no op_sel / neg
        if base == "VOP3P":
            for name in ("neg", "neg_hi"):
                if name in v:
                    v[name] = some(fsrc & packed)
            if "opsel" in v:
                v["opsel"] = some(packed)
                v["opsel_hi"] = (v["opsel_hi"] & ~packed) | (some(packed) & 3)
                v["opsel_hi2"] = (v["opsel_hi2"] & ~(packed >> 2)) | (some(packed) >> 2)
        elif base in ("VOP3", "VOP3SD", "VINTERP"):
            for name, m in (("neg", fsrc), ("abs", 0 if packed else fsrc)):  # packed operations have no abs
                if name in v:
                    v[name] = some(m)
            if base == "VINTERP":  # op_sel picks the high half of 16-bit operands (LLVM 19 has none in VOP3)
                v["opsel"] = some(mask(lambda o: o.bits == 16)) | draw(st.integers(0, vdst.bits == 16)) << 3
        elif self.dpp and base in ("VOP1", "VOP2", "VOPC") or self.e.enc.variant.startswith("SDWA"):
            sdwa = self.e.enc.variant.startswith("SDWA")
            for i in range(2):  # the DPP16 / SDWA dword's per-source modifiers, for the sources the opcode has
                if self.operand({"op": op}, f"src{i}")[1] is None:
                    continue
                fs = fsrc & ~packed
                for name, value in (("neg", fs >> i & 1), ("abs", fs >> i & 1), ("sext", isrc >> i & 1),
                                    ("sel", 6 if sdwa else 0)):  # sel: BYTE_0 .. DWORD
                    if f"src{i}_{name}" in v:
                        v[f"src{i}_{name}"] = draw(st.integers(0, value))
            for name, hi in (("dst_sel", 6), ("dst_unused", 2)):
                if name in v:
                    v[name] = draw(st.integers(0, hi))
        fp8 = mask(lambda o: bool(re.search(r"FP8|BF8", o.fmt)))
        if fres and (base == "VOP3P") == bool(packed) and not fp8:  # clamp/omod: VOP3P packed, other plain float math
            for name, hi in (("clmp", 1), ("omod", 3)):
                if name in v:
                    v[name] = draw(st.integers(0, hi))

    def literal_fields(self, ops: dict[str, isa.Op]) -> list[str]:
        """Source fields that may select the literal."""
        return [f.name for f in self.e.enc.fields if f.kind in ("src", "ssrc") and f.name != "vdst"
                and "l" in _ACCEPTS.get(getattr(self.operand(ops, f.name)[1], "kind", ""), "")]


def _dpp_capable(op: isa.Op) -> bool:
    """DPP and SDWA apply to opcodes with a source, a VGPR result, and only 32-bit-or-narrower operands."""
    vdst = op.operands.get("vdst")
    return any(k.startswith(("src", "vsrc")) for k in op.operands) and (vdst is None or _ACCEPTS[vdst.kind] == "v") \
        and all(o.bits <= 32 or o.fmt == "NUM_M64" for o in op.operands.values())  # lane masks do not count


@functools.cache
def _plan(arch: str, name: str) -> _Enc:
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
        return _Enc(enc, tuple(ops), tuple(xops), literal_only)
    literal_only = frozenset()
    if lit:  # the opcodes of the base encoding, plus those only a literal encoding has
        plain = {o for n, e in t.encodings.items() if e.space == space and "LIT" not in e.variant for o in e.ops or ()}
        literal_only = frozenset(o.name for o in ops if o.value not in plain)
        base = t.encodings[name.removesuffix("_LIT")]
        ops = [o for o in ops if o.name in literal_only or base.ops is None or o.value in base.ops]
    vdst = enc.field("vdst")
    if vdst is not None and vdst.kind == "vgpr":  # opcodes that write an SGPR have their own encoding (.._SDST)
        ops = [o for o in ops if "vdst" not in o.operands or _ACCEPTS.get(o.operands["vdst"].kind) == "v"]
    if enc.variant.startswith(("DPP", "SDWA")):
        ops = [o for o in ops if _dpp_capable(o)]
    e = _Enc(enc, tuple(ops), (), literal_only)
    if lit:  # keep opcodes that can carry a literal at all, and on GFX9 next to an implicit VCC read
        g = _Gen(arch, t, e)
        ops = [o for o in ops if (o.name in literal_only or g.literal_fields({"op": o}))
               and not (g.gen.constant_bus == 1 and g.reads_vcc(o))]
        e = _Enc(enc, tuple(ops), (), literal_only)
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
