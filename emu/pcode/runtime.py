"""numpy helpers called by the code the reference backend generates (emu.pcode.pyback).

Value representation: integers of <= 64 bits are raw bits, either non-negative Python ints (uniform values) or
numpy uint64 arrays over lanes; wider integers are Python ints or object arrays of them. Floats are numpy float16 /
float32 / float64 arrays or scalars (bfloat16 values are held exactly in float32). Booleans are Python or numpy
bools. Predicates (masks) are True or numpy bool arrays over lanes.
"""
from __future__ import annotations

import numpy as np

U64 = np.uint64


def _m(bits: int) -> int:
    return (1 << bits) - 1


def arr(x):
    """x as a uint64 array (Python ints and 0-d arrays included)."""
    return np.asarray(x, dtype=U64)


# ---- predication -------------------------------------------------------------------------------------------------

def land(a, b):
    if a is True:
        return b
    if b is True:
        return a
    return np.logical_and(a, b)


def lnot(a):
    return np.logical_not(a)


def any_(m) -> bool:
    if type(m) is np.ndarray:
        return bool(m.any())
    return bool(m)


def sel(c, a, b):
    """c ? a : b, lane-wise."""
    if isinstance(c, bool | np.bool_) or np.ndim(c) == 0:
        return a if c else b
    r = np.where(c, a, b)
    return r.astype(U64) if r.dtype == np.int64 else r


def uniform(x) -> int:
    """A loop bound or index that must be the same in every lane, as a Python int."""
    if isinstance(x, int):
        return x
    a = np.asarray(x)
    if a.ndim and a.size > 1 and np.any(a != a.flat[0]):
        raise ValueError("loop bound differs between lanes")
    return int(a.flat[0]) if a.ndim else int(a)


# ---- integers ----------------------------------------------------------------------------------------------------

def sx(x, bits: int):
    """Raw bits -> signed value (int64 array or Python int)."""
    if isinstance(x, int):
        return x - (1 << bits) if x >> (bits - 1) & 1 else x
    a = arr(x)
    if bits == 64:
        return a.view(np.int64)
    sh = U64(64 - bits)
    return (a << sh).view(np.int64) >> np.int64(64 - bits)


def sext(x, frm: int, to: int):
    """Sign-extend raw bits from width frm to width to."""
    if isinstance(x, int):
        return sx(x, frm) & _m(to)
    if to > 64:
        return _wide(x, frm, True) & _m(to)
    return sx(x, frm).view(U64) & U64(_m(to)) if to < 64 else sx(x, frm).view(U64)


def _wide(x, bits: int, signed: bool):
    if isinstance(x, int):
        return sx(x, bits) if signed else x
    a = np.asarray(x)
    if a.dtype == object:
        return np.array([sx(int(v), bits) if signed else int(v) for v in a.flat], dtype=object).reshape(a.shape)
    return np.array([int(v) for v in (sx(a, bits) if signed else a).flat], dtype=object).reshape(a.shape)


def _objs(s):
    """A shift amount usable with Python ints."""
    return s if isinstance(s, int) else np.asarray(s).astype(object)


def wresize(x, frm: int, signed: bool, to: int):
    """Resize involving more than 64 bits."""
    v = _wide(x, frm, signed)
    if to > 64:
        return v & _m(to) if isinstance(v, int) else np.bitwise_and(v, _m(to))
    if isinstance(v, int):
        return v & _m(to)
    return np.array([int(e) & _m(to) for e in v.flat], dtype=U64).reshape(v.shape)


def shl(x, s, bits: int):
    if isinstance(x, int) and isinstance(s, int):
        return (x << s) & _m(bits) if s < bits else 0
    if bits > 64:  # a shift past the width gives 0 (without building the huge intermediate)
        s = _objs(s)
        return _wide(x, bits, False) << (np.minimum(s, bits) if isinstance(s, np.ndarray) else min(s, bits)) & _m(bits)
    s = arr(s)
    r = arr(x) << np.minimum(s, U64(63))
    r = np.where(s >= bits, U64(0), r)
    return r & U64(_m(bits)) if bits < 64 else r


