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
then binds the reference backend's whole function instead. Modules: this one (inputs, statements, results),
emu.pcode.npops (the operations), emu.pcode.npvalues (natural widths, lane_bits, pack_lanes, Decline).
"""
from __future__ import annotations

import re

import numpy as np

from emu.pcode import pyback
from emu.pcode.ir import Assign, Const, Func, Op, SetLaneBit, Store, Ty, Var
from emu.pcode.npops import NaturalOps
from emu.pcode.npvalues import Decline, is_nat, nat_bits, ones, wider


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


def _whole(f: Func, s: Assign) -> bool:
    """An assignment of the whole variable (a bit field from 0 that covers it, of a variable not read before)."""
    if s.width is None:
        return s.lo is None
    return isinstance(s.lo, Const) and s.lo.value == 0 and s.width == f.vars[s.var].bits and s.var not in f.inputs \
        and is_nat(f.vars[s.var])


class Natural(NaturalOps):
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
        self.whole: set[str] = set()  # natural-width inputs read as bound, not masked to their bits
        for var, bits in f.inputs.items():
            v = pyback.pyname(var)
            t = f.vars[var]
            if var in consts:
                continue
            if var in nat and is_nat(t):
                mask = bits < nat_bits(t) and var not in exact
                self.lines.append(f"{v} = {nat[var]}" + (f" & {self.k(t, ones(bits))}" if mask else ""))
                self.rep[var] = "n"
                if not mask:
                    self.whole.add(var)
                row = _ROW.fullmatch(nat[var])
                if row and not mask and t.bits == 32:
                    self.rows[var] = row.group(1)
            elif var in wide:
                mask = var in f.masks and bits <= 64  # a wave mask is an int
                self.lines.append(f"{v} = ({wide[var]}) & {ones(bits)}" if mask else
                                  f"{v} = L.inp({wide[var]}, {bits})")
                self.rep[var] = "w"
            else:
                raise Decline(f"input {var} unbound")

    # -- conversions -------------------------------------------------------------------------------------------
    def k(self, t: Ty, value: int) -> str:
        """Code of integer constant `value` at `t`'s natural width, made once (an entry of K): a read-only array of
        the lanes (numpy's array-array operations cost about half those with a scalar operand)."""
        a = np.full(self.lanes, value, np.uint32 if nat_bits(t) == 32 else np.uint64)
        a.flags.writeable = False
        return self.g.const(a)

    def tmp(self, code: str) -> str:
        self.n += 1
        self.lines.append(f"t{self.n} = {code}")
        return f"t{self.n}"

    def to_wide(self, code: str, rep: str, t: Ty) -> str:
        if rep == "w" or not is_nat(t) or nat_bits(t) == 64:
            return code
        return f"{code}.astype(U64)"

    def to_nat(self, code: str, rep: str, t: Ty) -> str:
        if rep == "n" or not is_nat(t):
            return code
        return f"L.arr({code})" if nat_bits(t) == 64 else f"L.arr({code}).astype(U32)"

    # -- expressions: (code, rep, known value or None) ---------------------------------------------------------
    def ex(self, e) -> tuple[str, str, object]:
        if isinstance(e, Const):
            t = e.ty
            if t.kind == "bool":
                return f"np.bool_({bool(e.value)})", "n", bool(e.value)
            if is_nat(t):
                return f"{self.k(t, int(e.value) & ones(t.bits))}", "n", int(e.value) & ones(t.bits)
            return self.g.ex_op(e, "True"), "n", None
        if isinstance(e, Var):
            self.read.add(e.name)
            self.need(e.name)
            if e.name not in self.assigned:
                self.old_reads.add(e.name)
            if e.name in self.known:
                v = self.known[e.name]
                return f"{self.k(e.ty, v)}" if is_nat(e.ty) else repr(v), "n", v
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
        if wider(e.ty) or any(wider(a.ty) for a in e.args):
            return self.pair(e, args)
        code = self.natural(e, args)
        if code is not None:
            return self.tmp(code), "n", None
        return self.tmp(self.wide(e, args)), "w", None

    def lane_bit(self, e: Op) -> str | None:
        """Code of each lane's bit of a wave mask (an int), `MASK[laneId]`, or None."""
        if e.op == "extract" and e.attr == 1 and isinstance(e.args[0], Var) and e.args[0].name in self.f.masks \
                and isinstance(e.args[1], Op) and e.args[1].op == "lane_id" and nat_bits(e.ty) == 32:
            return f"LB({self.ex(e.args[0])[0]}, {self.lanes})"
        return None

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
                if s.bits == 32 and is_nat(s.value.ty) and s.value.ty.bits == 32 and is_nat(s.addr[0].ty):
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
            if isinstance(s, Assign) and s.width is not None and is_nat(s.value.ty) and s.value.ty.bits > s.width:
                code, rep = self.tmp(f"{self.to_nat(code, rep, s.value.ty)} & {self.k(s.value.ty, ones(s.width))}"), "n"
            if s.var in self.read:
                self.memo.clear()
                self.read.clear()
            if isinstance(s, SetLaneBit):  # every lane's bit (straight-line code runs in all lanes)
                if self.rep.get(s.var) != "w":
                    raise Decline("lane bit of a natural value")
                keep = ones(64) & ~ones(self.lanes)
                bits = f"PK({code}, {self.lanes})" if known is None else str(ones(self.lanes) if known else 0)
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
            return f"({v} & {ones(bits)})" if self.rep.get(name, "w") == "w" else f"L.out_scalar({v}, {bits})"
        return f"L.out_lanes({v}, {bits}, {self.lanes})"
