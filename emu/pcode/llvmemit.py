"""The LLVM backend's emitter: one Func's semantics written at an IRBuilder's position (emu.pcode.llvmback is the
public face and documents the value rules; integer ops are emu.pcode.llvmints, float ones emu.pcode.llvmfloats,
what is read off the IR first emu.pcode.llvmfacts). Control flow mirrors the reference backend (emu.pcode.pyback)
exactly: every expression is computed for all lanes, an If runs a branch only when a lane of its predicate is set, an
assignment under a predicate is a select, a Break clears lanes from the loop's mask and a vector loop ends once no
lane is left; loop bounds are uniform (lane 0 is taken). Variables live in allocas of the function's entry block
(promoted to registers by LLVM); wave-wide names (masks, MODE, loop counters) are scalars, the others `<lanes x T>`
vectors in vector Funcs.
"""
from __future__ import annotations

import dataclasses
from typing import Protocol

from llvmlite import ir

from emu.pcode import llvmfloats as FL
from emu.pcode.ir import DEFAULT_MODE, Assign, Break, Const, Expr, Fail, Func, If, Loop, Op, SetLaneBit, Store, Var
from emu.pcode.llvmfacts import COMPARES, FOLD, NAN_BLIND, assigned, flat, loop_vars, round_trip, widening
from emu.pcode.llvmints import IntOps, int_const
from emu.pcode.llvmvalues import (
    FTY,
    I1,
    I32,
    I64,
    any_lane,
    bcast,
    const,
    elem,
    entry_alloca,
    ext,
    lane0,
    lanes,
    like,
    resize,
    scalar_type,
    select,
    splat,
)
from emu.pcode.typed import Unsupported

__all__ = ["Hooks", "emit"]


class Hooks(Protocol):
    """What the semantics reach beyond their inputs; each method emits code at b's position."""

    def load(self, b: ir.IRBuilder, file: str, addr: ir.Value, bits: int, mask: ir.Value) -> ir.Value:
        """Memory read ('MEM' / 'LDS') of `bits` at byte addresses `addr` (i64 lanes) for the lanes of `mask`."""

    def store(self, b: ir.IRBuilder, file: str, addr: ir.Value, value: ir.Value, bits: int, mask: ir.Value) -> None:
        ...

    def reg_read(self, b: ir.IRBuilder, file: str, index: tuple, bits: int, mask: ir.Value) -> ir.Value:
        """Register-file read ('VGPR' [lane, reg], 'SGPR' [reg], 'HW_REGISTERS' [reg]); bits > 32 spans
        consecutive registers. pyback reads every lane whatever `mask` says (an index out of range raises)."""

    def reg_write(self, b: ir.IRBuilder, file: str, index: tuple, value: ir.Value, bits: int,
                  mask: ir.Value) -> None:
        ...

    def callout(self, b: ir.IRBuilder, name: str, args: tuple) -> ir.Value:
        """st[name](*args) of pyback (HwRegWriteMask): u32 in, u32 out."""

    def fail(self, b: ir.IRBuilder, mask: ir.Value, reason: str) -> None:
        """The IR's Fail: the emitted code reaches it only when a lane of `mask` is set; pyback raises
        Unsupported(reason) there. The hook leaves b in an open block (the emitted code continues)."""


def emit(b: ir.IRBuilder, f: Func, lanes: int, inputs: dict[str, ir.Value], hooks: Hooks) -> dict[str, ir.Value]:
    """Emit f's semantics at b's position (blocks are added to b's function); returns the outputs."""
    return _Emitter(b, f, lanes, inputs, hooks).run()


class _LoopMask:
    """The predicate of a vector loop's body: lanes that have not left the loop (a Break clears them)."""

    def __init__(self, slot: ir.AllocaInstr):
        self.slot = slot


