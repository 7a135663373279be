"""Bit fields of hardware words, as the vendor headers give them: lowest bit, width and dword of a packet."""
from __future__ import annotations

from typing import NamedTuple


class Field(NamedTuple):
    """Bits [lo, lo+width) of dword `dw` of a packet (dw 0 for a register or a header)."""
    lo: int
    width: int = 1
    dw: int = 0

    @property
    def mask(self) -> int:
        return ((1 << self.width) - 1) << self.lo

    def get(self, word: int) -> int:
        return (word >> self.lo) & ((1 << self.width) - 1)

    def put(self, value: int) -> int:
        """`value` shifted into place; ValueError if it does not fit the field."""
        if not 0 <= value < 1 << self.width:
            raise ValueError(f"{value:#x} does not fit a {self.width}-bit field at bit {self.lo}")
        return value << self.lo


class Register:
    """A register or descriptor word with the named fields of its class's FIELDS (read as attributes)."""
    FIELDS: dict[str, Field] = {}
    __slots__ = ("value",)

    def __init__(self, value: int = 0) -> None:
        self.value = int(value)

    @classmethod
    def decode(cls, value: int) -> Register:
        return cls(value)

    def __getattr__(self, name: str) -> int:
        f = type(self).FIELDS.get(name)
        if f is None:
            raise AttributeError(f"{type(self).__name__} has no field {name!r}")
        return f.get(self.value)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.value == self.value

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.value))

    def __getstate__(self) -> int:
        return self.value

    def __setstate__(self, value: int) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.value:#x})"


_GEN_PREFIXES = ("gfx6_gfx11_", "gfx6_gfx8_", "gfx6_gfx9_", "gfx9_plus_", "gfx10_plus_", "gfx12_plus_", "gfx90a_",
                 "gfx10_gfx11_", "gfx11_", "gfx12_")


def register_class(name: str, fields: dict[str, tuple[int, int]], doc: str, module: str) -> type[Register]:
    """A Register subclass whose fields are the vendor's (lower-case, generation prefixes dropped: the chips that
    have a field are the ones whose code reads it; reserved bits left out)."""
    out: dict[str, Field] = {}
    for vname, (lo, width) in fields.items():
        short = next((vname[len(p):] for p in _GEN_PREFIXES if vname.startswith(p)), vname)
        if not short.startswith("reserved"):
            out.setdefault(short, Field(lo, width))
    return type(name, (Register,), {"FIELDS": out, "__doc__": doc, "__slots__": (), "__module__": module})