def shr(x, s, bits: int, signed: bool):
    if isinstance(x, int) and isinstance(s, int):
        v = sx(x, bits) if signed else x
        return (v >> min(s, bits)) & _m(bits)
    if bits > 64:
        return (_wide(x, bits, signed) >> _objs(s)) & _m(bits)
    s = np.minimum(arr(s), U64(63))
    if signed:
        r = (sx(x, bits) >> s.astype(np.int64)).view(U64)
        return r & U64(_m(bits)) if bits < 64 else r
    r = arr(x) >> s
    return np.where(s >= bits, U64(0), r) if bits == 64 else r


def idiv(a, b, bits: int, signed: bool, mod: bool = False):
    """Integer division truncating toward zero; x / 0 gives all ones (quotient) or x (remainder)."""
    if isinstance(a, int) and isinstance(b, int):
        x, y = (sx(a, bits), sx(b, bits)) if signed else (a, b)
        if y == 0:
            return a if mod else _m(bits)
        q = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
        return (x - q * y if mod else q) & _m(bits)
    x, y = (sx(a, bits), sx(b, bits)) if signed else (arr(a), arr(b))
    x, y = np.broadcast_arrays(x, y)
    safe = np.where(y == 0, 1, y)
    if signed:
        q = np.abs(x) // np.abs(safe) * np.where((x < 0) == (safe < 0), 1, -1)
        r = (x - q * safe) if mod else q
        r = np.where(y == 0, x if mod else -1, r).view(U64)
    else:
        r = x % safe if mod else x // safe
        r = np.where(y == 0, x if mod else U64(_m(bits)), r)
    return r & U64(_m(bits)) if bits < 64 else r


def ext(x, lo, width: int):
    """Bits lo .. lo+width-1 of x."""
    if isinstance(x, int) and isinstance(lo, int):
        return (x >> lo) & _m(width)
    a = np.asarray(x)
    if a.dtype == object:
        r = (a >> lo) & _m(width)
        return r.astype(U64) if width <= 64 else r
    lo = arr(lo)
    r = (arr(x) >> np.minimum(lo, U64(63))) & U64(_m(width))
    return np.where(lo >= 64, U64(0), r)


def setbits(x, lo, width: int, v, m, bits: int):
    """x with bits lo .. lo+width-1 replaced by v, in the lanes of m."""
    fm = _m(width)
    if bits > 64 or (isinstance(x, int) and isinstance(lo, int) and isinstance(v, int)):
        x, v = _wide(x, bits, False), _wide(v, width, False)
        r = (x & ~(fm << lo) | (v & fm) << lo) & _m(bits)
    else:
        lo = arr(lo)
        f = np.where(lo >= 64, U64(0), U64(fm) << np.minimum(lo, U64(63)))
        r = (arr(x) & ~f) | ((arr(v) << np.minimum(lo, U64(63))) & f)
    return r if m is True else sel(m, r, x)


def cat(*parts):
    """Concatenation of (value, width) pairs, most significant first."""
    total = sum(w for _, w in parts)
    if total > 64 or all(isinstance(v, int) for v, _ in parts):
        r, sh = 0, 0
        for v, w in reversed(parts):
            r = r + (_wide(v, w, False) << sh)
            sh += w
        return r
    r, sh = U64(0), 0
    for v, w in reversed(parts):
        r = r | (arr(v) << U64(sh))
        sh += w
    return r


def b2i(x):
    return int(x) if isinstance(x, bool | np.bool_) else np.asarray(x).astype(U64)


def popcount(x):
    if isinstance(x, int):
        return bin(x).count("1")
    a = arr(x)
    return np.bitwise_count(a).astype(U64)


def bitrev(x, bits: int):
    if isinstance(x, int):
        return int(f"{x:0{bits}b}"[::-1], 2)
    a = arr(x)
    r = np.zeros_like(a)
    for i in range(bits):
        r |= ((a >> U64(i)) & U64(1)) << U64(bits - 1 - i)
    return r


def ff1(x, bits: int):
    """Index of the least significant 1 bit, or -1 (as 32-bit raw bits)."""
    if isinstance(x, int):
        return ((x & -x).bit_length() - 1) & 0xFFFFFFFF if x else 0xFFFFFFFF
    a = arr(x)
    low = a & (~a + U64(1))
    idx = np.where(a == 0, U64(0xFFFFFFFF), np.log2(np.maximum(low, U64(1)).astype(np.float64)).astype(U64))
    return idx


def iabs(x, bits: int):
    v = sx(x, bits)
    return abs(v) & _m(bits) if isinstance(v, int) else np.abs(v).view(U64) & U64(_m(bits))


