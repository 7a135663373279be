"""AMD ISA description per family, converted once from the vendor tables.

The tables (encodings, operand kinds, pseudocode) are the autogen modules of the pinned tinygrad wheel,
extracted from AMD's machine-readable ISA XML and reference PDFs. They are read as *source text* with
`ast` (never imported), converted into the plain dataclasses below and cached on disk; afterwards
loading an ISA touches neither tinygrad nor its files.
"""
from __future__ import annotations

import functools
import os
import pickle
from dataclasses import dataclass, field
from pathlib import Path

FAMILIES = ("rdna3", "rdna4", "cdna")
ARCHES = {
    **{a: "rdna3" for a in ("gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151")},
    **{a: "rdna4" for a in ("gfx1200", "gfx1201")},
    **{a: "cdna" for a in ("gfx942", "gfx950")},
}
WAVE_SIZE = {"rdna3": 32, "rdna4": 32, "cdna": 64}  # default wave size per family
SCHEMA = 1  # bump when the cached representation changes


class UnknownArch(ValueError):
    pass


def family(arch: str) -> str:
    """Family name ('rdna3', 'rdna4', 'cdna') for a gfx name or a family name."""
    a = arch.lower()
    if a in FAMILIES:
        return a
    if a in ARCHES:
        return ARCHES[a]
    raise UnknownArch(f"unknown arch {arch!r}; known: {', '.join([*ARCHES, *FAMILIES])}")


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
    family: str
    encodings: dict[str, Encoding]
    ops: dict[tuple[str, int], Op]
    enums: dict[str, dict[int, str]]  # other vendor enums (HWREG, MSG, ...): value -> name

    def op(self, enc: str, value: int) -> Op | None:
        return self.ops.get((enc, value))

    @functools.cached_property
    def by_name(self) -> dict[tuple[str, str], Op]:
        return {(o.enc, o.name): o for o in self.ops.values()}

    def ops_of(self, enc: str) -> list[Op]:
        return sorted((o for o in self.ops.values() if o.enc == enc), key=lambda o: o.value)


def _cache_dir() -> Path:
    base = os.environ.get("HWEMU_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hwemu")
    return Path(base)


def _cache_path(fam: str) -> Path:
    from importlib.metadata import version  # cheap: reads dist-info, does not import tinygrad
    return _cache_dir() / f"isa-{fam}-tinygrad{version('tinygrad')}-v{SCHEMA}.pickle"


@functools.cache
def load(arch: str) -> ISA:
    """The ISA of a family or gfx arch; converted from the vendor tables on first use, then cached."""
    fam = family(arch)
    path = _cache_path(fam)
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError):
        pass
    from emu.amd.isa.vendor import convert
    isa = convert(fam)
    try:  # atomic publish: concurrent processes may convert at once
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        with open(tmp, "wb") as f:
            pickle.dump(isa, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except OSError:
        pass  # an unwritable cache only costs the conversion next time
    return isa
