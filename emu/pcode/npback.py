"""Natural-width numpy backend of the IR, for straight-line vector semantics (the lean interpreter's fused steps).

Values keep the width their type has: integers of up to 32 bits are uint32 arrays, of 33..64 bits uint64, floats
their numpy float type (a u32 -> f32 bitcast of a register row is a view), booleans bool arrays. An operation
with no natural form here is emitted by the reference backend (emu.pcode.pyback) on its representation (uint64
raw bits) and converted back, so every result is the reference backend's bit for bit. Float operations are
emitted as the native numpy operation: the caller runs this code only while MODE rounds to nearest even (the
reference backend's emu.pcode.floats.rop is then the native operation) and keeps denormals.

With `memory`, loads and stores of MEM / LDS are calls `ML(mem, act, addr, bits)` (a uint64 result) and
`MS(mem, act, addr, value, bits)` of the caller's, dwords `ML32(mem, act, addr)` and `MS32(mem, act, addr, value)`
on natural uint32 values (`mem`, `act`: the memory and active lanes, `addr`: uint64 byte addresses). Wave masks
stay ints; a lane's bit of one is `LB(mask, lanes)` (lane_bits) and a mask set from per-lane bools is
`PK(bools, lanes)` (pack_lanes), names the caller binds. Integers of 65..128 bits (multiply-add with carry) are pairs of
uint64 halves. Bodies with branches, loops, partial assignments, arrays or other state raise Decline: the caller
then binds the reference backend's whole function instead.
"""
from __future__ import annotations

import re

import numpy as np

from emu.pcode import pyback
from emu.pcode.ir import Assign, Const, Func, Op, SetLaneBit, Store, Ty, Var


class Decline(Exception):
    """The function (or a construct in it) has no natural-width form here."""


_ARITH = {"add": "+", "sub": "-", "mul": "*", "and": "&", "or": "|", "xor": "^"}
_FLOAT_ARITH = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_FDT = {16: "np.float16", 32: "np.float32", 64: "np.float64"}


def _m(bits: int) -> int:
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


def _int(t: Ty) -> bool:
    return t.kind in ("u", "i") and t.bits <= 64


def _cls(t: Ty) -> int:
    """Storage bits of a natural integer: 32 or 64."""
    return 32 if t.bits <= 32 else 64


def _reads(x) -> set[str]:
    """Variables an expression or statement reads (a partial assignment reads its variable)."""
    if isinstance(x, Var):
        return {x.name}
    if isinstance(x, Op):
        return set().union(*map(_reads, x.args)) if x.args else set()
    if isinstance(x, Store):
        return _reads(x.value).union(*map(_reads, x.addr))
    if isinstance(x, SetLaneBit):
        return _reads(x.value) | {x.var}
    if isinstance(x, Assign):
        r = _reads(x.value) | (_reads(x.lo) if x.lo is not None else set())
        return r | {x.var} if x.width is not None or x.lo is not None else r
    return set()


_CARRY = 1 << 32
_ROW = re.compile(r"vg\[(\d+)\]")
_TYPED_ROWS = {"np.float32": "vf", "np.int32": "vi"}  # the VGPR file's views as these types (the caller loads them)
CARRY = "__carry"  # the variable of a carry chain's lanes (Natural's carry_in / carry_out)


def _terms(e) -> list | None:
    """The values of up to 32 bits whose zero-extended sum a 64-bit add tree is (two or three), or None."""
    if not (isinstance(e, Op) and e.op == "add" and e.ty.kind == "u" and e.ty.bits == 64):
        return None
    out = []
    for a in e.args:
        if isinstance(a, Op) and a.op == "resize" and a.args[0].ty.kind == "u" and a.args[0].ty.bits <= 32:
            out.append(a.args[0])
        else:
            inner = _terms(a)
            if inner is None:
                return None
            out += inner
    return out if len(out) <= 3 else None


