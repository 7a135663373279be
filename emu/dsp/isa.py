"""The Hexagon instruction table, converted once from the vendor definitions and cached.

Each instruction has its tag (A2_add), its syntax ("Rd32=add(Rs32,Rt32)"), attributes, semantics text (C-like
statements over the macros of macros.def) and encoding: a bit pattern, most significant bit first, where 0/1
are fixed bits, '-' don't-care, 'P' the parse bits and letters the operand fields (d -> Rd, i/I -> the first
and second immediate). Sub-instructions (the halves of a duplex) have 13-bit patterns and a class (SUBINSN_L1...).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from emu.cache import pickled
from emu.dsp import cpp
from emu.dsp.vendor import QEMU_VERSION, cache_root, imported_dir

SCHEMA = 2  # bump when the cached representation changes
_TABLE_MACROS = ("DEF_ENC32", "DEF_ENC_SUBINSN", "DEF_EXT_ENC", "DEF_PACKED32", "DEF_CLASS32", "DEF_FIELD32",
                 "DEF_ANTICLASS32", "DEF_EXT_SPACE", "LEGACY_DEF_ENC32", "DEF_FIELDROW_DESC32")


@dataclass(frozen=True, slots=True)
class Insn:
    tag: str
    syntax: str
    attribs: frozenset[str]
    semantics: str
    encoding: str | None  # 32 (or 13 for a sub-instruction) pattern characters, msb first; None: not encodable
    subclass: str | None = None  # SUBINSN_L1 ... for duplex halves

    @property
    def hvx(self) -> bool:
        return "A_CVI" in self.attribs


@dataclass(frozen=True, slots=True)
class Duplex:
    """A duplex word: its pattern, the class of the low half (bits 12:0, slot 0) and of the high half (28:16)."""
    name: str
    low: str
    high: str
    encoding: str


@dataclass(frozen=True, slots=True)
class Macro:
    name: str
    body: str
    attribs: frozenset[str]


@dataclass(frozen=True)
class ISA:
    insns: dict[str, Insn]
    duplexes: tuple[Duplex, ...]
    macros: dict[str, Macro]
    ext_spaces: dict[str, str]  # name -> the pattern of a region of the encoding space owned by HVX


def _pattern(toks: list[cpp.Tok], bits: int) -> str:
    s = "".join(cpp.string(toks).split())
    if len(s) != bits:
        raise ValueError(f"encoding {s!r}: {len(s)} bits, expected {bits}")
    return s


def _attribs(toks: list[cpp.Tok]) -> frozenset[str]:
    return frozenset(t.text for t in toks if t.kind == "id" and t.text != "ATTRIBS")


def convert(root: Path) -> ISA:
    pre = cpp.Preprocessor(root, {n: n for n in _TABLE_MACROS})
    enc: dict[str, tuple[str, str | None]] = {}
    duplexes: list[Duplex] = []
    spaces: dict[str, str] = {}
    for name, a in cpp.calls(pre.run("encode.def"), set(_TABLE_MACROS)):
        if name == "DEF_ENC32":
            enc[cpp.spell(a[0])] = (_pattern(a[1], 32), None)
        elif name == "DEF_EXT_ENC":
            enc[cpp.spell(a[0])] = (_pattern(a[2], 32), None)
        elif name == "DEF_ENC_SUBINSN":
            enc[cpp.spell(a[0])] = (_pattern(a[2], 13), cpp.spell(a[1]))
        elif name == "DEF_PACKED32":
            duplexes.append(Duplex(cpp.spell(a[0]), cpp.spell(a[1]), cpp.spell(a[2]), _pattern(a[3], 32)))
        elif name == "DEF_EXT_SPACE":
            spaces[cpp.spell(a[0])] = _pattern(a[1], 32)
    insns: dict[str, Insn] = {}
    for _, a in cpp.calls(cpp.Preprocessor(root).run("allidefs.def"), {"Q6INSN", "EXTINSN"}):
        tag = cpp.spell(a[0])
        pattern, sub = enc.get(tag, (None, None))
        insns[tag] = Insn(tag, cpp.string(a[1]), _attribs(a[2]), cpp.spell(a[4]), pattern, sub)
    macros: dict[str, Macro] = {}
    for file in ("macros.def", "mmvec/macros.def"):
        for _, a in cpp.calls(cpp.Preprocessor(root).run(file), {"DEF_MACRO"}):
            name = cpp.spell(a[0])
            macros[name] = Macro(name, cpp.spell(a[1]), _attribs(a[-1]) if len(a) > 2 else frozenset())
    return ISA(insns, tuple(duplexes), macros, spaces)


def _cache_path() -> Path:
    return cache_root() / f"isa-qemu{QEMU_VERSION}-v{SCHEMA}.pickle"


@functools.cache
def load() -> ISA:
    """The instruction table; converted from the vendor definitions on first use, then cached."""
    return pickled(_cache_path(), lambda: convert(imported_dir()))
