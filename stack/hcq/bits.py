"""Bit fields of hardware words: a register's or a packet dword's field by its lowest bit and width."""
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


def lo32(v: int) -> int:
    return v & 0xFFFFFFFF


def hi32(v: int) -> int:
    return (v >> 32) & 0xFFFFFFFF