def _carry_sums(f: Func) -> dict[str, list]:
    """u64 variables assigned once a sum of zero-extended 32-bit values (_terms) and read only as `v >= 2**32` (the
    carry-out) and `v.u32` (the sum), as V_ADD_CO_U32 and V_ADD_CO_CI_U32 compute them: name -> the terms. Such a
    sum is computed in 32 bits, its carry by comparisons: fewer operations than the 64-bit sum and its casts."""
    sums, other = {}, set()
    for s in f.body:
        if isinstance(s, Assign) and s.index is None and s.lo is None and s.width is None:
            t = _terms(s.value)
            if t is not None and s.var not in sums:
                sums[s.var] = t
                continue
            other.add(s.var)
        elif isinstance(s, Assign | SetLaneBit):
            other.add(s.var)

    def walk(e, ok: bool) -> None:  # ok: this node is a carry or sum read of its variable
        if isinstance(e, Var):
            if not ok:
                other.add(e.name)
        elif isinstance(e, Op):
            carry = e.op == "ge" and isinstance(e.args[1], Const) and e.args[1].value == _CARRY
            low = e.op == "resize" and e.ty.kind == "u" and e.ty.bits == 32
            for i, a in enumerate(e.args):
                walk(a, (carry and i == 0) or low)
    for s in f.body:
        for x in (s.value, *(s.addr if isinstance(s, Store) else ())):
            walk(x, False)
    return {v: t for v, t in sums.items() if v not in other and v not in f.outputs and v not in f.inputs}


def _wider(t: Ty) -> bool:
    return t.kind in ("u", "i") and 64 < t.bits <= 128


def _ut(t: Ty) -> str:
    return "U32" if _cls(t) == 32 else "U64"


def _whole(f: Func, s: Assign) -> bool:
    """An assignment of the whole variable (a bit field from 0 that covers it, of a variable not read before)."""
    if s.width is None:
        return s.lo is None
    return isinstance(s.lo, Const) and s.lo.value == 0 and s.width == f.vars[s.var].bits and s.var not in f.inputs \
        and _int(f.vars[s.var])


