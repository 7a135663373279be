"""Operand access for the wave executor: scalar/vector source fetchers and destination writers.

Each builder runs once per instruction (plan time) and returns a small closure taking the `WaveState`; the
closures do no decoding. Scalar operand codes are emu.amd.regs's. VCC, EXEC, M0 and SCC are read and written as
Python ints through the state, the other scalar registers in `state.sgpr` indexed by their code.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from emu.amd import target
from emu.amd.memspace import PRIVATE_APERTURE, SHARED_APERTURE
from emu.amd.regs import (
    EXEC,
    EXECZ,
    LITERAL,
    PRIVATE_BASE,
    PRIVATE_LIMIT,
    SCC,
    SHARED_BASE,
    SHARED_LIMIT,
    VCC,
    VCCZ,
    storage,
)

U64 = np.uint64

_F32 = {240: 0x3F000000, 241: 0xBF000000, 242: 0x3F800000, 243: 0xBF800000, 244: 0x40000000, 245: 0xC0000000,
        246: 0x40800000, 247: 0xC0800000, 248: 0x3E22F983}
_F16 = {240: 0x3800, 241: 0xB800, 242: 0x3C00, 243: 0xBC00, 244: 0x4000, 245: 0xC000, 246: 0x4400, 247: 0xC400,
        248: 0x3118}
# bf16 operands take the float constants as bf16 (LLVM 19 encodes a bf16 literal 0x3f80 as the inline constant 1.0)
_BF16 = {240: 0x3F00, 241: 0xBF00, 242: 0x3F80, 243: 0xBF80, 244: 0x4000, 245: 0xC000, 246: 0x4080, 247: 0xC080,
         248: 0x3E22}
_F64 = {240: 0x3FE0000000000000, 241: 0xBFE0000000000000, 242: 0x3FF0000000000000, 243: 0xBFF0000000000000,
        244: 0x4000000000000000, 245: 0xC000000000000000, 246: 0x4010000000000000, 247: 0xC010000000000000,
        248: 0x3FC45F306DC9C882}


class OperandError(ValueError):
    """An operand code the instruction may not use (becomes an illegal-instruction fault)."""


class Unsupported(Exception):
    """An instruction the emulator cannot execute (no compiled semantics, or state it does not model)."""


def sext(v: int, bits: int) -> int:
    return v - (1 << bits) if v >> (bits - 1) & 1 else v


def is_float(fmt: str) -> bool:
    return "F16" in fmt or "F32" in fmt or "F64" in fmt or "BF16" in fmt


def constant(code: int, bits: int, fmt: str, literal: int | None) -> int | None:
    """The value of a constant operand code for an operand of `bits` and format `fmt`; None if not a constant."""
    mask = (1 << bits) - 1
    if 128 <= code <= 192:
        return code - 128
    if 193 <= code <= 208:
        return (192 - code) & mask
    if code in _F32:
        if bits == 64:
            return _F64[code] if "F64" in fmt or "F" not in fmt.replace("NUM_", "") else _F32[code]
        if "BF16" in fmt:
            return _BF16[code]
        if bits == 16 or "F16" in fmt:
            return _F16[code]
        return _F32[code]
    if code == LITERAL:
        if literal is None:
            raise OperandError("literal operand without a literal")
        return literal << 32 if bits == 64 and "F64" in fmt else literal
    return None


def m0_null(fam: str) -> tuple[int, int | None]:
    """The operand codes of M0 and NULL in a family."""
    g = target.generation(fam)
    return g.m0, g.null


_SPECIAL_READS = frozenset({VCC, VCC + 1, EXEC, EXEC + 1, VCCZ, EXECZ, SCC, SHARED_BASE, SHARED_LIMIT, PRIVATE_BASE,
                            PRIVATE_LIMIT})  # with M0 and NULL: the scalar codes a source reads that are no register


def source_register(code: int, n: int, fam: str) -> bool:
    """Whether a scalar source code names plain registers (n of them: True) or other state (False); OperandError
    when it names nothing a source may read."""
    if storage(code):
        if not storage(code, n):
            raise OperandError(f"scalar register {code}+{n} out of range")
        return True
    if code not in _SPECIAL_READS and code not in m0_null(fam):
        raise OperandError(f"scalar operand code {code} is not supported")
    return False


def dest_register(code: int, fam: str) -> bool:
    """Whether a scalar destination code names a plain register (True) or other state (False); OperandError when
    it names nothing an instruction may write."""
    if storage(code):
        return True
    if code not in (*m0_null(fam), VCC, VCC + 1, EXEC, EXEC + 1):
        raise OperandError(f"scalar destination code {code} is not supported")
    return False


def scalar_reader(code: int, bits: int, fmt: str = "", literal: int | None = None, fam: str = "rdna3") -> Callable:
    """Fetcher of a scalar operand as a Python int of `bits` (32 or 64; 16 reads the low half)."""
    M0, NULL = m0_null(fam)
    c = constant(code, bits, fmt, literal)
    if c is not None:
        return lambda w, c=c: c
    if source_register(code, 2 if bits == 64 else 1, fam):
        if bits != 64:
            return lambda w: int(w.sgpr[code])
        return lambda w: int(w.sgpr[code]) | int(w.sgpr[code + 1]) << 32
    f = {VCC: lambda w: w.vcc, VCC + 1: lambda w: w.vcc >> 32, EXEC: lambda w: w.exec,
         EXEC + 1: lambda w: w.exec >> 32, M0: lambda w: w.m0, NULL: lambda w: 0,
         VCCZ: lambda w: int((w.vcc & w.full) == 0), EXECZ: lambda w: int(w.exec == 0), SCC: lambda w: w.scc,
         SHARED_BASE: lambda w: SHARED_APERTURE >> 32, SHARED_LIMIT: lambda w: (SHARED_APERTURE >> 32),
         PRIVATE_BASE: lambda w: PRIVATE_APERTURE >> 32, PRIVATE_LIMIT: lambda w: PRIVATE_APERTURE >> 32}[code]
    if code in (SHARED_BASE, PRIVATE_BASE) and bits == 64:  # src_*_base as a 64-bit operand: the aperture base
        base = SHARED_APERTURE if code == SHARED_BASE else PRIVATE_APERTURE
        return lambda w: base
    if code in (VCC, EXEC) and bits == 32:
        return lambda w: f(w) & 0xFFFFFFFF
    if code in (VCC, EXEC) or bits == 32 or code in (VCCZ, EXECZ, SCC, NULL):
        return f
    return lambda w: f(w) | 0  # M0 etc. as 64-bit: high half 0


def scalar_writer(code: int, bits: int, fam: str = "rdna3") -> Callable:
    """Writer of a scalar destination (`bits` 32 or 64) taking (state, int)."""
    M0, NULL = m0_null(fam)
    if dest_register(code, fam):
        if bits == 64:
            def w64(w, v):
                w.sgpr[code] = v & 0xFFFFFFFF
                w.sgpr[code + 1] = (v >> 32) & 0xFFFFFFFF
            return w64

        def w32(w, v):
            w.sgpr[code] = v & 0xFFFFFFFF
        return w32
    if code == NULL:
        return lambda w, v: None
    if code == M0:
        def wm0(w, v):
            w.m0 = v & 0xFFFFFFFF
        return wm0
    if code in (VCC, VCC + 1):
        return _mask_writer("vcc", code - VCC, bits)
    return _mask_writer("exec", code - EXEC, bits)


def _mask_writer(attr: str, half: int, bits: int) -> Callable:
    if bits == 64:
        if attr == "exec":
            return lambda w, v: w.set_exec(v & 0xFFFFFFFFFFFFFFFF)
        return lambda w, v: setattr(w, attr, v & 0xFFFFFFFFFFFFFFFF)
    shift = 32 * half
    keep = 0xFFFFFFFF << (32 - shift)

    def wr(w, v):
        new = (getattr(w, attr) & keep) | ((v & 0xFFFFFFFF) << shift)
        w.set_exec(new) if attr == "exec" else setattr(w, attr, new)
    return wr


def vgpr_reader(reg: int, bits: int, hi: bool = False) -> Callable:
    """Per-lane uint64 values of VGPR `reg` (`bits` 16/32/64; `hi` takes bits 31:16 for 16-bit operands); wider
    operands (v_mqsad_u32_u8's 128 bits) as the pcode takes them: (dwords, lanes), row 0 least significant."""
    if bits > 64:
        rows = slice(reg, reg + -(-bits // 32))
        return lambda w: w.vgpr[rows].astype(U64)
    if bits <= 16:
        if hi:
            return lambda w: (w.vgpr[reg] >> 16).astype(U64)
        return lambda w: (w.vgpr[reg] & 0xFFFF).astype(U64)
    if bits <= 32:
        return lambda w: w.vgpr[reg].astype(U64)
    return lambda w: w.vgpr[reg].astype(U64) | (w.vgpr[reg + 1].astype(U64) << U64(32))


def vector_reader(code: int, bits: int, fmt: str, literal: int | None, hi: bool = False,
                  fam: str = "rdna3") -> Callable:
    """Fetcher of a 9-bit VALU source as per-lane uint64 values."""
    if code >= 256:
        return vgpr_reader(code - 256, bits, hi)
    s = scalar_reader(code, 64 if bits == 64 else 32, fmt, literal, fam)
    c = constant(code, bits, fmt, literal)
    if bits <= 16 and c is None:
        return lambda w: np.full(w.lanes, (s(w) >> (16 if hi else 0)) & 0xFFFF, U64)
    if c is not None:
        if bits <= 16 and hi:
            c >>= 16
        return lambda w, c=c: np.full(w.lanes, c, U64)
    return lambda w: np.full(w.lanes, s(w), U64)


def vgpr_writer(reg: int, bits: int, hi: bool = False, zero_hi16: bool = False) -> Callable:
    """Writer of a VGPR destination taking (state, uint64 values, bool active lanes); values of a destination wider
    than 64 bits are (dwords, lanes), one register each."""
    if bits > 64:
        rows = slice(reg, reg + -(-bits // 32))
        return lambda w, v, act: np.copyto(w.vgpr[rows], v, where=act, casting="unsafe")
    if bits <= 16:
        shift, keep = (16, 0x0000FFFF) if hi else (0, 0 if zero_hi16 else 0xFFFF0000)

        def w16(w, v, act):
            row = w.vgpr[reg]
            new = (row & np.uint32(keep)) | ((v.astype(np.uint32) & np.uint32(0xFFFF)) << np.uint32(shift))
            np.copyto(row, new, where=act)
        return w16
    if bits <= 32:
        return lambda w, v, act: np.copyto(w.vgpr[reg], v, where=act, casting="unsafe")

    def w64(w, v, act):
        np.copyto(w.vgpr[reg], v, where=act, casting="unsafe")
        np.copyto(w.vgpr[reg + 1], v >> U64(32), where=act, casting="unsafe")
    return w64


class RegisterFileView:
    """A register file as the pcode indexes it (st['VGPR'] [lane, reg], st['SGPR'] [reg]) under the manuals' rule
    for registers out of range (RDNA3.5 ISA 7.2.7, CDNA3 ISA 3.6.1): a source past the last register reads register
    0, a destination past it is not written. Reads come from `seen` (default: the file itself), writes go to
    `regs`; every 32-bit register index is accepted (`shape`), so a relative index never raises."""

    def __init__(self, regs: np.ndarray, seen: np.ndarray | None = None):
        self.regs = regs
        self.seen = regs if seen is None else seen
        self.shape = (*regs.shape[:-1], 1 << 32)

    def __getitem__(self, i: tuple):
        reg, n = np.asarray(i[-1]), self.seen.shape[-1]
        if np.any(reg >= n):
            i = (*i[:-1], np.where(reg < n, reg, 0))
        return self.seen[i]

    def __setitem__(self, i: tuple, v) -> None:
        reg, n = np.asarray(i[-1]), self.regs.shape[-1]
        if not np.any(reg >= n):
            self.regs[i] = v
            return
        *rest, reg, v = np.broadcast_arrays(*i[:-1], reg, v)
        ok = reg < n
        self.regs[(*(r[ok] for r in rest), reg[ok])] = v[ok]


def sign_bit(bits: int) -> int:
    return 1 << (min(bits, 64) - 1)


def modifier(bits: int, abs_: bool, neg: bool) -> Callable | None:
    """abs/neg input modifiers on raw float bits."""
    if not (abs_ or neg):
        return None
    s = U64(sign_bit(bits))
    if abs_ and neg:
        return lambda v: v | s
    if abs_:
        return lambda v: v & ~s
    return lambda v: v ^ s


def mask_to_lanes(mask: int, lanes: int) -> np.ndarray:
    """Read-only bool array of the bits of `mask` (lane order); cached, masks repeat."""
    mask = int(mask)  # numpy integers come too
    r = _LANES.get((mask, lanes))
    if r is None:
        raw = np.frombuffer(mask.to_bytes(8, "little"), np.uint8)
        r = np.unpackbits(raw, bitorder="little")[:lanes].astype(bool)
        r.flags.writeable = False
        if len(_LANES) < 4096:
            _LANES[(mask, lanes)] = r
    return r


_LANES: dict[tuple[int, int], np.ndarray] = {}


def lanes_to_mask(bits: np.ndarray) -> int:
    """Int whose bit i is lane i's truth value."""
    return int.from_bytes(np.packbits(np.asarray(bits, bool), bitorder="little").tobytes(), "little")


def to_mask(v) -> int:
    """A wave mask from a mask int or from per-lane values (lane i's bit set where nonzero)."""
    return lanes_to_mask(v != 0) if isinstance(v, np.ndarray) else int(v)


def as_int(v) -> int:
    """A scalar result given as an int or as per-lane values (lane 0's)."""
    return int(v[0]) if isinstance(v, np.ndarray) else int(v)