def sext_from(x, n, bits: int):
    """Sign-extend x from bit n-1 (n = 0 gives 0)."""
    if isinstance(x, int) and isinstance(n, int):
        if n == 0:
            return 0
        v = x & _m(n)
        return (v - (1 << n) if v >> (n - 1) & 1 else v) & _m(bits)
    a, n = np.broadcast_arrays(arr(x), arr(n))
    sh = U64(64) - np.clip(n, 1, 64).astype(U64)
    r = ((a << sh).view(np.int64) >> sh.astype(np.int64)).view(U64)
    r = np.where(n == 0, U64(0), r)
    return r & U64(_m(bits)) if bits < 64 else r


def sat(x, src_bits: int, signed: bool, dst_bits: int, dst_signed: bool):
    """Clamp an integer to the range of the destination type."""
    v = sx(x, src_bits) if signed else x
    lo, hi = (-(1 << dst_bits - 1), (1 << dst_bits - 1) - 1) if dst_signed else (0, _m(dst_bits))
    if isinstance(v, int):
        return min(max(v, lo), hi) & _m(dst_bits)
    v = np.clip(v if signed else arr(v), lo if signed else max(lo, 0), hi)
    return v.astype(np.int64).view(U64) & U64(_m(dst_bits))


# ---- arrays, memories, register files ---------------------------------------------------------------------------

def aget(a: list, i):
    if isinstance(i, int) or np.ndim(i) == 0 or np.size(i) == 1:
        return a[uniform(i)]
    i = arr(i)
    elems = [np.asarray(v) for v in a]
    if all(e.dtype.kind in "biu" for e in elems):  # integers as uint64 raw bits (int64 + uint64 would be float)
        elems = [arr(e) for e in elems]
    vals = np.stack(np.broadcast_arrays(*elems, i)[:-1])
    return vals[np.minimum(i, U64(len(a) - 1)).astype(np.intp), np.arange(i.size)]


def aset(a: list, i, v, m) -> None:
    if isinstance(i, int) or np.ndim(i) == 0 or np.size(i) == 1:
        k = uniform(i)
        a[k] = v if m is True else sel(m, v, a[k])
        return
    for k in range(len(a)):
        a[k] = sel(land(m, arr(i) == k), v, a[k])


def _active(st: dict, m, lanes: int):
    """The lanes a memory or register access touches; lanes 0: the one access of a scalar instruction."""
    if lanes == 0:
        return np.array([bool(np.all(m))])
    act = st.get("ACTIVE", True)
    act = land(act, m)
    if act is True:
        return np.ones(lanes, bool)
    return np.broadcast_to(np.asarray(act, bool), (lanes,))


