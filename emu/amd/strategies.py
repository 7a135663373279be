"""Hypothesis strategies that produce valid encoded AMD GPU instructions, built from the vendor tables.

    from emu.amd import strategies
    instructions(arch, encoding=None) -> SearchStrategy[bytes]   one valid instruction, little-endian bytes
    encodings(arch) -> list[str]                                   the encoding names instructions() supports
    programs(arch, max_size=16) -> SearchStrategy[list[bytes]]     1..max_size instructions of mixed encodings

`arch` is a gfx name or family ('gfx1100', 'rdna4', 'gfx942', ...); `encoding` a key of
`isa.load(arch).encodings` ('SOP2', 'VOP3', 'VOP1_DPP16', 'VOP3P_MFMA', 'GLOBAL', 'VOP2_LIT', ...).

Everything is table driven: the opcode comes from the encoding's opcode set, fixed fields get their value,
operand fields are filled according to the opcode's operand kind and width in `emu.amd.isa` (register
numbers in range, register tuples aligned where the width needs it, inline constants and special
registers where the kind accepts them), modifier fields get values from the ranges their names define
(DPP controls, lane selects, cache bits, offsets, ...), and the _LIT variants select the literal in at
least one source field and carry a random 32-bit literal. Fields the opcode does not use stay at their
default (usually 0), as LLVM expects. The generated instructions are checked against LLVM's
disassembler (tests/test_strategies.py); the few opcodes LLVM 19 rejects are listed in _UNSUPPORTED.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from hypothesis import strategies as st

from emu.amd import isa

LITERAL = 255  # source-field value that selects the 32-bit literal after the instruction
VGPR_BASE = 256  # 9-bit source fields: 256 + n selects vN
INLINE = (*range(128, 209), *range(240, 249))  # integers 0..64, -1..-16, float constants 0.5 .. 1/(2*pi)
DPP16, DPP8, DPP8_FI, SDWA = 250, 233, 234, 249  # src0 values that announce the DPP / SDWA dword


@dataclass(frozen=True)
class _Regs:
    """Scalar register file of a family: SGPR count and the special registers a source may name."""
    sgprs: int
    vcc: int
    exec: int
    m0: int
    null: int | None
    vgpr_align64: bool  # VGPR tuples of 64 bits and more start at an even register (gfx90a+)


_REGS = {
    "rdna3": _Regs(106, 106, 126, 125, 124, False),
    "rdna4": _Regs(106, 106, 126, 125, 124, False),
    "cdna": _Regs(102, 106, 126, 124, None, True),
}

# Opcodes the vendor tables list that LLVM 19 does not decode: (family, space, name) -> reason.
_UNSUPPORTED: dict[tuple[str, str, str], str] = {}

# Literal-only opcodes carry an implicit constant (the K of FMAMK/FMAAK) instead of a source field.
_IMPLICIT_K = re.compile(r"_(MK|AK)_|(MK|AK)_[A-Z]\d+$")

# Source operand kinds -> what they accept: s = scalar registers, v = VGPRs, i = inline constants, l = literal.
_ACCEPTS = {
    "SRC": "svil", "SRC_NOLDS": "svil", "SRC_NOLIT": "svi", "SRC_SIMPLE": "svi", "SSRC": "sil",
    "SSRC_NOLIT": "si", "SSRC_LANESEL": "si", "SREG_M0_INL": "si", "SREG_LITERAL": "sl",
    "SRC_VGPR": "v", "VGPR": "v", "VGPR_OR_LDS": "v", "SRC_VGPR_OR_INLINE": "vi", "SRC_VGPR_OR_ACCVGPR": "v",
    "SRC_VGPR_OR_ACCVGPR_OR_CONST": "vi", "SRC_ACCVGPR": "v", "VGPR_OR_ACCVGPR": "v", "ACCVGPR": "v",
    "SREG": "S", "SDST": "s", "SDST_NULL": "s", "SREG_NOVCC": "S", "EXEC": "s", "SMEM_OFFSET": "S",
}

# DPP16 dpp_ctrl values per family: quad_perm, row_shl/shr/ror, then family-specific row operations.
_DPP_CTRL = {
    "rdna3": (*range(0x000, 0x100), *range(0x101, 0x110), *range(0x111, 0x120), *range(0x121, 0x130),
              0x140, 0x141, *range(0x150, 0x160), *range(0x160, 0x170)),
    "cdna": (*range(0x000, 0x100), *range(0x101, 0x110), *range(0x111, 0x120), *range(0x121, 0x130),
             0x130, 0x134, 0x138, 0x13C, 0x140, 0x141, 0x142, 0x143),
}
_DPP_CTRL["rdna4"] = _DPP_CTRL["rdna3"]

# Modifier / control fields whose every value is valid.
_FREE_BITS = re.compile(r"offset\d?|ioffset|glc|slc|dlc|sc0|sc1|nt|lane_sel_\d|row_mask|bank_mask|bc|fi|"
                        r"done|en|attr|attr_chan|wait_vdst|wait_va_vdst|wait_vm_vsrc|waitexp")


def _width(bits: int) -> int:
    """Registers an operand of `bits` bits occupies."""
    return max(1, (bits + 31) // 32)


@dataclass(frozen=True)
class _Enc:
    """Everything instructions() needs about one encoding, computed once."""
    enc: isa.Encoding
    ops: tuple[isa.Op, ...]
    literal_only: frozenset[int]  # opcodes whose literal is implicit (no source field selects it)


class _Gen:
    """Draws one instruction of one encoding for one family."""

    def __init__(self, fam: str, t: isa.ISA, e: _Enc):
        self.fam, self.t, self.e, self.regs = fam, t, e, _REGS[fam]

    # -- registers ----------------------------------------------------------------------------------------
    def sgpr(self, draw, n: int) -> int:
        align = 1 if n == 1 else 2 if n == 2 else 4
        return draw(st.integers(0, (self.regs.sgprs - n) // align)) * align

    def vgpr(self, draw, n: int) -> int:
        align = 2 if n > 1 and self.regs.vgpr_align64 else 1
        return draw(st.integers(0, (256 - n) // align)) * align

    def scalar(self, draw, n: int, accepts: str) -> int:
        """An SGPR (tuple) or, where `accepts` allows ('s'), a special register."""
        r = self.regs
        specials = [] if "S" in accepts else [x for x in (r.vcc, r.exec, r.null) if x is not None]
        if n == 1 and "S" not in accepts:
            specials.append(r.m0)
        if specials and draw(st.integers(0, 3)) == 0:
            return draw(st.sampled_from(specials))
        return self.sgpr(draw, n)

    def source(self, draw, operand: isa.Operand, field: isa.Field, literal: bool) -> int:
        """A value for a register/source field that the operand kind accepts."""
        accepts = _ACCEPTS.get(operand.kind, "")
        n = _width(operand.bits)
        if field.kind == "vgpr" or (field.kind in ("src",) and accepts == "v"):
            return self.vgpr(draw, n) + (VGPR_BASE if field.kind == "src" else 0)
        kinds = [k for k in "svi" if k in accepts.lower()]
        if field.kind != "src":
            kinds = [k for k in kinds if k != "v"]
        if literal and "l" in accepts:
            kinds.append("l")
        if not kinds:
            return field.value or 0
        k = draw(st.sampled_from(kinds))
        if k == "v":
            return VGPR_BASE + self.vgpr(draw, n)
        if k == "i":
            return draw(st.sampled_from(INLINE))
        if k == "l":
            return LITERAL
        return self.scalar(draw, n, accepts)

    # -- the instruction ----------------------------------------------------------------------------------
    def operand(self, op: isa.Op, name: str) -> isa.Operand | None:
        o = op.operands
        alias = {"src0": "vsrc0", "vsrc0": "src0", "src1": "vsrc1", "vsrc1": "src1"}
        return o.get(name) or o.get(alias.get(name, ""))

    def draw(self, draw) -> bytes:
        enc = self.e.enc
        op = draw(st.sampled_from(self.e.ops)) if self.e.ops else None
        variant = enc.variant
        lit = "LIT" in variant
        values: dict[str, int] = {}
        for f in enc.fields:
            if f.kind == "fixed":
                values[f.name] = f.value
            elif f.name == "op":
                values[f.name] = op.value
            elif f.name == "literal":
                values[f.name] = draw(st.integers(0, 2**32 - 1))
            else:
                values[f.name] = self.field(draw, op, f, lit)
        self.fixup(draw, op, values, lit)
        word = sum(v << f.lo for f in enc.fields if (v := values[f.name]))
        return word.to_bytes(enc.size, "little")

    def field(self, draw, op: isa.Op | None, f: isa.Field, lit: bool) -> int:
        operand = self.operand(op, f.name) if op else None
        if f.kind in ("vgpr", "src", "ssrc", "sgpr"):
            return self.source(draw, operand, f, lit) if operand else (f.value or 0)
        if f.kind == "sbase":
            return self.sgpr(draw, _width(operand.bits)) >> 1 if operand else 0
        if f.kind == "srsrc":
            return self.sgpr(draw, _width(operand.bits)) >> 2 if operand else 0
        if f.kind == "vdsty":
            return self.vgpr(draw, 1) >> 1 if operand else 0
        if f.name == "dpp":
            return draw(st.sampled_from(_DPP_CTRL[self.fam]))
        if f.name == "simm16":
            return draw(st.integers(0, 0xFFFF)) if operand else 0
        if _FREE_BITS.fullmatch(f.name):
            return draw(st.integers(0, (1 << f.width) - 1))
        return f.value or 0

    def fixup(self, draw, op: isa.Op | None, v: dict[str, int], lit: bool) -> None:
        """Cross-field rules: DPP/SDWA markers in src0, a literal-selecting source in _LIT variants."""
        variant = self.e.enc.variant
        if variant.startswith("DPP16"):
            v["src0"] = DPP16
        elif variant.startswith("DPP8"):
            v["src0"] = DPP8
        elif variant.startswith("SDWA"):
            v["src0"] = SDWA
        if lit and op is not None and op.value not in self.e.literal_only:
            fields = _literal_fields(self.e.enc, op, self)
            if fields and not any(v[f] == LITERAL for f in fields):
                v[draw(st.sampled_from(fields))] = LITERAL
        if "vdsty" in v and "vdstx" in v:
            pass


def _literal_fields(enc: isa.Encoding, op: isa.Op, g: _Gen) -> list[str]:
    """Source fields of `op` in `enc` that may select the literal."""
    out = []
    for f in enc.fields:
        if f.kind in ("src", "ssrc") and f.name != "vdst":
            o = g.operand(op, f.name)
            if o is not None and "l" in _ACCEPTS.get(o.kind, ""):
                out.append(f.name)
    return out


@functools.cache
def _plan(arch: str, name: str) -> _Enc:
    fam = isa.family(arch)
    t = isa.load(fam)
    enc = t.encodings.get(name)
    if enc is None:
        raise ValueError(f"{arch}: unknown encoding {name!r}; known: {', '.join(encodings(arch))}")
    ops = [o for o in t.ops_of(enc.space) if enc.ops is None or o.value in enc.ops] if enc.space else []
    ops = [o for o in ops if (fam, o.enc, o.name) not in _UNSUPPORTED]
    base = t.encodings.get(enc.base)
    literal_only = frozenset()
    if "LIT" in enc.variant and base is not None and base.ops is not None and enc.ops is not None:
        literal_only = frozenset(enc.ops - base.ops)
    e = _Enc(enc, tuple(ops), literal_only)
    if "LIT" in enc.variant:  # keep opcodes that can carry a literal at all
        g = _Gen(fam, t, e)
        ops = [o for o in ops if o.value in literal_only or _literal_fields(enc, o, g)]
        e = _Enc(enc, tuple(ops), literal_only)
    return e


def encodings(arch: str) -> list[str]:
    """Names of the encodings of `arch` that instructions() can produce."""
    t = isa.load(arch)
    return [n for n in t.encodings if _usable(arch, n)]


def _usable(arch: str, name: str) -> bool:
    e = _plan(arch, name)
    return bool(e.ops) or not e.enc.space


@functools.cache
def instructions(arch: str, encoding: str | None = None) -> st.SearchStrategy[bytes]:
    """One valid instruction of `arch` (little-endian bytes) in `encoding`, or in any supported encoding."""
    if encoding is None:
        return st.one_of([instructions(arch, n) for n in encodings(arch)])
    e = _plan(arch, encoding)
    if not _usable(arch, encoding):
        raise ValueError(f"{arch}: no opcodes of encoding {encoding!r} can be generated")
    g = _Gen(isa.family(arch), isa.load(arch), e)
    return st.composite(lambda draw: g.draw(draw))()


def programs(arch: str, max_size: int = 16) -> st.SearchStrategy[list[bytes]]:
    """A stream of 1..max_size valid instructions of `arch`, mixed encodings."""
    return st.lists(instructions(arch), min_size=1, max_size=max_size)