class Natural:
    """Emits the body of one vector IR function at natural widths.

    `nat`: per-lane inputs as code of uint32 / uint64 arrays; `wide`: other inputs as code of the reference
    backend's values (ints, masks); `consts`: inputs known when planning (encoding fields). `K`: the constants
    list the generated code indexes.

    A carry chain passes a wave mask's lanes between two instructions' code as a bool array (emu.amd.exec.interp):
    `carry_in` names the mask input whose lane bits a carry sum adds (read from CARRY instead; `took` says whether
    it was, `old_reads` which inputs were read otherwise before being assigned), and `carry_out` the mask output
    whose lanes are kept in CARRY when it sets them (`gave`)."""

    def __init__(self, f: Func, lanes: int, nat: dict[str, str], wide: dict[str, str], consts: dict[str, int],
                 K: list, memory: bool = False, exact: frozenset[str] = frozenset(), carry_in: str | None = None,
                 carry_out: str | None = None):
        """`exact`: the `nat` inputs that hold no bits beyond their type's width already (no masking)."""
        if not f.vector or f.arrays or f.files - ({"MEM", "LDS"} if memory else set()):
            raise Decline("not a register-only vector function")
        for s in f.body:
            if not (isinstance(s, SetLaneBit) or (isinstance(s, Assign) and s.index is None and _whole(f, s))
                    or (isinstance(s, Store) and s.file in f.files and s.bits in (8, 16, 32, 64))):
                raise Decline(f"statement {type(s).__name__}")
        self.f, self.lanes = f, lanes
        self.g = pyback.Gen(f)
        self.g.consts = K
        self.lines: list[str] = []
        self.rep: dict[str, str] = {}  # variable -> 'n' (natural) or 'w' (reference representation)
        self.known: dict[str, int] = dict(consts)
        self.n = 0
        self.pairs: dict[str, tuple] = {}  # 'p' values (65..128-bit integers): name -> (lo, hi, kind, bits)
        self.memo: dict = {}  # expression -> its result while no variable it reads is assigned again
        self.read: set[str] = set()  # variables read by memoized expressions
        self.sums = _carry_sums(f)  # variables computed as a 32-bit sum and its carry-out
        self.carried: dict[str, tuple[str, str]] = {}  # such a variable -> (code of the sum, of the carry)
        self.carry_in, self.carry_out, self.took, self.gave = carry_in, carry_out, False, False
        self.assigned: set[str] = set()  # variables the body has assigned so far
        self.old_reads: set[str] = set()  # variables read before the body assigned them
        self.deferred: dict[str, tuple[int, str]] = {}  # mask -> (line index, its lane-bit line) not yet needed
        self.rows: dict[str, str] = {}  # inputs that are a VGPR row (`vg[N]`) -> N: read as f32 / i32 from vf / vi
        for var, bits in f.inputs.items():
            v = pyback.pyname(var)
            t = f.vars[var]
            if var in consts:
                continue
            if var in nat and _int(t):
                mask = bits < _cls(t) and var not in exact
                self.lines.append(f"{v} = {nat[var]}" + (f" & {self.k(t, _m(bits))}" if mask else ""))
                self.rep[var] = "n"
                row = _ROW.fullmatch(nat[var])
                if row and not mask and t.bits == 32:
                    self.rows[var] = row.group(1)
            elif var in wide:
                mask = var in f.masks and bits <= 64  # a wave mask is an int
                self.lines.append(f"{v} = ({wide[var]}) & {_m(bits)}" if mask else f"{v} = L.inp({wide[var]}, {bits})")
                self.rep[var] = "w"
            else:
                raise Decline(f"input {var} unbound")

    # -- conversions -------------------------------------------------------------------------------------------
    def k(self, t: Ty, value: int) -> str:
        """Code of integer constant `value` at `t`'s natural width, made once (an entry of K): a read-only array of
        the lanes (numpy's array-array operations cost about half those with a scalar operand)."""
        a = np.full(self.lanes, value, np.uint32 if _cls(t) == 32 else np.uint64)
        a.flags.writeable = False
        return self.g.const(a)

    def tmp(self, code: str) -> str:
        self.n += 1
        self.lines.append(f"t{self.n} = {code}")
        return f"t{self.n}"

    def to_wide(self, code: str, rep: str, t: Ty) -> str:
        if rep == "w" or not _int(t) or _cls(t) == 64:
            return code
        return f"{code}.astype(U64)"

    def to_nat(self, code: str, rep: str, t: Ty) -> str:
        if rep == "n" or not _int(t):
            return code
        return f"L.arr({code})" if _cls(t) == 64 else f"L.arr({code}).astype(U32)"

    # -- expressions: (code, rep, known value or None) ---------------------------------------------------------
    def ex(self, e) -> tuple[str, str, object]:
        if isinstance(e, Const):
            t = e.ty
            if t.kind == "bool":
                return f"np.bool_({bool(e.value)})", "n", bool(e.value)
            if _int(t):
                return f"{self.k(t, int(e.value) & _m(t.bits))}", "n", int(e.value) & _m(t.bits)
            return self.g.ex_op(e, "True"), "n", None
        if isinstance(e, Var):
            self.read.add(e.name)
            self.need(e.name)
            if e.name not in self.assigned:
                self.old_reads.add(e.name)
            if e.name in self.known:
                v = self.known[e.name]
                return f"{self.k(e.ty, v)}" if _int(e.ty) else repr(v), "n", v
            return pyback.pyname(e.name), self.rep.get(e.name, "w"), None
        if not isinstance(e, Op):
            raise Decline(f"node {type(e).__name__}")
        got = self.memo.get(e)
        if got is None:
            got = self.memo[e] = self._op(e)
        return got

    def _op(self, e: Op) -> tuple[str, str, object]:
        if e.op in ("ge", "resize") and isinstance(e.args[0], Var) and e.args[0].name in self.carried:
            self.read.add(e.args[0].name)
            total, carry = self.carried[e.args[0].name]  # _carry_sums: `v >= 2**32` or `v.u32`
            return (carry if e.op == "ge" else total), "n", None
        folded = self.fold(e)
        if folded is not None:
            return folded
        code = self.lane_bit(e)
        if code is not None:
            return self.tmp(code), "n", None
        args = [self.ex(a) for a in e.args]
        if _wider(e.ty) or any(_wider(a.ty) for a in e.args):
            return self.pair(e, args)
        code = self.natural(e, args)
        if code is not None:
            return self.tmp(code), "n", None
        return self.tmp(self.wide(e, args)), "w", None

    def lane_bit(self, e: Op) -> str | None:
        """Code of each lane's bit of a wave mask (an int), `MASK[laneId]`, or None."""
        if e.op == "extract" and e.attr == 1 and isinstance(e.args[0], Var) and e.args[0].name in self.f.masks \
                and isinstance(e.args[1], Op) and e.args[1].op == "lane_id" and _cls(e.ty) == 32:
            return f"LB({self.ex(e.args[0])[0]}, {self.lanes})"
        return None

    # -- 65..128-bit integers as (lo, hi) uint64 pairs ---------------------------------------------------------
    def pair(self, e: Op, args) -> tuple[str, str, object]:
        """A value wider than 64 bits as uint64 halves. kind 'z': zero-extended from `bits`, 's': sign-extended
        from `bits`, 'g': any; hi None: not computed (z: zero, s: the sign fill)."""
        t, op = e.ty, e.op
        ps = [self.pairs.get(c) if rep == "p" else None for c, rep, _ in args]
        if op == "resize" and _wider(t) and _int(e.args[0].ty) and args[0][1] != "p":
            s = e.args[0].ty
            a = self.to_nat(args[0][0], args[0][1], s)
            lo = a if _cls(s) == 64 else f"{a}.astype(U64)"
            if s.kind == "i" and s.bits in (32, 64):
                lo = lo if s.bits == 64 else f"{a}.view(np.int32).astype(np.int64).view(U64)"
                return self.new_pair(self.tmp(lo), None, "s", s.bits)
            if s.kind == "u":
                return self.new_pair(self.tmp(lo), None, "z", s.bits)
        if op == "resize" and ps[0] is not None and _wider(t) and t.bits == e.args[0].ty.bits:
            return args[0]
        if op == "resize" and ps[0] is not None and _int(t):
            return self.tmp(self.resize(ps[0][0], Ty("u", 64), t) or ps[0][0]), "n", None
        if op == "mul" and None not in ps:
            (a, _, ka, ba), (b, _, kb, bb) = ps
            if ka == kb == "z" and ba + bb <= 64:
                return self.new_pair(self.tmp(f"({a} * {b})"), None, "z", ba + bb)
            if ka == kb == "s" and ba <= 32 and bb <= 32:
                return self.new_pair(self.tmp(f"({a}.view(np.int64) * {b}.view(np.int64)).view(U64)"), None, "s", 64)
        if op == "add" and None not in ps:
            (a, _, ka, ba), (b, _, kb, bb) = ps
            lo = self.tmp(f"({a} + {b})")
            if ka == kb == "z" and max(ba, bb) < 64:
                return self.new_pair(lo, None, "z", max(ba, bb) + 1)
            def high() -> str:  # computed when something reads the high half (a carry-out to NULL does not)
                c = self.tmp(f"({lo} < {a}).astype(U64)")
                return self.tmp(f"(({self.hi(ps[0], t)} + {self.hi(ps[1], t)} + {c}) & U64({_m(t.bits - 64)}))")
            return self.new_pair(lo, high, "g", t.bits)
        if op == "and" and ps[0] is not None and isinstance(e.args[1], Const) and e.args[1].value == _m(t.bits):
            return args[0]
        if op == "extract" and ps[0] is not None and isinstance(e.args[1], Const) and _int(t) and e.attr <= 64:
            lo = int(e.args[1].value)
            if lo == 0:
                code = ps[0][0]
            elif lo == 64:
                code = self.hi(ps[0], e.args[0].ty)
            else:
                raise Decline(f"extract at {lo} of a {e.args[0].ty.bits}-bit value")
            code = code if e.attr == 64 else f"({code} & U64({_m(e.attr)}))"
            return self.tmp(code if _cls(t) == 64 else f"{code}.astype(U32)"), "n", None
        raise Decline(f"{op} on integers wider than 64 bits")

    def new_pair(self, lo: str, hi, kind: str, bits: int) -> tuple[str, str, None]:
        """A pair value; `hi`: code, None (implied by kind) or a function that emits it on first use."""
        self.pairs[lo] = (lo, hi, kind, bits)
        return lo, "p", None

    def hi(self, p: tuple, t: Ty) -> str:
        """Code of a pair's high half (bits 64 .. t.bits-1)."""
        lo, hi, kind, bits = p
        if callable(hi):
            hi = hi()
            self.pairs[lo] = (lo, hi, kind, bits)
        if hi is not None:
            return hi
        if kind == "z" and bits <= 64:
            return "U64(0)"
        if kind == "s":
            return self.tmp(f"((({lo}).view(np.int64) >> np.int64(63)).view(U64) & U64({_m(t.bits - 64)}))")
        raise Decline("high half unknown")

    def fold(self, e: Op):
        """Operations on values known when planning (encoding fields): the branch taken, the flag's value."""
        if e.op == "select" and self._constant(e.args[0]):
            return self.ex(e.args[1] if self.ex(e.args[0])[2] else e.args[2])
        if e.op == "select" and self._decided(e.args[0]) is not None:  # land with a false operand, ...
            return self.ex(e.args[1] if self._decided(e.args[0]) else e.args[2])
        a = e.args[0] if e.args else None
        if e.op == "resize" and _int(e.ty) and isinstance(a, Var | Const) and _int(a.ty) and a.ty.kind == "u":
            k = self.ex(a)[2] if self._constant(a) else None
            if k is not None:
                return f"{self.k(e.ty, k & _m(e.ty.bits))}", "n", k & _m(e.ty.bits)
        if e.op in ("add", "or", "xor", "sub") and _int(e.ty) and self._constant(e.args[1]) \
                and _int(e.args[0].ty) and _cls(e.args[0].ty) == _cls(e.ty) and e.args[0].ty.bits <= e.ty.bits:
            if self.ex(e.args[1])[2] == 0:
                return self.ex(a)
        if e.op == "extract" and _int(e.ty) and _int(a.ty) and isinstance(e.args[1], Const) \
                and e.args[1].value == 0 and e.attr >= a.ty.bits and _cls(a.ty) == _cls(e.ty):
            return self.ex(a)
        if e.op == "tobool" and isinstance(a, Op) and a.op == "select" and isinstance(a.args[1], Const) \
                and isinstance(a.args[2], Const) and a.args[1].value == 1 and a.args[2].value == 0:
            return self.ex(a.args[0])  # c ? 1 : 0 as a bool is c
        if e.op in ("tobool", "lnot", "land", "lor"):
            k = [self.ex(a)[2] for a in e.args] if all(self._constant(a) for a in e.args) else None
            if k is not None and None not in k:
                v = {"tobool": lambda: k[0] != 0, "lnot": lambda: not k[0], "land": lambda: bool(k[0] and k[1]),
                     "lor": lambda: bool(k[0] or k[1])}[e.op]()
                return f"np.bool_({v})", "n", v
            if e.op == "land":  # a false operand decides alone
                for a in e.args:
                    if self._constant(a) and self.ex(a)[2] is False:
                        return "np.bool_(False)", "n", False
        return None

    def _decided(self, e) -> bool | None:
        """A condition's value when its constant operands decide it alone, else None."""
        if self._constant(e):
            return bool(self.ex(e)[2])
        if isinstance(e, Op) and e.op in ("land", "lor"):
            k = [self._decided(a) for a in e.args]
            if e.op == "land" and False in k:
                return False
            if e.op == "lor" and True in k:
                return True
        return None

    def _constant(self, e) -> bool:
        if isinstance(e, Const):
            return True
        if isinstance(e, Var):
            return e.name in self.known
        if isinstance(e, Op) and e.op == "resize" and _int(e.ty) and _int(e.args[0].ty) \
                and e.args[0].ty.kind == "u":
            return self._constant(e.args[0])
        return isinstance(e, Op) and e.op in ("tobool", "lnot", "land", "lor") and all(map(self._constant, e.args))

    def natural(self, e: Op, args) -> str | None:
        """Natural-width code of `e`, or None."""
        t, op = e.ty, e.op
        ts = [a.ty for a in e.args]
        for (_, rep, _), x in zip(args, e.args, strict=True):  # masks and wide integers stay in the reference form
            if rep == "w" and _int(x.ty) and (x.ty.bits > 64 or isinstance(x, Var) and x.name in self.f.masks):
                return None
            if x.ty.kind in ("u", "i") and x.ty.bits > 64:
                return None
        a = [self.to_nat(c, rep, x.ty) for (c, rep, _), x in zip(args, e.args, strict=True)]
        if op in _ARITH and _int(t) and all(_int(x) and _cls(x) == _cls(t) for x in ts):
            r = f"({a[0]} {_ARITH[op]} {a[1]})"
            return f"({r} & {self.k(t, _m(t.bits))})" if t.bits < _cls(t) and op in ("add", "sub", "mul") else r
        if op in _FLOAT_ARITH and t.kind == "f":
            return f"({a[0]} {_FLOAT_ARITH[op]} {a[1]})"
        if op == "fma" and t.kind == "f" and len(a) == 3:
            return f"F.fma({a[0]}, {a[1]}, {a[2]})"
        if op == "neg":
            if t.kind == "f":
                return f"(-{a[0]})"
            if _int(t) and _cls(ts[0]) == _cls(t):
                return f"((-{a[0]}) & {self.k(t, _m(t.bits))})"
        if op == "not" and _int(t) and _cls(ts[0]) == _cls(t):
            return f"((~{a[0]}) & {self.k(t, _m(t.bits))})"
        if op in ("shl", "shr") and _int(t) and _cls(ts[0]) == _cls(t) and self._small(e.args[1], t.bits):
            amt = a[1] if _cls(ts[1]) == _cls(t) else f"{a[1]}.astype({_ut(t)})"
            if op == "shl":
                r = f"({a[0]} << {amt})"
                return f"({r} & {self.k(t, _m(t.bits))})" if t.bits < _cls(t) else r
            if t.kind == "u":
                return f"({a[0]} >> {amt})"
            if t.bits == _cls(t):
                s = f"np.int{t.bits}"
                return f"({self.view(e.args[0], a[0], s)} >> {self.view(e.args[1], amt, s)}).view({_ut(t)})"
            return None
        if op in _CMP:
            s = ts[0]
            if s.kind == "f" or s.kind == "bool" or (s.kind == "u" and _int(s)):
                return f"({a[0]} {_CMP[op]} {a[1]})"
            if s.kind == "i" and s.bits in (32, 64):
                t = f"np.int{s.bits}"
                return f"({self.view(e.args[0], a[0], t)} {_CMP[op]} {self.view(e.args[1], a[1], t)})"
            return None
        if op in ("land", "lor"):
            return f"({a[0]} {'&' if op == 'land' else '|'} {a[1]})"
        if op == "lnot":
            return f"(~{a[0]})"
        if op == "select" and (t.kind == "f" or (_int(t) and _cls(ts[1]) == _cls(ts[2]) == _cls(t))):
            return f"np.where({a[0]}, {a[1]}, {a[2]})"
        if op == "tobool" and _int(ts[0]):
            return f"({a[0]} != 0)"
        if op == "frombool" and _int(t):
            return f"{a[0]}.astype({_ut(t)})"
        if op == "resize" and _int(t) and _int(ts[0]):
            return self.resize(a[0], ts[0], t)
        if op == "extract" and _int(t) and _int(ts[0]) and isinstance(e.args[1], Const):
            lo = int(e.args[1].value)
            if lo >= _cls(ts[0]) or t.bits > 32 and _cls(ts[0]) == 32:
                return None
            r = f"(({a[0]} >> {self.k(ts[0], lo)}) & {self.k(ts[0], _m(e.attr))})"
            return r if _cls(ts[0]) == _cls(t) else f"{r}.astype({_ut(t)})"
        if op == "load" and e.attr in self.f.files and t.bits == 32 and _int(t) and _int(ts[0]):
            return f"ML32(mem, act, {self.to_wide(*args[0][:2], ts[0])})"
        if op == "bitcast" and t.kind == "f" and _int(ts[0]) and t.bits == ts[0].bits:
            return self.view(e.args[0], a[0], _FDT[t.bits]) if t.bits != 16 else \
                f"{a[0]}.astype(np.uint16).view(np.float16)"
        if op == "bitcast" and _int(t) and ts[0].kind == "f" and t.bits == ts[0].bits:
            return f"{a[0]}.view({_ut(t)})" if t.bits != 16 else f"{a[0]}.view(np.uint16).astype(U32)"
        return None

    def view(self, x, code: str, dtype: str) -> str:
        """Code of natural value `code` (of IR node `x`) viewed as numpy type `dtype`: a VGPR row input from the
        file's view of that type, no view made per use."""
        while isinstance(x, Op) and x.op == "resize" and _int(x.ty) and _int(x.args[0].ty) \
                and x.ty.bits == x.args[0].ty.bits:  # a change of signedness: the same bits
            x = x.args[0]
        if isinstance(x, Var) and x.name in self.rows and dtype in _TYPED_ROWS and x.name not in self.assigned:
            return f"{_TYPED_ROWS[dtype]}[{self.rows[x.name]}]"
        return f"{code}.view({dtype})"

    def resize(self, a: str, s: Ty, t: Ty) -> str | None:
        if _cls(s) == _cls(t):
            if t.bits < s.bits:
                return f"({a} & {self.k(t, _m(t.bits))})"
            if s.kind == "i" and t.bits > s.bits:
                return None
            return a
        if _cls(s) == 32:  # to 64 bits
            if s.kind == "i" and t.bits > s.bits:
                return f"{a}.view(np.int32).astype(np.int64).view(U64)" if s.bits == 32 else None
            return f"{a}.astype(U64)"
        r = f"{a}.astype(U32)"
        return f"({r} & {self.k(t, _m(t.bits))})" if t.bits < 32 else r

    @staticmethod
    def _small(e, bits: int) -> bool:
        """Whether a shift amount is below `bits` for every value it can have."""
        if isinstance(e, Const):
            return int(e.value) < bits
        if isinstance(e, Op) and e.op == "resize":
            return Natural._small(e.args[0], bits)
        return _int(e.ty) and (1 << e.ty.bits) <= bits

    def wide(self, e: Op, args) -> str:
        """The reference backend's code for `e` on reference-form arguments."""
        a = [c if isinstance(x, Const) or rep == "w" else self.to_wide(c, rep, x.ty)
             for (c, rep, _), x in zip(args, e.args, strict=True)]
        a = [self.g.ex_op(x, "True") if isinstance(x, Const) else c for c, x in zip(a, e.args, strict=True)]
        if e.op == "lane_id":
            return f"L.lane_ids({self.lanes})"
        if e.op == "wave64":
            return repr(self.lanes == 64)
        if e.op == "load" and e.attr in self.f.files and e.ty.bits in (8, 16, 32, 64):
            return f"L.arr(ML(mem, act, {a[0]}, {e.ty.bits}))"
        if e.op in ("load", "fmt_load", "fmt_offset", "callout", "reg_read"):
            raise Decline(f"state access {e.op}")
        if e.op in pyback.ROUNDED and e.ty.is_float and not pyback._bf(e.ty):
            return f"F.rop({e.op!r}, 0, {', '.join(a)})"  # the caller guarantees MODE rounds to nearest
        fn = getattr(self.g, "op_" + e.op, None)
        if fn is not None:
            return fn(e, a, "True")
        if e.op in pyback._NP1:
            return self.g.round(e.ty, f"{pyback._NP1[e.op]}({a[0]})", e.op)
        raise Decline(f"op {e.op}")

    # -- statements and results --------------------------------------------------------------------------------
    def body_lines(self, unused: frozenset[str] = frozenset()) -> list[str]:
        """The body's code; assignments of the outputs in `unused` that nothing after them reads are left out."""
        f = self.f
        written: set[str] = set()
        early: set[str] = set()  # variables read before anything assigns them: they start as zero
        for s in f.body:
            early |= _reads(s) - written
            if isinstance(s, Assign | SetLaneBit):
                written.add(s.var)
        for var, t in f.vars.items():
            if var not in f.inputs and var not in self.known and (var in early or var not in written):
                self.lines.append(f"{pyback.pyname(var)} = {self.g.zero(t)}")
                self.rep[var] = "w"
        later: list[set[str]] = [set()]  # variables read by the statements after each one
        for s in reversed(f.body[1:]):
            later.append(later[-1] | _reads(s))
        for s, after in zip(f.body, reversed(later), strict=True):
            if isinstance(s, Assign | SetLaneBit) and s.var in unused and s.var not in after \
                    and s.var != self.carry_out:
                continue
            if isinstance(s, Assign | SetLaneBit):
                self.need(s.var)
            if isinstance(s, Store):
                addr, rep, _ = self.ex(s.addr[0])
                val, vrep, _ = self.ex(s.value)
                if s.bits == 32 and _int(s.value.ty) and s.value.ty.bits == 32 and _int(s.addr[0].ty):
                    self.lines.append(f"MS32(mem, act, {self.to_wide(addr, rep, s.addr[0].ty)}, "
                                      f"{self.to_nat(val, vrep, s.value.ty)})")
                else:
                    self.lines.append(f"MS(mem, act, {self.to_wide(addr, rep, s.addr[0].ty)}, "
                                      f"{self.to_wide(val, vrep, s.value.ty)}, {s.bits})")
                self.memo.clear()  # a later load of the address must see the store
                continue
            if isinstance(s, Assign) and s.var in self.sums:
                self.carry_sum(s.var)
                continue
            v = pyback.pyname(s.var)
            code, rep, known = self.ex(s.value)
            if isinstance(s, Assign) and s.width is not None and _int(s.value.ty) and s.value.ty.bits > s.width:
                code, rep = self.tmp(f"{self.to_nat(code, rep, s.value.ty)} & {self.k(s.value.ty, _m(s.width))}"), "n"
            if s.var in self.read:
                self.memo.clear()
                self.read.clear()
            if isinstance(s, SetLaneBit):  # every lane's bit (straight-line code runs in all lanes)
                if self.rep.get(s.var) != "w":
                    raise Decline("lane bit of a natural value")
                keep = _m(64) & ~_m(self.lanes)
                bits = f"PK({code}, {self.lanes})" if known is None else str(_m(self.lanes) if known else 0)
                line = f"{v} = ({v} & {keep}) | {bits}" if keep else f"{v} = {bits}"
                if s.var == self.carry_out and s.var not in self.assigned and s.var not in f.inputs:
                    self.lines.append(f"{CARRY} = {code}")  # the lanes of the whole mask (it starts as zero)
                    self.gave = True
                if s.var in unused:  # made only if the code reads the mask after this
                    self.deferred[s.var] = (len(self.lines), line)
                else:
                    self.lines.append(line)
                self.assigned.add(s.var)
                continue
            self.lines.append(f"{v} = {code}")
            self.assigned.add(s.var)
            self.rep[s.var] = rep
            if rep == "p":
                raise Decline("a variable wider than 64 bits")
            self.known.pop(s.var, None)
        return self.lines

    def carry_sum(self, var: str) -> None:
        """A _carry_sums variable's 32-bit sum (wrapping) and carry-out: a + b carries where the sum is below a; a
        third term carries where adding it lowers the sum again (at most one of the two, for a 1-bit term)."""
        a = [self.carry_term(x) or self.to_nat(*self.ex(x)[:2], x.ty) for x in self.sums[var]]
        total = self.tmp(f"({a[0]} + {a[1]})")
        carry = self.tmp(f"({total} < {a[0]})")
        if len(a) == 3:
            more = self.tmp(f"({total} + {a[2]})")
            carry, total = self.tmp(f"({carry} | ({more} < {total}))"), more
        self.carried[var] = (total, carry)

    def carry_term(self, x) -> str | None:
        """CARRY for a term that is `carry_in`'s lane bit (`MASK[laneId]`) before the body assigns the mask."""
        m = self.carry_in
        if m is None or m in self.assigned or not (isinstance(x, Op) and x.op == "extract" and x.attr == 1
                                                   and isinstance(x.args[0], Var) and x.args[0].name == m
                                                   and isinstance(x.args[1], Op) and x.args[1].op == "lane_id"):
            return None
        self.took = True
        return CARRY

    def need(self, var: str) -> None:
        """Emits a deferred lane-bit line of `var` where it was made, now that something reads the mask."""
        got = self.deferred.pop(var, None)
        if got is not None:
            at, line = got
            self.lines.insert(at, line)
            self.deferred = {v: (i + (i >= at), ln) for v, (i, ln) in self.deferred.items()}

    def natural_out(self, name: str) -> str:
        """Code of an output as a natural array (uint32 / uint64)."""
        return self.to_nat(pyback.pyname(name), self.rep.get(name, "w"), self.f.vars[name])

    def output(self, name: str) -> str:
        """Code of an output as the reference backend returns it."""
        f, bits = self.f, self.f.outputs[name]
        v = self.to_wide(pyback.pyname(name), self.rep.get(name, "w"), f.vars[name])
        if name in f.masks:  # a mask the body packed or took as an int stays one
            return f"({v} & {_m(bits)})" if self.rep.get(name, "w") == "w" else f"L.out_scalar({v}, {bits})"
        return f"L.out_lanes({v}, {bits}, {self.lanes})"
