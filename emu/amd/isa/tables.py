"""The ISA tables of one family, as emu.amd.isa converts the vendor data into them (and caches them), and the
instruction sets of the generations derived from them (emu.amd.isa.generations)."""
from __future__ import annotations

import functools
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Field:
    """One bit field of an encoding: bits hi..lo (inclusive) of the little-endian instruction."""
    name: str
    hi: int
    lo: int
    kind: str  # bits, fixed, enum, vgpr, sgpr, ssrc, src, sbase, srsrc, vdsty
    value: int | None = None  # the fixed value (kind 'fixed') or the default when the field is omitted

    @property
    def width(self) -> int:
        return self.hi - self.lo + 1

    def get(self, word: int) -> int:
        return (word >> self.lo) & ((1 << self.width) - 1)


@dataclass(frozen=True)
class Encoding:
    """An encoding format, e.g. VOP3 or its variant VOP3_DPP16 (base 'VOP3', variant 'DPP16')."""
    name: str
    base: str
    variant: str
    size: int  # bytes, the literal included
    fields: tuple[Field, ...]
    ops: frozenset[int] | None  # opcodes the op field admits; None when the table does not restrict them
    space: str  # the opcode space (Op.enc) of its op field: VOP3 for VOP3_DPP16, GLOBAL for GLOBAL; '' if none

    def field(self, name: str) -> Field | None:
        return next((f for f in self.fields if f.name == name), None)

    @property
    def fixed(self) -> tuple[Field, ...]:
        return tuple(f for f in self.fields if f.kind == "fixed")


@dataclass(frozen=True)
class Operand:
    """An operand of an opcode as the vendor tables type it: data format, width in bits, operand kind."""
    fmt: str  # e.g. NUM_F32, NUM_B64, RSRC_SCRATCH, ANY
    bits: int
    kind: str  # e.g. SRC, VGPR, SREG, SDST, SIMM16, WAITCNT


@dataclass(frozen=True)
class Op:
    """One opcode of one encoding (opcode space), e.g. VOP3 / V_ADD_F32 / 259."""
    enc: str  # the opcode space: the enum the op belongs to (VOP1, VOP3, SOPP, DS, GLOBAL, ...)
    name: str  # vendor name without the _E32/_E64 form suffix
    value: int
    operands: dict[str, Operand] = field(default_factory=dict)
    pcode: str | None = None


@dataclass
class ISA:
    family: str  # the vendor tables' name
    encodings: dict[str, Encoding]
    ops: dict[tuple[str, int], Op]
    enums: dict[str, dict[int, str]]  # other vendor enums (HWREG, MSG, ...): value -> name
    name: str = ""  # the instruction set's (its generation's, emu.amd.target.Generation.name); the family's: ''
    spellings: dict[str, str] = field(default_factory=dict)  # vendor name -> LLVM's mnemonic where it differs

    def __post_init__(self):
        self.name = self.name or self.family

    def op(self, enc: str, value: int) -> Op | None:
        return self.ops.get((enc, value))

    @functools.cached_property
    def by_name(self) -> dict[tuple[str, str], Op]:
        return {(o.enc, o.name): o for o in self.ops.values()}

    def ops_of(self, enc: str) -> list[Op]:
        return sorted((o for o in self.ops.values() if o.enc == enc), key=lambda o: o.value)
