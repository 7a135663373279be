"""LLVM backend: typed IR (emu.dsp.ir) of one instruction's semantics -> LLVM IR inline in a caller's function.

The same C semantics as emu.dsp.pyback: integers are LLVM integers of their type's width (wrap-around for free,
signedness picks sext/zext, ashr/lshr, sdiv/udiv); HVX vectors, pairs and vector predicates live in memory (an
alloca of 128, 256 or 16 bytes, handled by pointer) and lanes are loads and stores at `index mod lanes`, so no
index reaches outside its vector. Everything an instruction does to the core (registers outside its operands,
predicates, memory, the branch) goes through a `Core` the caller provides, which emits the code for it.
Floats are LLVM floats and doubles (emu.dsp.llvmfloat): an instruction that uses them keeps its IEEE exception
flags in an i32 the caller gives (`flags`, emu.dsp.ieee's bits) and rounds to nearest, so the caller runs it only
while USR's rounding mode is nearest; the `:chop` forms' conversions truncate. Instructions that use what this
backend does not do (other rounding, binary64 products, gather/scatter, ...) raise Unsupported.
"""
from __future__ import annotations

import dataclasses
from typing import Protocol

from llvmlite import ir as ll

from emu.dsp import ieee, ir
from emu.dsp.llvmfloat import F, float_type
from emu.dsp.lower import Semantics

PTR = ll.PointerType()
I1, I8, I32, I64 = ll.IntType(1), ll.IntType(8), ll.IntType(32), ll.IntType(64)
VEC_BYTES = {"vec": 128, "pair": 256, "qreg": 16}
_BINOPS = {"+": "add", "-": "sub", "*": "mul", "&": "and_", "|": "or_", "^": "xor"}
_CMP = ("==", "!=", "<", ">", "<=", ">=")


class Unsupported(Exception):
    """The semantics use something this backend (or its core) does not compile: the instruction stays interpreted."""


class Core(Protocol):
    """What the emitted semantics ask of the core model: each method emits code at the builder's position."""
    def prim(self, g: Emitter, x: ir.Prim, args: list) -> ll.Value | None: ...


def int_type(t: ir.Type) -> ll.IntType:
    if t.kind != "int":
        raise Unsupported(f"{t} value")
    return ll.IntType(t.bits)


def value_type(t: ir.Type) -> ll.Type:
    """The LLVM type of a scalar (integer or float) value of type t."""
    return float_type(t.bits) if t.kind == "float" else int_type(t)


_FENV = frozenset({"fRAISEFLAGS", "fFPCANCELFLAGS", "fFPSETROUND_CHOP", "fFPSETROUND_NEAREST"})
_USES_FLOAT: dict[str, bool] = {}


def uses_float(sem: Semantics) -> bool:
    """Whether an instruction's semantics compute with floats or touch the floating-point environment."""
    found = _USES_FLOAT.get(sem.tag)
    if found is None:
        def visit(x) -> bool:
            if isinstance(x, tuple):
                return any(visit(y) for y in x)
            if not dataclasses.is_dataclass(x):
                return False
            if isinstance(x, ir.Type):
                return x.kind == "float"
            if isinstance(x, ir.Prim) and x.name in _FENV:
                return True
            return any(visit(getattr(x, f.name)) for f in dataclasses.fields(x))
        found = _USES_FLOAT[sem.tag] = visit(sem.body)
    return found


def alloca(b: ll.IRBuilder, ty: ll.Type) -> ll.Value:
    """An alloca handled through an untyped pointer (a lane or half of a vector is reached at any element type)."""
    a = b.alloca(ty)
    a.type = PTR
    return a


def resize(b: ll.IRBuilder, v: ll.Value, signed: bool, bits: int) -> ll.Value:
    """v (an integer of the given signedness) as an integer of `bits` bits, as a C conversion does."""
    have = v.type.width
    if have == bits:
        return v
    if have > bits:
        return b.trunc(v, ll.IntType(bits))
    return b.sext(v, ll.IntType(bits)) if signed else b.zext(v, ll.IntType(bits))


