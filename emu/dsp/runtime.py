"""What the generated Python semantics call: C integer wrap-around and the stateless integer primitives of
library.PRIMITIVES (bit counting, 128-bit arithmetic, convergent rounding); floats are in emu.dsp.ieee.

Integer values are Python ints held in their type's range; vectors are numpy uint8 arrays.
"""
from __future__ import annotations

import numpy as np


def _wrap(bits: int, signed: bool):
    mask, half = (1 << bits) - 1, 1 << (bits - 1)
    if signed:
        return lambda x: ((x + half) & mask) - half
    return lambda x: x & mask


s8, u8, s16, u16, s32, u32, s64, u64, s128, u128 = (
    _wrap(b, s) for b in (8, 16, 32, 64, 128) for s in (True, False))


def cdiv(a: int, b: int) -> int:
    """C division: truncates toward zero; x/0 is undefined in C (the hardware has no integer divide): 0."""
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def cmod(a: int, b: int) -> int:
    return a - b * cdiv(a, b) if b else a


def shl(x: int, n: int, bits: int) -> int:
    """x << n for a shift count C leaves undefined (negative or >= the width): x86 masks the count."""
    return x << (n & (bits - 1))


def shr(x: int, n: int, bits: int) -> int:
    return x >> (n & (bits - 1))


# ---- bits ----
def _count_leading_ones(bits: int):
    return lambda x: bits - (~x & ((1 << bits) - 1)).bit_length()


count_leading_ones_2, count_leading_ones_4, count_leading_ones_8 = (_count_leading_ones(b) for b in (16, 32, 64))
fCL1_2, fCL1_4, fCL1_8 = count_leading_ones_2, count_leading_ones_4, count_leading_ones_8


def _count_ones(bits: int):
    return lambda x: (x & ((1 << bits) - 1)).bit_count()


count_ones_2, count_ones_4, count_ones_8 = (_count_ones(b) for b in (16, 32, 64))
fCOUNTONES_2, fCOUNTONES_4, fCOUNTONES_8 = count_ones_2, count_ones_4, count_ones_8


def _reverse(bits: int):
    return lambda x: int(format(x & ((1 << bits) - 1), f"0{bits}b")[::-1], 2)


reverse_bits_4, reverse_bits_8 = _reverse(32), _reverse(64)
fBREV_4, fBREV_8 = reverse_bits_4, reverse_bits_8
_brev16 = _reverse(16)


def fbrev(x: int) -> int:
    """Bit-reversed addressing: the low 16 bits of the address reversed."""
    return (x & 0xFFFF0000) | _brev16(x)


def fINTERLEAVE(odd: int, even: int) -> int:
    out = 0
    for i in range(32):
        out |= ((even >> i) & 1) << (2 * i) | ((odd >> i) & 1) << (2 * i + 1)
    return out


def fDEINTERLEAVE(mixed: int) -> int:
    even = odd = 0
    for i in range(32):
        even |= ((mixed >> (2 * i)) & 1) << i
        odd |= ((mixed >> (2 * i + 1)) & 1) << i
    return odd << 32 | even


def fCARRY_FROM_ADD(a: int, b: int, c: int) -> int:
    return ((a & 0xFFFFFFFFFFFFFFFF) + (b & 0xFFFFFFFFFFFFFFFF) + c) >> 64 & 1


def fADD128(a: int, b: int) -> int:
    return s128(a + b)


def fSUB128(a: int, b: int) -> int:
    return s128(a - b)


def fAND128(a: int, b: int) -> int:
    return a & b


def fSHIFTL128(a: int, n: int) -> int:
    return s128(a << n)


def fSHIFTR128(a: int, n: int) -> int:
    return a >> n


def fCAST8S_16S(a: int) -> int:
    return a


def fCAST16S_8S(a: int) -> int:
    return s64(a)


def fNOTQ(q: np.ndarray) -> np.ndarray:
    return ~q


def fCRNDN(a: int, n: int) -> int:
    """Convergent rounding of a at bit n, shifted down: ties (exactly half) go to the even result."""
    if n == 0:
        return a
    below = a & ((1 << (n - 1)) - 1)
    inc = ((a >> n) & 1) << (n - 1) if below == 0 else 1 << (n - 1)
    return s32((a + inc) >> n)