class _Emitter(IntOps):
    """Emits one Func: variables, predicates, statements, expressions (integer operations: IntOps; float ones:
    emu.pcode.llvmfloats)."""

    def __init__(self, b: ir.IRBuilder, f: Func, wave: int, inputs: dict, hooks: Hooks):
        self.b, self.f, self.wave, self.inputs, self.hooks = b, f, wave, inputs, hooks
        self.n = wave if f.vector else None
        mode = inputs.get("MODE", I32(DEFAULT_MODE))
        # a constant MODE is an int: the float ops then emit only its rounding mode
        self.mode = int(mode.constant) & 0xFFFFFFFF if isinstance(mode, ir.Constant) and isinstance(
            mode.constant, int) else resize(b, mode, 32)
        self.active = inputs.get("ACTIVE")
        looped = loop_vars(f.body)
        self.uniform = (set(f.masks) | {"MODE"} | looped) if f.vector else set(f.vars)
        self.slots: dict[str, ir.AllocaInstr] = {}
        self.loops: list[tuple[ir.Block, _LoopMask | None]] = []  # enclosing loops: exit block, vector mask
        self.loop_vars = looped
        # MODE's value when it is a compile-time constant the body never assigns: uniform conditions on it fold
        self.mode_const = self.mode if isinstance(self.mode, int) and "MODE" not in assigned(f.body) else None

    # ---- variables ---------------------------------------------------------------------------------------------
    def var_type(self, var: str) -> ir.Type:
        t = scalar_type(self.f.vars[var])
        return like(t, None if var in self.uniform else self.n)

    def run(self) -> dict[str, ir.Value]:
        f, b = self.f, self.b
        for var in f.vars:
            if var in self.loop_vars:
                self.slots[var] = entry_alloca(self.b, self.var_type(var), name=var)
                continue
            t = self.var_type(var)
            if var in f.arrays:
                t = ir.ArrayType(t, f.arrays[var])
            self.slots[var] = slot = entry_alloca(self.b, t, name=var)
            if var in f.arrays:
                b.store(ir.Constant(t, None), slot)
            elif var in f.inputs:
                b.store(self.input(var), slot)
            else:
                b.store(const(t, 0, self.n if isinstance(t, ir.VectorType) else None), slot)
        self.block(f.body, None)
        return {name: self.output(name, bits) for name, bits in f.outputs.items()}

    def input(self, var: str) -> ir.Value:
        t = self.var_type(var)
        if var == "MODE" and var not in self.inputs:  # pyback's default: nearest even, denormals kept
            return const(t, DEFAULT_MODE)
        if var not in self.inputs:
            raise ValueError(f"{self.f.name}: input {var} not given")
        v = self.inputs[var]
        if lanes(v) != (t.count if isinstance(t, ir.VectorType) else None):
            raise ValueError(f"{self.f.name}: input {var} is {v.type}, expected {t} lanes")
        return self.fit(v, elem(t))

    def fit(self, v: ir.Value, t: ir.Type) -> ir.Value:
        """An integer value resized (raw bits) to integer type t; floats must match."""
        if elem(v.type) == t:
            return v
        if not isinstance(t, ir.IntType) or not isinstance(elem(v.type), ir.IntType):
            raise Unsupported(f"value of {v.type} where {t} is needed")
        return resize(self.b, v, t.width)

    def output(self, name: str, bits: int) -> ir.Value:
        v = self.b.load(self.slots[name], typ=self.var_type(name))
        if not isinstance(elem(v.type), ir.IntType):
            raise Unsupported(f"output {name} of type {v.type}")
        v = resize(self.b, v, bits)
        if self.f.vector and name in self.f.masks:
            return resize(self.b, v, 64)
        return v

    # ---- predicates ---------------------------------------------------------------------------------------------
    def pred(self, m) -> ir.Value | None:
        if isinstance(m, _LoopMask):
            return self.b.load(m.slot, typ=ir.VectorType(I1, self.n))
        return m

    def full_mask(self, m) -> ir.Value:
        """<n x i1>: ACTIVE and the predicate (hooks' mask)."""
        p = self.pred(m)
        if p is None:
            p = const(I1, 1, self.n)
        if self.active is not None:
            p = self.b.and_(p, self.active)
        return p

    # ---- statements ---------------------------------------------------------------------------------------------
    def block(self, stmts: tuple, m) -> None:
        for s in stmts:
            self.stmt(s, m)

    def stmt(self, s, m) -> None:
        if isinstance(s, Assign):
            self.assign(s, m)
        elif isinstance(s, SetLaneBit):
            self.set_lane_bit(s, m)
        elif isinstance(s, Store):
            self.store(s, m)
        elif isinstance(s, If):
            self.if_(s, m) if self.f.vector else self.scalar_if(s)
        elif isinstance(s, Loop):
            self.loop(s, m)
        elif isinstance(s, Break):
            self.break_(m)
        elif isinstance(s, Fail):
            self.fail(s, m)
        else:
            raise Unsupported(f"statement {type(s).__name__}")

    def assign(self, s: Assign, m) -> None:
        b, slot, t = self.b, self.slots[s.var], self.var_type(s.var)
        val = self.ex(s.value, m)
        p = self.pred(m)
        if s.var in self.uniform and self.f.vector and (p is not None or lanes(val)):
            raise Unsupported(f"wave-wide {s.var} assigned per lane")
        if s.index is not None:
            return self.array_set(s, val, p)
        old = b.load(slot, typ=t)
        if s.width is not None:
            new = self.setbits(old, self.ex(s.lo, m), s.width, val, self.f.vars[s.var].bits)
        else:
            new = splat(b, self.fit(val, elem(t)) if isinstance(elem(t), ir.IntType) else val,
                        lanes(old)) if not lanes(val) else val
        if p is not None:
            new = b.select(p, new, old)
        b.store(new, slot)

    def array_set(self, s: Assign, val: ir.Value, p) -> None:
        """a[i] = v: per lane, lanes whose index is out of range write nothing."""
        b, slot, n = self.b, self.slots[s.var], self.f.arrays[s.var]
        t = self.var_type(s.var)
        idx = self.ex(s.index, None)
        val = splat(b, val, lanes(b.load(b.gep(slot, [I32(0), I32(0)]), typ=t)))
        for k in range(n):
            ptr = b.gep(slot, [I32(0), I32(k)])
            old = b.load(ptr, typ=t)
            hit = self.cmp_const(idx, k)
            if p is not None:
                hit = b.and_(*bcast(b, hit, p))
            b.store(select(b, hit, val, old) if (lanes(hit) or lanes(old)) else b.select(hit, val, old), ptr)

    def cmp_const(self, idx: ir.Value, k: int) -> ir.Value:
        w = elem(idx.type).width
        if k >> w:
            return const(I1, 0, lanes(idx))
        return self.b.icmp_unsigned("==", idx, const(idx.type, k, lanes(idx)))

    def set_lane_bit(self, s: SetLaneBit, m) -> None:
        """Bit laneId of the mask var = value, for the lanes of the predicate."""
        b, slot = self.b, self.slots[s.var]
        t = self.var_type(s.var)
        v = self.ex(s.value, m)
        if not self.f.vector:
            raise Unsupported("SetLaneBit in a scalar instruction")
        n = self.n
        v = splat(b, v, n)
        p = self.pred(m)
        on = v if p is None else b.and_(v, p)
        on = resize(b, b.bitcast(on, ir.IntType(n)), t.width)
        old = b.load(slot, typ=t)
        if p is None:
            touched = const(t, (1 << n) - 1)
        else:
            touched = resize(b, b.bitcast(p, ir.IntType(n)), t.width)
        b.store(b.or_(b.and_(old, b.not_(touched)), on), slot)

    def store(self, s: Store, m) -> None:
        b = self.b
        idx = tuple(self.hookval(self.ex(x, m)) for x in s.addr)
        val = self.hookval(self.ex(s.value, m))
        if not isinstance(elem(val.type), ir.IntType):
            raise Unsupported(f"store of a {val.type} value")
        mask = self.full_mask(m) if self.f.vector else I1(1)
        if s.file in ("MEM", "LDS"):
            self.hooks.store(b, s.file, idx[0], val, s.bits, mask)
        elif s.file == "FORMAT":
            raise Unsupported("formatted buffer store")
        else:
            self.hooks.reg_write(b, s.file, idx, val, s.bits, mask)

    def hookval(self, v: ir.Value) -> ir.Value:
        return splat(self.b, v, self.n)

    def if_(self, s: If, m) -> None:
        b = self.b
        k = self.fold(s.cond)
        if k is not None:  # decided at compile time (MODE a constant): only the branch taken
            self.block(s.then if k else s.orelse, m)
            return
        c = self.ex(s.cond, m)
        if lanes(c) and flat(s):  # small bodies without effects: both run under their predicates, no branches
            for body, cond in ((s.then, c), (s.orelse, None)):
                if body:
                    cond = b.not_(c) if cond is None else cond
                    p = self.pred(m)
                    self.block(body, cond if p is None else b.and_(p, cond))
            return
        if not lanes(c) and not isinstance(m, _LoopMask):  # uniform condition: a plain branch, same predicate
            with b.if_else(c) as (then, other):
                with then:
                    self.block(s.then, m)
                with other:
                    self.block(s.orelse, m)
            return
        c = splat(b, c, self.n)
        for body, cond in ((s.then, c), (s.orelse, None)):
            if not body:
                continue
            if cond is None:
                cond = b.not_(c)
            p = self.pred(m)
            mm = cond if p is None else b.and_(p, cond)
            with b.if_then(any_lane(b, mm)):
                self.block(body, mm)

    def scalar_if(self, s: If) -> None:
        k = self.fold(s.cond)
        if k is not None:
            self.block(s.then if k else s.orelse, None)
            return
        c = self.ex(s.cond, None)
        with self.b.if_else(c) as (then, other):
            with then:
                self.block(s.then, None)
            with other:
                self.block(s.orelse, None)

    def loop(self, s: Loop, m) -> None:
        """for var in lo .. hi (uniform, inclusive); a vector loop also ends once every lane has left it."""
        b = self.b
        lo, hi = (resize(b, lane0(b, self.ex(x, m)), 64) for x in (s.lo, s.hi))
        vt = self.var_type(s.var)
        fn = b.function
        head, body, exit_ = (fn.append_basic_block(f"{s.var}.{k}") for k in ("head", "body", "exit"))
        ctr = entry_alloca(self.b, I64, name=f"{s.var}.i")
        b.store(lo, ctr)
        mb = None
        if self.f.vector:
            mb = entry_alloca(self.b, ir.VectorType(I1, self.n), name=f"{s.var}.mask")
            p = self.pred(m)
            b.store(p if p is not None else const(I1, 1, self.n), mb)
        b.branch(head)
        b.position_at_end(head)
        i = b.load(ctr, typ=I64)
        b.cbranch(b.icmp_unsigned("<=", i, hi), body, exit_)
        b.position_at_end(body)
        b.store(resize(b, i, vt.width), self.slots[s.var])
        lm = _LoopMask(mb) if mb is not None else None
        self.loops.append((exit_, lm))
        self.block(s.body, lm if lm is not None else m)
        self.loops.pop()
        if not b.block.is_terminated:
            done = b.icmp_unsigned("==", i, hi)
            if mb is not None:
                done = b.or_(done, b.not_(any_lane(b, b.load(mb, typ=mb.allocated_type))))
            b.store(b.add(i, I64(1)), ctr)
            b.cbranch(done, exit_, head)
        b.position_at_end(exit_)

    def break_(self, m) -> None:
        b = self.b
        if not self.loops:
            raise Unsupported("break outside a loop")
        exit_, loop_m = self.loops[-1]
        if loop_m is None:
            b.branch(exit_)
            b.position_at_end(b.function.append_basic_block("after.break"))
            return
        cur = b.load(loop_m.slot, typ=loop_m.slot.allocated_type)
        p = self.pred(m)
        b.store(const(I1, 0, self.n) if p is None else b.and_(cur, b.not_(p)), loop_m.slot)

    def fail(self, s: Fail, m) -> None:
        b = self.b
        if not self.f.vector:
            self.hooks.fail(b, I1(1), s.reason)
            return
        p = self.pred(m)
        mask = p if p is not None else const(I1, 1, self.n)
        with b.if_then(any_lane(b, mask)):
            self.hooks.fail(b, mask, s.reason)

    # ---- expressions --------------------------------------------------------------------------------------------
    def fold(self, e: Expr) -> int | None:
        """The value of a condition over constants and a constant MODE, or None (not known at compile time)."""
        if isinstance(e, Const):
            return int(e.value) if not e.ty.is_float else None
        if isinstance(e, Var):
            return self.mode_const if e.name == "MODE" else None
        if not isinstance(e, Op) or e.op not in FOLD or (e.op == "shr" and e.ty.kind == "i"):
            return None
        a = [self.fold(x) for x in e.args]
        if any(x is None for x in a):
            return None
        bits = e.ty.bits
        return FOLD[e.op](a, e.attr) & ((1 << bits) - 1 if bits else 1)

    def ex(self, e: Expr, m) -> ir.Value:
        if isinstance(e, Const):
            return FL.constant(self.b, e.value, e.ty) if e.ty.is_float else int_const(e)
        if isinstance(e, Var):
            if e.name in self.f.arrays:
                raise Unsupported(f"array {e.name} used as a value")
            return self.b.load(self.slots[e.name], typ=self.var_type(e.name))
        if not isinstance(e, Op):
            raise Unsupported(f"IR node {type(e).__name__}")
        if e.op == "elem":
            return self.array_get(e, m)
        if e.op in NAN_BLIND and len(e.args) == 1 and widening(e.args[0]):  # as well on the narrower value
            e = dataclasses.replace(e, args=e.args[0].args[:1])
        elif e.op == "fconv":
            e = round_trip(e)
            if not isinstance(e, Op):
                return self.ex(e, m)
        if e.op in COMPARES:  # a compare sees values only: a widened operand is a plain fpext
            a = [ext(self.b, self.ex(x.args[0], m), FTY[x.ty.bits]) if widening(x) else self.ex(x, m)
                 for x in e.args]
        else:
            a = [self.ex(x, m) for x in e.args]
        if e.ty.is_float or any(x.ty.is_float for x in e.args):
            return FL.op(self.b, e, a, self.mode)
        fn = getattr(self, "op_" + e.op, None)
        if fn is None:
            raise Unsupported(f"no LLVM lowering for op {e.op}")
        return fn(e, a, m)

    def array_get(self, e: Op, m) -> ir.Value:
        """a[i]; per lane, an index past the end reads the last element (as pyback's per-lane path)."""
        b = self.b
        var = e.args[0].name
        slot, n, t = self.slots[var], self.f.arrays[var], self.var_type(var)
        idx = self.ex(e.args[1], m)
        r = None
        for k in reversed(range(n)):
            v = b.load(b.gep(slot, [I32(0), I32(k)]), typ=t)
            r = v if r is None else select(b, self.cmp_const(idx, k), v, r)
        return r

    # operations that reach beyond the values ------------------------------------------------------------------
    def op_lane_id(self, e, a, m):
        t = scalar_type(e.ty)
        if not self.n:
            return t(0)
        return ir.Constant(ir.VectorType(t, self.n), [t(i) for i in range(self.n)])

    def op_wave64(self, e, a, m):
        return I1(self.wave == 64)

    def op_load(self, e, a, m):
        mask = self.full_mask(m) if self.f.vector else I1(1)
        return self.hooks.load(self.b, e.attr, self.hookval(a[0]), e.ty.bits, mask)

    def op_reg_read(self, e, a, m):
        mask = self.full_mask(m) if self.f.vector else I1(1)
        return self.hooks.reg_read(self.b, e.attr, tuple(self.hookval(x) for x in a), e.ty.bits, mask)

    def op_callout(self, e, a, m):
        return self.hooks.callout(self.b, e.attr, tuple(self.hookval(x) for x in a))

    def op_fmt_offset(self, e, a, m):
        raise Unsupported("formatted buffer op")

    op_fmt_load = op_fmt_offset
