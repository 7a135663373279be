"""Natural-width values of the lean numpy backend (emu.pcode.npback): which integers it holds at natural width and
in what storage, wave masks to and from per-lane bits (lane_bits, pack_lanes: the generated code's LB and PK), and
Decline, raised where it has no natural-width form."""
from __future__ import annotations

import numpy as np

from emu.pcode.ir import Ty


class Decline(Exception):
    """The function (or a construct in it) has no natural-width form here."""


def ones(bits: int) -> int:
    """The mask of the `bits` low bits."""
    return (1 << bits) - 1


_BITS: dict[tuple[int, int], np.ndarray] = {}


def lane_bits(mask: int, lanes: int) -> np.ndarray:
    """Bits 0..lanes-1 of a wave mask (< 2**64) as a read-only uint32 array of 0/1; cached, masks repeat."""
    r = _BITS.get((mask, lanes))
    if r is None:
        r = np.unpackbits(np.frombuffer(mask.to_bytes(8, "little"), np.uint8), bitorder="little")[:lanes]
        r = r.astype(np.uint32)
        r.flags.writeable = False
        if len(_BITS) < 4096:
            _BITS[(mask, lanes)] = r
    return r


_POW = {n: np.left_shift(np.uint64(1), np.arange(n, dtype=np.uint64)) for n in (32, 64)}  # lane i -> 2**i


def pack_lanes(b: np.ndarray, lanes: int) -> int:
    """A wave mask from bools over 32 or 64 lanes (bit i = lane i; a scalar stands for every lane); bool arrays'
    masks are cached by their bytes, masks repeat."""
    if b.size != lanes:
        return (1 << lanes) - 1 if b else 0
    if b.dtype is not _BOOL:
        return int(_POW[lanes].dot(b))
    key = b.tobytes()
    m = _PACKED.get(key)
    if m is None:
        m = int(_POW[lanes].dot(b))
        if len(_PACKED) < 4096:
            _PACKED[key] = m
    return m


_BOOL = np.dtype(bool)
_PACKED: dict[bytes, int] = {}  # a bool array's bytes (32 or 64 of them) -> its mask


def is_nat(t: Ty) -> bool:
    """An integer type held at natural width (up to 64 bits)."""
    return t.kind in ("u", "i") and t.bits <= 64


def nat_bits(t: Ty) -> int:
    """Storage bits of a natural integer: 32 or 64."""
    return 32 if t.bits <= 32 else 64


def wider(t: Ty) -> bool:
    """An integer type of 65..128 bits (held as a pair of uint64 halves)."""
    return t.kind in ("u", "i") and 64 < t.bits <= 128


def utype(t: Ty) -> str:
    """The code of a natural integer's storage type (U32 / U64, names the caller binds)."""
    return "U32" if nat_bits(t) == 32 else "U64"