def load(st: dict, file: str, addr, bits: int, m, lanes: int):
    act = _active(st, m, lanes)
    addr = np.broadcast_to(arr(addr), act.shape)
    mem = st[file]
    if bits <= 64:
        return mem.load(addr, bits, act)
    r = 0
    for k in range(0, bits, 32):
        r = r + (_wide(mem.load(addr + U64(k // 8), 32, act), 32, False) << k)
    return r


def store(st: dict, file: str, addr, v, bits: int, m, lanes: int) -> None:
    act = _active(st, m, lanes)
    addr = np.broadcast_to(arr(addr), act.shape)
    mem = st[file]
    if bits <= 64:
        mem.store(addr, bits, np.broadcast_to(arr(v), act.shape), act)
        return
    for k in range(0, bits, 32):
        mem.store(addr + U64(k // 8), 32, np.broadcast_to(ext(v, k, 32), act.shape), act)


def fmt_load(st: dict, addr, ch: int, m, lanes: int):
    """Channel ch of a formatted buffer element: st['FORMAT'] sizes and decodes it."""
    fmt = st["FORMAT"]
    raw = load(st, "MEM", addr, fmt.bits(ch), m, lanes)
    return arr(fmt.decode(raw, ch)) & U64(0xFFFFFFFF)


def fmt_store(st: dict, addr, v, ch: int, m, lanes: int) -> None:
    fmt = st["FORMAT"]
    store(st, "MEM", addr, arr(fmt.encode(np.broadcast_to(arr(v), (max(lanes, 1),)), ch)), fmt.bits(ch), m, lanes)


class RegisterIndexError(IndexError):
    """A register-file index out of range (e.g. a relative move past the last register)."""


def _reg_index(regs, file: str, idx: tuple) -> tuple:
    out = tuple(np.asarray(i).astype(np.intp) if not isinstance(i, int) else i for i in idx)
    for k, (i, n) in enumerate(zip(out, np.shape(regs), strict=False)):
        if np.any(np.asarray(i) >= n) or np.any(np.asarray(i) < 0):
            raise RegisterIndexError(f"{file} index {k} out of range 0..{n - 1}: {np.max(i)}")
    return out


def rget(st: dict, file: str, idx: tuple, bits: int = 32):
    """Register-file read; a value wider than 32 bits spans consecutive registers from idx, low dword first."""
    regs = st[file]
    if bits > 32:
        last = idx[-1]
        return cat(*[(rget(st, file, (*idx[:-1], last + k if isinstance(last, int) else arr(last) + U64(k))), 32)
                     for k in reversed(range(bits // 32))])
    return np.asarray(regs[_reg_index(regs, file, idx)]).astype(U64)


def rset(st: dict, file: str, idx: tuple, v, m, lanes: int, bits: int = 32) -> None:
    """Register-file write; a value wider than 32 bits fills consecutive registers from idx, low dword first."""
    if bits > 32:
        for k in range(0, bits, 32):
            rset(st, file, (*idx[:-1], arr(idx[-1]) + U64(k // 32) if not isinstance(idx[-1], int)
                            else idx[-1] + k // 32), ext(v, k, 32), m, lanes)
        return
    regs = st[file]
    per_lane = any(np.size(i) > 1 for i in idx) or np.size(v) > 1
    if per_lane:
        act = _active(st, m, lanes)
        full = np.broadcast_arrays(*[np.asarray(i).astype(np.intp) for i in idx], arr(v),
                                   np.empty(lanes))[:-1]
        where = _reg_index(regs, file, tuple(f[act] for f in full[:-1]))
        regs[where] = full[-1][act]
    elif m is True or any_(m):
        regs[_reg_index(regs, file, tuple(uniform(i) for i in idx))] = uniform(v)


def setlane(mask_val, v, m, lanes: int) -> int:
    """Wave mask with bit l set to v[l] for the lanes l in m."""
    bits = np.broadcast_to(np.asarray(v, bool), (lanes,))
    sel_ = np.ones(lanes, bool) if m is True else np.broadcast_to(np.asarray(m, bool), (lanes,))
    old = int(mask_val)
    on = int.from_bytes(np.packbits(bits & sel_, bitorder="little").tobytes(), "little")
    touched = int.from_bytes(np.packbits(sel_, bitorder="little").tobytes(), "little")
    return (old & ~touched) | on


# ---- entry and exit ----------------------------------------------------------------------------------------------

def inp(x, bits: int):
    """A caller's value as the generated code holds it."""
    if type(x) is np.ndarray and x.dtype == U64 and x.ndim == 1:  # a copy: results never alias the caller's arrays
        return x & U64(_m(bits)) if bits < 64 else x.copy()
    if isinstance(x, int | np.integer):
        return int(x) & _m(bits)
    if isinstance(x, bool | np.bool_):
        return int(x)
    a = np.asarray(x)
    if bits > 64:
        if a.ndim == 2:  # (dwords, lanes)
            return np.array([sum(int(a[k, j]) << (32 * k) for k in range(a.shape[0])) for j in range(a.shape[1])],
                            dtype=object)
        return a.astype(object)
    return a.astype(U64) & U64(_m(bits)) if bits < 64 else a.astype(U64)


def out_scalar(x, bits: int) -> int:
    return int(np.asarray(x).flat[0]) & _m(bits) if not isinstance(x, int) else x & _m(bits)


def out_lanes(x, bits: int, lanes: int):
    if type(x) is np.ndarray and x.dtype == U64 and x.shape == (lanes,):
        return x
    if bits > 64:
        v = np.broadcast_to(np.asarray(x, dtype=object), (lanes,))
        return np.array([[(int(e) >> (32 * k)) & 0xFFFFFFFF for e in v] for k in range((bits + 31) // 32)], U64)
    return np.broadcast_to(arr(x), (lanes,)).copy()


_LANES: dict[int, np.ndarray] = {}


def lane_ids(lanes: int) -> np.ndarray:
    """laneId: 0 .. lanes-1 (uint64), shared read-only."""
    a = _LANES.get(lanes)
    if a is None:
        a = _LANES[lanes] = np.arange(lanes, dtype=U64)
        a.flags.writeable = False
    return a
