"""The wave's flat state as the LLVM tier's code reads and writes it (emu.amd.exec.translate): the SGPR file's slots
and register pairs, VGPR rows as lane vectors, scalar operand codes, lane masks; and what the semantics it inlines
may touch besides (`Hooks`: nothing, unless an instruction's code gives it memory or the register file)."""
from __future__ import annotations

from llvmlite import ir

from emu.amd.exec.operands import constant
from emu.amd.exec.state import CONSTANTS, EXEC, SCC, VCC, rows
from emu.amd.regs import EXECZ, PRIVATE_BASE, PRIVATE_LIMIT, SHARED_BASE, VCCZ, storage
from emu.pcode.typed import Unsupported as PcodeUnsupported

I1, I32, I64 = ir.IntType(1), ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()


class Exit(Exception):
    """An instruction the tier does not take: the region leaves the native code before it."""


class Hooks:
    """Memory, register files and Fail are not taken natively yet: an instruction that needs them is an exit."""

    def _no(self, *a, **k):
        raise PcodeUnsupported("not in the LLVM tier: memory, register files and callouts")

    load = store = reg_read = reg_write = callout = fail = _no


class StateCode:
    """State access of emu.amd.exec.translate.Region: `s_ptr` and `v_ptr` are the function's SGPR and VGPR
    arguments; `lanes`, `full`, `null` and `m0` the wave's."""

    def vec(self, t: ir.Type) -> ir.VectorType:
        return ir.VectorType(t, self.lanes)

    def _gep(self, b, ptr, i: int, t: ir.Type):
        return b.gep(ptr, [I64(i)], source_etype=t)

    def _slot(self, b, i: int):
        return self._gep(b, self.s_ptr, i, I32)

    def _pair(self, b, i: int):
        lo = b.zext(b.load(self._slot(b, i), typ=I32), I64)
        hi = b.zext(b.load(self._slot(b, i + 1), typ=I32), I64)
        return b.or_(lo, b.shl(hi, I64(32)))

    def _set_pair(self, b, i: int, v) -> None:
        b.store(b.trunc(v, I32), self._slot(b, i))
        b.store(b.trunc(b.lshr(v, I64(32)), I32), self._slot(b, i + 1))

    def _exec(self, b):
        return self._pair(b, EXEC)

    def _row(self, b, reg: int):
        vt = ir.VectorType(I32, self.lanes)
        return b.gep(self.v_ptr, [I64(reg * self.lanes)], source_etype=I32), vt

    def _vgpr(self, b, reg: int, bits: int):
        """VGPRs reg.. as <lanes x iB> (B <= 32: the low bits of one register; more: consecutive registers)."""
        n = max(1, -(-bits // 32))
        if reg < 0 or reg + n > rows(self.gen.agprs) or bits > 128:
            raise Exit("VGPR operand out of range or wider than 128 bits")
        wide = ir.VectorType(ir.IntType(max(bits, 32 * n)), self.lanes)
        v = None
        for k in range(n):
            p, vt = self._row(b, reg + k)
            row = b.load(p, typ=vt, align=4)
            row = b.zext(row, wide) if n > 1 else row
            v = row if v is None else b.or_(v, b.shl(row, ir.Constant(wide, [32 * k] * self.lanes)))
        return fit(b, v, bits)

    def _set_vgpr(self, b, reg: int, bits: int, v, active) -> None:
        if bits % 32 or not 32 <= bits <= 128 or reg < 0 or reg + bits // 32 > rows(self.gen.agprs):
            raise Exit("VGPR destination not whole registers or out of range")
        vt = ir.VectorType(I32, self.lanes)
        parts = [fit(b, v if k == 0 else b.lshr(v, ir.Constant(v.type, [32 * k] * self.lanes)), 32)
                 for k in range(bits // 32)]
        full = b.icmp_unsigned("==", b.bitcast(active, ir.IntType(self.lanes)), ir.IntType(self.lanes)(-1))
        with b.if_else(full) as (every_lane, some_lanes):  # plain stores when EXEC is full (later loads forward)
            with every_lane:
                for k, part in enumerate(parts):
                    b.store(part, self._row(b, reg + k)[0], align=4)
            with some_lanes:
                for k, part in enumerate(parts):
                    p, _ = self._row(b, reg + k)
                    b.store(b.select(active, part, b.load(p, typ=vt, align=4)), p, align=4)

    def _set_half(self, b, reg: int, v, active, hi: bool, zero_other: bool) -> None:
        """A 16-bit result into the low or high half of VGPR reg, the other half kept (or cleared: zero_other)."""
        if reg < 0 or reg >= rows(self.gen.agprs):
            raise Exit("VGPR destination out of range")
        p, vt = self._row(b, reg)
        old = b.load(p, typ=vt, align=4)
        new = b.zext(fit(b, v, 16), vt)
        if hi:
            new = b.shl(new, ir.Constant(vt, [16] * self.lanes))
        keep = 0xFFFF if hi else 0 if zero_other else 0xFFFF0000
        if keep:
            new = b.or_(b.and_(old, ir.Constant(vt, [keep] * self.lanes)), new)
        b.store(b.select(active, new, old), p, align=4)

    def _scalar(self, b, code: int, bits: int, fmt: str, literal):
        """A scalar source as an i32/i64 value (64-bit reads of register pairs)."""
        c = constant(code, bits, fmt, literal)
        if c is not None:
            return ir.IntType(bits)(c & ((1 << bits) - 1))
        wide = bits == 64
        if code == self.null:
            return ir.IntType(bits)(0)
        if code in (VCCZ, EXECZ):
            v = b.and_(self._pair(b, VCC if code == VCCZ else EXEC), I64(self.full))
            z = b.zext(b.icmp_unsigned("==", v, I64(0)), ir.IntType(bits))
            return z
        if code == SCC:
            v = b.load(self._slot(b, SCC), typ=I32)
            return b.zext(v, I64) if wide else v
        if code in (SHARED_BASE, PRIVATE_BASE) and wide:  # an aperture base as 64 bits: the base address
            return I64(int(CONSTANTS[code]) << 32)
        if storage(code):
            if not storage(code, 2 if wide else 1):
                raise Exit("scalar register tuple out of range")
            return self._pair(b, code) if wide else b.load(self._slot(b, code), typ=I32)
        if code in (VCC, EXEC) and wide:
            return self._pair(b, code)
        if code in (self.m0, VCC, VCC + 1, EXEC, EXEC + 1) or SHARED_BASE <= code <= PRIVATE_LIMIT:
            v = b.load(self._slot(b, code), typ=I32)
            return b.zext(v, I64) if wide else v
        raise Exit(f"scalar operand code {code}")

    def _set_scalar(self, b, code: int, bits: int, v) -> None:
        """Store a scalar result (EXEC keeps only the wave's lanes, NULL drops it)."""
        wide = bits == 64
        v = fit(b, v, bits)
        if code == self.null:
            return
        if code in (EXEC, EXEC + 1):
            if wide:
                self._set_pair(b, EXEC, b.and_(v, I64(self.full)))
            elif code == EXEC or self.lanes == 64:  # wave32 has no EXEC_HI lanes
                b.store(v, self._slot(b, code))
            return
        if code == self.m0 and not wide:
            b.store(v, self._slot(b, code))
            return
        if storage(code) or code in (VCC, VCC + 1):
            n = 2 if wide else 1
            if not (storage(code, n) or VCC <= code and code + n <= VCC + 2):
                raise Exit("scalar destination tuple out of range")
            if wide:
                self._set_pair(b, code, v)
            else:
                b.store(v, self._slot(b, code))
            return
        raise Exit(f"scalar destination code {code}")

    def _shape(self, b, v, bits: int, vector: bool):
        """A Python int or LLVM integer as `iB` (or its lane splat)."""
        t = ir.IntType(bits)
        if isinstance(v, int):
            c = t(v & ((1 << bits) - 1))
            return ir.Constant(ir.VectorType(t, self.lanes), [c] * self.lanes) if vector else c
        if isinstance(v.type, ir.VectorType):
            return fit(b, v, bits)
        v = fit(b, v, bits)
        if not vector:
            return v
        vt = ir.VectorType(t, self.lanes)
        one = b.insert_element(ir.Constant(vt, ir.Undefined), v, I32(0))
        return b.shuffle_vector(one, ir.Constant(vt, ir.Undefined), ir.Constant(ir.VectorType(I32, self.lanes),
                                                                                 [0] * self.lanes))

    def _lanes(self, b, mask):
        """An i64 lane mask as <lanes x i1>."""
        return b.bitcast(b.trunc(mask, ir.IntType(self.lanes)), ir.VectorType(I1, self.lanes))

    def _mask(self, b, v):
        """A mask result (i64, or per-lane values: set where nonzero) as i64."""
        if not isinstance(v.type, ir.VectorType):
            return b.zext(v, I64) if v.type.width < 64 else b.trunc(v, I64) if v.type.width > 64 else v
        nz = b.icmp_unsigned("!=", v, ir.Constant(v.type, [0] * self.lanes))
        return b.zext(b.bitcast(nz, ir.IntType(self.lanes)), I64)


def fit(b, v, bits: int):
    """An integer (or integer vector) value zero-extended or truncated to `bits`."""
    vt = v.type
    w = (vt.element if isinstance(vt, ir.VectorType) else vt).width
    if w == bits:
        return v
    t = ir.IntType(bits) if not isinstance(vt, ir.VectorType) else ir.VectorType(ir.IntType(bits), vt.count)
    return b.trunc(v, t) if w > bits else b.zext(v, t)
