"""Integer operations of the LLVM backend's emitter (emu.pcode.llvmemit), as the reference backend computes them:
wrapping arithmetic, division by zero, shifts by any amount, bit fields, saturation."""
from __future__ import annotations

from llvmlite import ir

from emu.pcode.ir import Const, Op
from emu.pcode.llvmvalues import I1, I64, bcast, const, elem, intrinsic, lanes, like, resize, scalar_type, select
from emu.pcode.typed import Unsupported


def int_const(e: Const) -> ir.Constant:
    t = scalar_type(e.ty)
    if t == I1:
        return I1(bool(e.value))
    if not e.ty.is_int:
        raise Unsupported(f"constant of type {e.ty}")
    return const(t, int(e.value))


class IntOps:
    """The `op_<name>` methods of integer IR ops, `fn(e, a, m)` over the evaluated operands a; mixed into the emitter,
    whose builder `b` and `fit` (an integer resized to a type) they use."""

    def setbits(self, x: ir.Value, lo: ir.Value, width: int, v: ir.Value, bits: int) -> ir.Value:
        """x with bits lo .. lo+width-1 replaced by v's low bits (bits past x's width dropped)."""
        b = self.b
        if isinstance(lo, ir.Constant) and isinstance(lo.type, ir.IntType):  # a fixed field: at x's own width
            c = lo.constant
            if c >= bits:
                return resize(b, x, bits)
            xx, vv = bcast(b, resize(b, x, bits), resize(b, self.as_int(v), bits))
            n, full = lanes(xx), (1 << bits) - 1
            keep = const(xx.type, ~(((1 << width) - 1) << c) & full, n)
            vv = b.and_(vv, const(xx.type, ((1 << width) - 1) & full, n))
            return b.or_(b.and_(xx, keep), b.shl(vv, const(xx.type, c, n)) if c else vv)
        k = max(bits, width) + 64
        xx, vv = resize(b, x, k), resize(b, self.as_int(v), k)
        lo = resize(b, lo, k) if elem(lo.type).width <= k else b.select(
            b.icmp_unsigned("<", lo, const(lo.type, k, lanes(lo))), lo, const(lo.type, k - 1, lanes(lo)))
        lo = resize(b, lo, k)
        xx, vv, lo = bcast(b, xx, vv, lo)
        n = lanes(xx)
        fm = b.shl(const(xx.type, (1 << width) - 1, n), lo)
        vv = b.and_(vv, const(xx.type, (1 << width) - 1, n))
        r = b.or_(b.and_(xx, b.not_(fm)), b.shl(vv, lo))
        return resize(b, r, bits)

    def as_int(self, v: ir.Value) -> ir.Value:
        if elem(v.type) == I1:
            return self.b.zext(v, like(ir.IntType(1), lanes(v)))
        return v

    def _arith(self, e, a, m):
        x, y = (self.fit(v, scalar_type(e.ty)) for v in bcast(self.b, *a))
        return getattr(self.b, {"add": "add", "sub": "sub", "mul": "mul"}[e.op])(x, y)

    op_add = op_sub = op_mul = _arith

    def op_div(self, e, a, m):
        return self.idiv(e, a, False)

    def op_mod(self, e, a, m):
        return self.idiv(e, a, True)

    def idiv(self, e: Op, a, mod: bool) -> ir.Value:
        """Truncating division; x / 0 is all ones, x % 0 is x (pyback's L.idiv)."""
        b, bits, signed = self.b, e.ty.bits, e.ty.kind == "i"
        x, y = bcast(b, *(self.fit(v, scalar_type(e.ty)) for v in a))
        n = lanes(x)
        zero = b.icmp_unsigned("==", y, const(y.type, 0, n))
        w = bits + 1 if signed else bits
        xw, yw = resize(b, x, w, signed), resize(b, b.select(zero, const(y.type, 1, n), y), w, signed)
        if signed:
            r = b.srem(xw, yw) if mod else b.sdiv(xw, yw)
        else:
            r = b.urem(xw, yw) if mod else b.udiv(xw, yw)
        return b.select(zero, x if mod else const(x.type, -1, n), resize(b, r, bits))

    def op_neg(self, e, a, m):
        return self.b.neg(a[0])

    def op_not(self, e, a, m):
        return self.b.not_(a[0])

    def _bitop(self, e, a, m):
        x, y = bcast(self.b, *a)
        if elem(x.type) != I1:
            x, y = (self.fit(v, scalar_type(e.ty)) for v in (x, y))
        return getattr(self.b, {"and": "and_", "or": "or_", "xor": "xor", "land": "and_", "lor": "or_"}[e.op])(x, y)

    op_and = op_or = op_xor = op_land = op_lor = _bitop

    def op_lnot(self, e, a, m):
        return self.b.not_(a[0])

    def _cmp(self, e, a, m):
        x, y = bcast(self.b, *a)
        sym = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}[e.op]
        if e.args[0].ty.kind == "i":
            return self.b.icmp_signed(sym, x, y)
        return self.b.icmp_unsigned(sym, x, y)

    op_eq = op_ne = op_lt = op_le = op_gt = op_ge = _cmp

    def op_select(self, e, a, m):
        return select(self.b, *a)

    def op_shl(self, e, a, m):
        return self.shift(e, a, "shl")

    def op_shr(self, e, a, m):
        return self.shift(e, a, "ashr" if e.ty.kind == "i" else "lshr")

    def shift(self, e: Op, a, kind: str) -> ir.Value:
        """Shifts by any amount: past the width gives 0 (left, logical right) or the sign (arithmetic)."""
        b, bits = self.b, e.ty.bits
        x, s = bcast(b, self.fit(a[0], scalar_type(e.ty)), a[1])
        n = lanes(x)
        k = max(elem(s.type).width, bits.bit_length() + 1)
        s = resize(b, s, k)
        big = b.icmp_unsigned(">=", s, const(s.type, bits, n))
        amt = resize(b, b.select(big, const(s.type, bits - 1, n), s), bits)
        r = getattr(b, kind)(x, amt)
        return r if kind == "ashr" else b.select(big, const(x.type, 0, n), r)

    def op_tobool(self, e, a, m):
        x = a[0]
        if elem(x.type) == I1:
            return x
        return self.b.icmp_unsigned("!=", x, const(x.type, 0, lanes(x)))

    def op_frombool(self, e, a, m):
        return self.b.zext(a[0], like(scalar_type(e.ty), lanes(a[0])))

    def op_resize(self, e, a, m):
        return resize(self.b, a[0], e.ty.bits, e.args[0].ty.kind == "i")

    def op_extract(self, e, a, m):
        """Bits lo .. lo+width-1 of x (0 past x's width)."""
        b, width = self.b, e.attr
        x, lo = bcast(b, self.as_int(a[0]), a[1])
        k = max(elem(x.type).width, width, elem(lo.type).width)
        xx, lo = resize(b, x, k), resize(b, lo, k)
        n = lanes(xx)
        big = b.icmp_unsigned(">=", lo, const(lo.type, k, n))
        r = b.lshr(xx, b.select(big, const(lo.type, 0, n), lo))
        r = b.select(big, const(xx.type, 0, n), r)
        return resize(b, r, width)

    def op_insert(self, e, a, m):
        return self.setbits(a[0], a[1], e.attr, a[2], e.ty.bits)

    def op_concat(self, e, a, m):
        b, total = self.b, e.ty.bits
        parts = bcast(b, *(self.as_int(v) for v in a))
        r, sh = None, 0
        for v, p in reversed(list(zip(parts, e.args, strict=True))):
            w = resize(b, self.fit(v, ir.IntType(p.ty.bits)), total)
            if sh:
                w = b.shl(w, const(w.type, sh, lanes(w)))
            r = w if r is None else b.or_(r, w)
            sh += p.ty.bits
        return r

    def op_iabs(self, e, a, m):
        return intrinsic(self.b, "llvm.abs", a[0].type, [a[0], I1(0)])

    def op_popcount(self, e, a, m):
        return resize(self.b, intrinsic(self.b, "llvm.ctpop", a[0].type, [a[0]]), e.ty.bits)

    def op_bitrev(self, e, a, m):
        return intrinsic(self.b, "llvm.bitreverse", a[0].type, [a[0]])

    def op_ff1(self, e, a, m):
        b, x = self.b, a[0]
        n = lanes(x)
        r = resize(b, intrinsic(b, "llvm.cttz", x.type, [x, I1(0)]), e.ty.bits)
        return b.select(b.icmp_unsigned("==", x, const(x.type, 0, n)), const(r.type, 0xFFFFFFFF, n), r)

    def op_sext_from(self, e, a, m):
        """Sign-extend x from bit n-1 (n = 0 gives 0; n past 64 counts as 64)."""
        b = self.b
        x, nn = bcast(b, resize(b, a[0], 64), resize(b, a[1], 64))
        n = lanes(x)
        c = b.select(b.icmp_unsigned(">", nn, const(I64, 64, n)), const(I64, 64, n), nn)
        c = b.select(b.icmp_unsigned("==", c, const(I64, 0, n)), const(I64, 1, n), c)
        sh = b.sub(const(I64, 64, n), c)
        r = b.ashr(b.shl(x, sh), sh)
        r = b.select(b.icmp_unsigned("==", nn, const(I64, 0, n)), const(I64, 0, n), r)
        return resize(b, r, e.ty.bits)

    def op_sat(self, e, a, m):
        """Integer clamp to the result type's range."""
        b, s, t = self.b, e.args[0].ty, e.ty
        k = max(s.bits, t.bits) + 2
        v = resize(b, a[0], k, s.kind == "i")
        n = lanes(v)
        lo, hi = (-(1 << t.bits - 1), (1 << t.bits - 1) - 1) if t.kind == "i" else (0, (1 << t.bits) - 1)
        v = b.select(b.icmp_signed("<", v, const(v.type, lo, n)), const(v.type, lo, n), v)
        v = b.select(b.icmp_signed(">", v, const(v.type, hi, n)), const(v.type, hi, n), v)
        return resize(b, v, t.bits)