class Emitter:
    """Emits one instruction's semantics into `b`'s function. `alloca(type)` must give entry-block storage."""

    def __init__(self, b: ll.IRBuilder, alloca, core: Core, sem: Semantics, flags: ll.Value | None = None):
        self.b, self.alloca, self.core, self.sem, self.flags = b, alloca, core, sem, flags
        self.chop = False  # fFPSETROUND_CHOP ran: conversions truncate (no other rounding is done here)
        self.vars: dict[tuple[str, ir.Type], ll.Value] = {}
        self.loops: list[tuple[ll.Block, ll.Block]] = []  # (break target, continue target)
        self.done = self.b.append_basic_block("done")
        self.cancel = self.b.append_basic_block("cancel")

    # ---- storage ----
    def vector(self, kind: str) -> ll.Value:
        return self.alloca(ll.VectorType(I8, VEC_BYTES[kind]))

    def var(self, v: ir.Var) -> ll.Value:
        key = (v.name, v.t)
        slot = self.vars.get(key)
        if slot is None:
            slot = self.vars[key] = self.vector(v.t.kind) if v.t.kind in VEC_BYTES else self.alloca(value_type(v.t))
        return slot

    def copy(self, dst: ll.Value, src: ll.Value, kind: str) -> None:
        t = ll.VectorType(I8, VEC_BYTES[kind])
        self.b.store(self.b.load(src, typ=t, align=1), dst, align=1)  # a register in the state: unaligned

    def fresh_vector(self, kind: str, src: ll.Value | None = None) -> ll.Value:
        out = self.vector(kind)
        if src is None:
            self.b.store(ll.Constant(ll.VectorType(I8, VEC_BYTES[kind]), None), out)
        else:
            self.copy(out, src, kind)
        return out

    # ---- the instruction ----
    def run(self, inputs: dict[str, ll.Value]) -> dict[str, ll.Value]:
        """Emit the body; inputs by operand name (integers as values, vectors as pointers, read-only). Returns
        the outputs' storage (read them at `self.done`); a cancelled slot ends at `self.cancel`."""
        sem, b = self.sem, self.b
        outs = {n for n, _ in sem.outputs}
        for n, t in sem.inputs:
            slot = self.var(ir.Var(t, n))
            if t.kind in VEC_BYTES:
                self.copy(slot, inputs[n], t.kind)
            else:
                b.store(resize(b, inputs[n], t.signed, t.bits), slot)
        ins = {n for n, _ in sem.inputs}
        for n, t in sem.outputs:
            if n not in ins:
                slot = self.var(ir.Var(t, n))
                b.store(ll.Constant(slot.allocated_type, None), slot)
        self.b.store(ll.Constant(I32, 0), self.var(ir.Var(ir.U32, "EA")))
        self.first = b.block
        self.stmts(sem.body)
        if not b.block.is_terminated:
            b.branch(self.done)
        return {n: self.var(ir.Var(t, n)) for n, t in sem.outputs if n in outs}

    # ---- statements ----
    def stmts(self, body: tuple) -> None:
        for s in body:
            if self.b.block.is_terminated:  # code after break/continue/return: unreachable
                self.b.position_at_end(self.b.append_basic_block("dead"))
            self.stmt(s)

    def stmt(self, s) -> None:
        b = self.b
        if isinstance(s, ir.Set):
            self.assign(s.target, s.value)
        elif isinstance(s, ir.Do):
            self.expr(s.x)
        elif isinstance(s, ir.Local):
            slot = self.var(s.var)
            if s.var.t.kind in VEC_BYTES:
                b.store(ll.Constant(slot.allocated_type, None), slot)
        elif isinstance(s, ir.If):
            c = self.truth(s.c)
            then, orelse, end = (b.append_basic_block(n) for n in ("then", "else", "endif"))
            b.cbranch(c, then, orelse)
            for bb, body in ((then, s.then), (orelse, s.orelse)):
                b.position_at_end(bb)
                self.stmts(body)
                if not b.block.is_terminated:
                    b.branch(end)
            b.position_at_end(end)
        elif isinstance(s, ir.Loop):
            head, body, latch, end = (b.append_basic_block(n) for n in ("head", "body", "latch", "endloop"))
            b.branch(head if s.test_first else body)
            b.position_at_end(head)
            if s.test_first:
                self.stmts(s.pre)
                b.cbranch(self.truth(s.c), body, end)
            else:
                b.branch(body)
            b.position_at_end(body)
            self.loops.append((end, latch))
            self.stmts(s.body)
            self.loops.pop()
            if not b.block.is_terminated:
                b.branch(latch)
            b.position_at_end(latch)
            if s.test_first:
                self.stmts(s.step)
                b.branch(head)
            else:
                self.stmts(s.pre)
                b.cbranch(self.truth(s.c), body, end)
            b.position_at_end(end)
        elif isinstance(s, ir.Jump):
            if s.kind in ("break", "continue"):
                if not self.loops:
                    raise Unsupported(f"{s.kind} outside a loop")
                b.branch(self.loops[-1][0 if s.kind == "break" else 1])
            else:
                b.branch(self.cancel if s.kind == "cancel" else self.done)
        else:
            raise Unsupported(f"statement {type(s).__name__}")

    def assign(self, target, value) -> None:
        if isinstance(target, ir.Var) and target.t.kind == "float":
            if value.t != target.t:
                raise Unsupported(f"{value.t} assigned to {target.t}")
            self.b.store(self.expr(value), self.var(target))
        elif isinstance(target, ir.Var) and target.t.kind not in VEC_BYTES:
            v = self.expr(value)
            self.b.store(resize(self.b, v, value.t.signed, target.t.bits), self.var(target))
        elif isinstance(target, ir.Var) or isinstance(target, ir.Half):
            kind = target.t.kind
            src = self.expr(value)
            self.copy(self.vector_ptr(target) if isinstance(target, ir.Half) else self.var(target), src, kind)
        elif isinstance(target, ir.Lane):
            v = self.expr(value)
            self.b.store(resize(self.b, v, value.t.signed, target.t.bits), self.lane(target))
        else:
            raise Unsupported("assignment target")

    # ---- expressions: integers as LLVM values of their type's width, vectors as pointers ----
    def truth(self, x) -> ll.Value:
        v = self.expr(x)
        if x.t.kind == "float":  # C: nonzero (a NaN is true)
            return self.b.fcmp_unordered("!=", v, ll.Constant(v.type, 0.0))
        return self.b.icmp_unsigned("!=", v, ll.Constant(v.type, 0))

    def vector_ptr(self, x) -> ll.Value:
        if isinstance(x, ir.Half):
            k = self.b.and_(resize(self.b, self.expr(x.index), x.index.t.signed, 64), ll.Constant(I64, 1))
            base = self.vector_ptr(x.pair)
            return self.b.gep(base, [self.b.mul(k, ll.Constant(I64, 128))], source_etype=I8)
        return self.expr(x)

    def lane(self, x: ir.Lane) -> ll.Value:
        """The address of lane `index` (mod the lane count) of a vector / vector predicate."""
        base = self.vector_ptr(x.vec)
        count = VEC_BYTES[x.vec.t.kind] * 8 // x.t.bits
        k = self.b.and_(resize(self.b, self.expr(x.index), x.index.t.signed, 64), ll.Constant(I64, count - 1))
        return self.b.gep(base, [k], source_etype=ll.IntType(x.t.bits))

    def expr(self, x) -> ll.Value:
        b = self.b
        if isinstance(x, ir.Const):
            if x.t.kind == "float":
                return ll.Constant(float_type(x.t.bits), float(x.value))
            return ll.Constant(int_type(x.t), x.value & ((1 << x.t.bits) - 1))
        if isinstance(x, ir.Var):
            slot = self.var(x)
            return slot if x.t.kind in VEC_BYTES else b.load(slot, typ=value_type(x.t))
        if isinstance(x, ir.Bin):
            return self.binary(x)
        if isinstance(x, ir.Un):
            if x.op == "!":
                return b.zext(b.not_(self.truth(x.x)), int_type(x.t))
            v = self.expr(x.x)
            if x.t.kind == "float":
                if x.op != "-" or x.x.t != x.t:
                    raise Unsupported(f"float {x.op}")
                return self.floats().quiet(b.fneg(v))  # as ieee's -x: an SNaN operand gives a plain NaN
            v = resize(b, v, x.x.t.signed, x.t.bits)
            return b.neg(v) if x.op == "-" else b.not_(v)
        if isinstance(x, ir.Conv):
            if x.t.kind == "int" and x.x.t.kind == "int":
                return resize(b, self.expr(x.x), x.x.t.signed, x.t.bits)
            return self.convert(x.t, x.x)
        if isinstance(x, ir.Select):
            return self.choose(x.c, lambda: self.expr(x.a), lambda: self.expr(x.b), x.t)
        if isinstance(x, ir.Lane):
            return b.load(self.lane(x), typ=ll.IntType(x.t.bits))
        if isinstance(x, ir.Half):
            return self.vector_ptr(x)
        if isinstance(x, ir.Prim):
            return self.prim(x)
        raise Unsupported(f"expression {type(x).__name__}")

    def choose(self, c, a, bfn, t: ir.Type) -> ll.Value:
        """C's `c ? a : b`: only the chosen arm is evaluated (it may load)."""
        b = self.b
        cond = self.truth(c)
        yes, no, end = (b.append_basic_block(n) for n in ("sel_a", "sel_b", "sel_end"))
        b.cbranch(cond, yes, no)
        vals = []
        for bb, fn in ((yes, a), (no, bfn)):
            b.position_at_end(bb)
            v = fn()
            if t.kind == "int":
                v = resize(b, v, True, t.bits)  # both arms already have type t
            vals.append((v, b.block))
            b.branch(end)
        b.position_at_end(end)
        phi = b.phi(vals[0][0].type)
        for v, bb in vals:
            phi.add_incoming(v, bb)
        return phi

    def binary(self, x: ir.Bin) -> ll.Value:
        b, op, t = self.b, x.op, x.t
        if op in ("&&", "||"):
            short = ll.Constant(int_type(t), 1 if op == "||" else 0)
            then = (lambda: b.zext(self.truth(x.b), int_type(t)))
            if op == "&&":
                return self.choose(x.a, then, lambda: short, t)
            return self.choose(x.a, lambda: short, then, t)
        if x.a.t.kind == "float" and x.b.t == x.a.t:
            return self.float_binary(x)
        if x.a.t.kind != "int" or x.b.t.kind != "int":
            raise Unsupported(f"{x.a.t} {op} {x.b.t}")
        if op in _CMP:
            a, c = self.expr(x.a), self.expr(x.b)
            signed = x.a.t.signed
            bits = max(a.type.width, c.type.width)
            a, c = resize(b, a, x.a.t.signed, bits), resize(b, c, x.b.t.signed, bits)
            cmp = b.icmp_signed(op, a, c) if signed else b.icmp_unsigned(op, a, c)
            return b.zext(cmp, int_type(t))
        a = resize(b, self.expr(x.a), x.a.t.signed, t.bits)
        if op in ("<<", ">>"):
            n = self.expr(x.b)
            n = b.and_(resize(b, n, x.b.t.signed, t.bits), ll.Constant(int_type(t), t.bits - 1))  # x86 masks
            if op == "<<":
                return b.shl(a, n)
            return b.ashr(a, n) if t.signed else b.lshr(a, n)
        c = resize(b, self.expr(x.b), x.b.t.signed, t.bits)
        if op in _BINOPS:
            return getattr(b, _BINOPS[op])(a, c)
        if op in ("/", "%"):
            return self.divide(op, a, c, t)
        raise Unsupported(f"operator {op}")

    # ---- floats ----
    def floats(self, rounds: bool = False) -> F:
        """The float operations; `rounds`: the caller's operation rounds (only to nearest here)."""
        if self.flags is None:
            raise Unsupported("floats outside a core that keeps USR's flags")
        if rounds and self.chop:
            raise Unsupported("rounding toward zero")
        return F(self.b, self.flag)

    def flag(self, cond: ll.Value, bits: int) -> None:
        b = self.b
        b.store(b.or_(b.load(self.flags, typ=I32), b.select(cond, ll.Constant(I32, bits), ll.Constant(I32, 0))),
                self.flags)

    def float_binary(self, x: ir.Bin) -> ll.Value:
        a, c = self.expr(x.a), self.expr(x.b)
        if x.op in _CMP:
            return self.b.zext(self.floats().compare(x.op, a, c), int_type(x.t))
        if x.op not in ("+", "-", "*") or (x.op == "*" and x.t.bits == 64):
            raise Unsupported(f"{x.t} {x.op}")
        return self.floats(rounds=True).arith(x.op, a, c)

    def convert(self, t: ir.Type, x) -> ll.Value:
        """A C conversion involving a float (as pyback's): casts to integers truncate whatever the rounding."""
        v, f = self.expr(x), x.t
        if t.kind == "int" and f.kind == "float":
            return self.floats().to_int(v, t.bits, t.signed, nearest=False)
        if t.kind == "float" and f.kind == "int":
            return self.floats(rounds=True).from_int(v, f.signed, float_type(t.bits))
        if t.kind == "float" and f.kind == "float":
            if t.bits == f.bits:
                return v
            return self.floats().widen(v) if t.bits > f.bits else self.floats(rounds=True).narrow(v)
        raise Unsupported(f"conversion {f} to {t}")

    def float_prim(self, x: ir.Prim, args: list) -> ll.Value | None:
        """The float primitives (emu.dsp.ieee), or NotImplemented."""
        b, n = self.b, x.name
        if n in ("fFLOAT", "fDOUBLE"):
            bits = 32 if n == "fFLOAT" else 64
            return b.bitcast(self.arg(x, args, 0, bits), float_type(bits))
        if n in ("fUNFLOAT", "fUNDOUBLE"):
            ity = ll.IntType(32 if n == "fUNFLOAT" else 64)
            return b.select(self.floats().isnan(args[0]), ll.Constant(ity, -1), b.bitcast(args[0], ity))
        if n in ("fRAISEFLAGS", "fFPCANCELFLAGS"):
            self.floats()  # the flags must be the core's
            if n == "fFPCANCELFLAGS":
                b.store(ll.Constant(I32, 0), self.flags)
            else:
                self.flag(ll.Constant(I1, 1), ieee.FLAGS[x.args[0]])
            return None
        if n in ("fFPSETROUND_CHOP", "fFPSETROUND_NEAREST"):
            if len(self.loops) or b.block is not self.first:
                raise Unsupported(f"{n} under a condition")
            self.chop = n == "fFPSETROUND_CHOP"
            return None
        if n == "internal_mpyf":
            return self.floats(rounds=True).arith("*", args[0], args[1])
        if n == "internal_fmafx":
            if not (isinstance(x.args[3], ir.Const) and x.args[3].value == 0):
                raise Unsupported("a scaled fused multiply-add")
            return self.floats(rounds=True).fma32(*args[:3])
        if n in ("fmax", "fmaxf", "fmin", "fminf"):
            return self.floats().minmax(n[1:4], args[0], args[1])
        if n.startswith("conv_"):
            dst = n.partition("_to_")[2]
            if dst in ("sf", "df"):
                ty = float_type(32 if dst == "sf" else 64)
                if x.args[0].t.kind == "int":
                    return self.floats(rounds=True).from_int(args[0], x.args[0].t.signed, ty)
                return self.floats().extend(args[0]) if dst == "df" else self.floats(rounds=True).narrow(args[0])
            return self.floats().to_int(args[0], 8 * int(dst[0]), dst[1] == "s", nearest=not self.chop)
        if n in ("isnan", "isinf", "isfinite", "isunordered"):
            fo = self.floats()
            if n == "isunordered":
                return b.zext(b.or_(fo.isnan(args[0]), fo.isnan(args[1])), int_type(x.t))
            return b.zext({"isnan": fo.isnan, "isinf": fo.isinf, "isfinite": fo.finite}[n](args[0]), int_type(x.t))
        if n == "fpclassify":
            return resize(b, self.floats().fpclassify(args[0]), True, int_type(x.t).width)
        if n in ("fDF_ISNORMAL", "fDF_ISDENORM"):
            c = self.floats().fpclassify(b.bitcast(self.arg(x, args, 0, 64), float_type(64)))
            return b.zext(b.icmp_unsigned("==", c, ll.Constant(I32, 4 if n == "fDF_ISNORMAL" else 3)), int_type(x.t))
        return NotImplemented

    def divide(self, op: str, a: ll.Value, c: ll.Value, t: ir.Type) -> ll.Value:
        """C division (toward zero) without LLVM's undefined cases: x/0 is 0 and x%0 is x (as pyback's cdiv);
        MIN/-1 wraps."""
        b, ty = self.b, int_type(t)
        zero, one = ll.Constant(ty, 0), ll.Constant(ty, 1)
        is_zero = b.icmp_unsigned("==", c, zero)
        if t.signed:
            is_m1 = b.icmp_unsigned("==", c, ll.Constant(ty, (1 << t.bits) - 1))
            safe = b.select(b.or_(is_zero, is_m1), one, c)
            q = b.sdiv(a, safe) if op == "/" else b.srem(a, safe)
            q = b.select(is_m1, b.neg(a) if op == "/" else zero, q)
        else:
            safe = b.select(is_zero, one, c)
            q = b.udiv(a, safe) if op == "/" else b.urem(a, safe)
        return b.select(is_zero, zero if op == "/" else a, q)

    # ---- primitives ----
    def prim(self, x: ir.Prim):
        args = [a if isinstance(a, str) else self.expr(a) for a in x.args]
        out = self.core.prim(self, x, args)
        if out is NotImplemented:
            out = self.pure(x, args)
        return out

    def arg(self, x: ir.Prim, args: list, k: int, bits: int) -> ll.Value:
        return resize(self.b, args[k], x.args[k].t.signed, bits)

    def intrinsic(self, name: str, ty: ll.Type, args: list) -> ll.Value:
        m = self.b.module
        fn = m.globals.get(name) or ll.Function(m, ll.FunctionType(ty, [a.type for a in args]), name)
        return self.b.call(fn, args)

    def pure(self, x: ir.Prim, args: list) -> ll.Value | None:
        """The stateless primitives (emu.dsp.runtime); a void primitive unknown here has no effect on this model's
        state (as in pyback)."""
        b, n = self.b, x.name
        out = self.float_prim(x, args)
        if out is not NotImplemented:
            return out
        for stem, fn in (("count_leading_ones_", "ctlz"), ("fCL1_", "ctlz"), ("count_ones_", "ctpop"),
                         ("fCOUNTONES_", "ctpop"), ("reverse_bits_", "bitreverse"), ("fBREV_", "bitreverse")):
            if n.startswith(stem):
                bits = 8 * int(n[len(stem):])
                ty = ll.IntType(bits)
                v = self.arg(x, args, 0, bits)
                if fn == "ctlz":
                    r = self.intrinsic(f"llvm.ctlz.i{bits}", ty, [b.not_(v), ll.Constant(I1, 0)])
                else:
                    r = self.intrinsic(f"llvm.{fn}.i{bits}", ty, [v])
                return resize(b, r, False, int_type(x.t).width)
        if n == "fbrev":
            v = self.arg(x, args, 0, 32)
            lo = self.intrinsic("llvm.bitreverse.i16", ll.IntType(16), [b.trunc(v, ll.IntType(16))])
            return b.or_(b.and_(v, ll.Constant(I32, 0xFFFF0000)), b.zext(lo, I32))
        if n == "fCARRY_FROM_ADD":
            a, c, cin = (self.arg(x, args, k, 128) for k in range(3))
            m = ll.Constant(ll.IntType(128), (1 << 64) - 1)
            s = b.add(b.add(b.and_(a, m), b.and_(c, m)), b.and_(cin, ll.Constant(ll.IntType(128), (1 << 128) - 1)))
            return b.trunc(b.and_(b.lshr(s, ll.Constant(ll.IntType(128), 64)), ll.Constant(ll.IntType(128), 1)), I64)
        wide = {"fADD128": "add", "fSUB128": "sub", "fAND128": "and_"}
        if n in wide:
            return getattr(b, wide[n])(self.arg(x, args, 0, 128), self.arg(x, args, 1, 128))
        if n in ("fSHIFTL128", "fSHIFTR128"):
            a, c = self.arg(x, args, 0, 128), self.arg(x, args, 1, 128)
            return b.shl(a, c) if n == "fSHIFTL128" else b.ashr(a, c)
        if n in ("fCAST8S_16S", "fCAST16S_8S"):
            return self.arg(x, args, 0, x.t.bits)
        if n == "fNOTQ":
            out = self.vector("qreg")
            b.store(b.not_(b.load(args[0], typ=ll.IntType(128), align=1)), out)
            return out
        if n == "fCRNDN":
            a, c = self.arg(x, args, 0, 64), self.arg(x, args, 1, 64)
            one = ll.Constant(I64, 1)
            half = b.shl(one, b.sub(c, one))
            below = b.and_(a, b.sub(half, one))
            inc = b.select(b.icmp_unsigned("==", below, ll.Constant(I64, 0)),
                           b.shl(b.and_(b.ashr(a, c), one), b.sub(c, one)), half)
            r = b.trunc(b.ashr(b.add(a, inc), c), I32)
            return b.select(b.icmp_unsigned("==", c, ll.Constant(I64, 0)), b.trunc(a, I32), r)
        if x.t == ir.VOID and n not in _PURE_KNOWN:
            return None
        raise Unsupported(f"primitive {n}")


# stateless primitives pyback has implementations of that this backend does not (so they are not no-ops)
_PURE_KNOWN = frozenset({"fINTERLEAVE", "fDEINTERLEAVE"})
