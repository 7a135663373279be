"""Front end, second half: syntax tree -> typed IR (emu.pcode.ir); statements and assignments here, expressions
in emu.pcode.lower_expr, types and conversions in emu.pcode.typed.

Assigned names become state variables (S0, D0, VCC, ... outputs of the function) or locals. A definite-assignment
analysis over the if/loop structure decides which state names the function must also read: those read before a
full write, and those not fully written on every path (their unwritten lanes or bits keep the old value).
"""
from __future__ import annotations

from collections.abc import Callable

from emu.pcode import syntax as S
from emu.pcode.ir import (
    I64,
    U32,
    U64,
    Assign,
    Break,
    Const,
    Expr,
    Fail,
    Func,
    If,
    Loop,
    Op,
    SetLaneBit,
    Store,
    Ty,
    uint,
)
from emu.pcode.lower_expr import (
    FIXED_BITS,
    LOCAL_NAMES,
    MASK_NAMES,
    MEMORIES,
    REGFILES,
    STATE_NAMES,
    Everything,
    ExpressionLowering,
    channel_of,
    const_value,
    is_lane,
    show,
    slice_width,
)
from emu.pcode.typed import (
    Unsupported,
    bitcast_to_int,
    concrete,
    concrete_type,
    convert,
    convert_bits,
    extract,
    mask,
    to_bool,
    type_name,
)


class Lowerer(ExpressionLowering):
    def __init__(self, name: str, vector: bool, find_op: Callable[[str], str | None]):
        self.f = Func(name, vector, ())
        self.find_op = find_op  # instruction name -> its pcode (for inlined calls)
        self.out: list = []  # statements of the block being built
        self.depth = 0  # nesting of conditional blocks
        self.written: set[str] = set()  # state names written in full on every path so far
        self.covered: dict[str, int] = {}  # bits of state names written by unconditional slice assignments
        self.state_bits: dict[str, int] = {}
        self.lambdas: dict[str, S.Lambda] = {}
        self.scopes: list[dict[str, Expr | str]] = [{}]  # name -> bound value or renamed variable
        self.ninline = 0
        self.masks: set[str] = set()
        self.files: set[str] = set()
        self.file_writes: set[str] = set()
        self.lambda_result: list[str] = []
        self.locals: set[str] = set(LOCAL_NAMES)
        self.arrays_set: set[str] = set()
        self.arrays_read: set[str] = set()

    # ---- entry ------------------------------------------------------------------------------------------------
    def run(self, tree: tuple) -> Func:
        self.prescan(tree)
        body = self.block(tree)
        if unset := self.arrays_read - self.arrays_set:
            raise Unsupported(f"array {', '.join(sorted(unset))} is read but never assigned")
        for name, bits in self.f.outputs.items():  # not written on every path: unwritten lanes keep the old value
            if name not in self.written:
                self.f.inputs[name] = bits
        f = self.f
        f.body = body
        f.masks = frozenset(self.masks)
        f.files, f.file_writes = frozenset(self.files), frozenset(self.file_writes)
        return f

    def prescan(self, tree) -> None:
        """Widths of state names from their typed accesses and slices; which names are wave masks."""
        for n in S.walk(tree):
            if isinstance(n, S.Field) and isinstance(n.x, S.Name) and (t := type_name(n.name)):
                self.widen(n.x.id, t.bits)
            if isinstance(n, S.Slice) and isinstance(n.x, S.Name | S.Field):
                base = n.x.x if isinstance(n.x, S.Field) else n.x
                hi = const_value(n.hi)
                if isinstance(base, S.Name) and hi is not None:
                    self.widen(base.id, hi + 1)
            if isinstance(n, S.Index) and self.f.vector and is_lane(n.i):
                base = n.x.x if isinstance(n.x, S.Field) else n.x
                if isinstance(base, S.Name):
                    self.masks.add(base.id)
            if isinstance(n, S.Declare) and n.count is None:
                self.widen(n.name, n.bits)
        self.state_bits.update(FIXED_BITS)
        if self.f.vector:
            self.masks |= {n for n in MASK_NAMES}
        for m in self.masks:
            self.state_bits[m] = 64

    def widen(self, name: str, bits: int) -> None:
        self.state_bits[name] = max(self.state_bits.get(name, 0), bits)

    # ---- statements -------------------------------------------------------------------------------------------
    def block(self, stmts: tuple) -> tuple:
        saved, self.out = self.out, []
        for st in stmts:
            self.stmt(st)
        out, self.out = tuple(self.out), saved
        return out

    def cond_block(self, stmts: tuple) -> tuple:
        self.depth += 1
        try:
            return self.block(stmts)
        finally:
            self.depth -= 1

    def stmt(self, st: S.Node) -> None:
        if isinstance(st, S.Assign):
            if isinstance(st.value, S.Lambda):
                if not isinstance(st.target, S.Name):
                    raise Unsupported("lambda bound to a non-name")
                self.lambdas[st.target.id] = st.value
                return
            value = st.value
            if isinstance(value, S.Assign):  # a = b = expr
                self.stmt(value)
                value = value.target
            if st.op != "=":
                value = S.Binary(st.op[:-1], st.target, value)
            self.assign(st.target, self.expr(value))
        elif isinstance(st, S.If):
            self.if_stmt(list(st.arms), st.orelse)
        elif isinstance(st, S.For):
            lo, hi = concrete(self.expr(st.lo)), concrete(self.expr(st.hi))
            var = self.local(st.var)
            self.f.vars.setdefault(var, lo.ty)
            hi = convert(hi, self.f.vars[var])
            lo = convert(lo, self.f.vars[var])
            before = set(self.written)
            self.out.append(Loop(var, lo, hi, self.cond_block(st.body)))
            self.written = before  # the body may run zero times
        elif isinstance(st, S.Declare):
            if st.count is not None:
                if self.state_name(st.name):
                    raise Unsupported(f"state name {st.name} declared as an array")
                var = self.local(st.name, new=True)
                self.f.arrays[var] = st.count
                self.f.vars[var] = Ty("u" if st.kind == "b" else st.kind, st.bits)
            elif not self.state_name(st.name):  # a typed local; state names only get their width
                self.f.vars[self.local(st.name, new=True)] = Ty("u" if st.kind == "b" else st.kind, st.bits)
        elif isinstance(st, S.While):
            raise Unsupported("while loop: waits for other waves or hardware (the executor's job)")
        elif isinstance(st, S.Break):
            self.out.append(Break())
        elif isinstance(st, S.Return):
            if not self.lambda_result:
                raise Unsupported("return outside a lambda")
            v = self.expr(st.value)
            r = self.lambda_result[-1]
            if r not in self.f.vars:
                self.f.vars[r] = concrete_type(v.ty)
            self.out.append(Assign(r, convert(v, self.f.vars[r])))
        elif isinstance(st, S.ExprStmt):
            x = st.x
            if isinstance(x, S.Str) or (isinstance(x, S.Call) and x.name in ("nop", "s_nop")):
                return  # a remark or an explicit no-op
            if isinstance(x, S.Call) and x.name == "unsupported" and len(x.args) == 1 and isinstance(x.args[0], S.Str):
                self.out.append(Fail(x.args[0].text))  # fixup text: this case is not modelled
                self.written = Everything()  # the path ends here
                return
            raise Unsupported(f"statement without effect: {show(x)}")
        else:
            raise Unsupported(f"statement {type(st).__name__}")

    def if_stmt(self, arms: list, orelse: tuple) -> None:
        cond, body = arms[0]
        c = to_bool(self.expr(cond))
        before = set(self.written)
        then = self.cond_block(body)
        w_then, self.written = self.written, set(before)
        if len(arms) > 1:
            saved, self.out = self.out, []
            self.depth += 1
            self.if_stmt(arms[1:], orelse)
            self.depth -= 1
            other, self.out = tuple(self.out), saved
        else:
            other = self.cond_block(orelse)
        if isinstance(c, Const):
            self.out.extend(then if c.value else other)
            self.written = w_then if c.value else self.written
        else:
            self.out.append(If(c, then, other))
            self.written = w_then & self.written  # written on every path

    # ---- assignment -------------------------------------------------------------------------------------------
    def assign(self, target: S.Node, v: Expr) -> None:
        if isinstance(target, S.Field) and (t := type_name(target.name)):
            inner = target.x
            if isinstance(inner, S.Index) and isinstance(inner.x, S.Name) and inner.x.id in MEMORIES:
                return self.store_mem(inner.x.id, inner.i, convert(v, t), t.bits)
            if isinstance(inner, S.Index) and self.regfile(inner):
                return self.store_reg(inner, convert(v, t), t.bits)
            if isinstance(inner, S.Name) and inner.id == "D0" and self.f.vector and t.is_int and t.bits <= 32 \
                    and _int_sum(v):
                v = self.clamped(v, t)
            if isinstance(inner, S.Name) and inner.id == "D0" and not self.f.vector and t.is_float:
                v = self.flushed(convert(v, t), result=True)
            bits = bitcast_to_int(convert(v, t))
            if isinstance(inner, S.Name):
                var, vty = self.target_var(inner.id, bits.ty, t.bits)
                if vty.bits == t.bits or self.is_state(inner.id):
                    return self.set_var(var, convert_bits(bits, vty))
                return self.set_bits(var, Const(0, U32), t.bits, bits)
            return self.assign(inner, bits)
        if isinstance(target, S.Field) and isinstance(target.x, S.Name) and target.x.id.isupper():
            target = S.Name(f"{target.x.id}.{target.name}")  # a named field of a state register
        if isinstance(target, S.Concat):
            return self.assign_concat(target.parts, v)
        if isinstance(target, S.Name):
            var, vty = self.target_var(target.id, v.ty)
            if self.is_state(target.id) and v.ty.is_float:
                v = bitcast_to_int(v)
            return self.set_var(var, convert(v, vty) if not self.is_state(target.id) else convert_bits(v, vty))
        if isinstance(target, S.Slice):
            lo = convert(self.expr(target.lo), U32)
            width = slice_width(target.hi, target.lo)
            base, typed = target.x, None
            if isinstance(base, S.Field) and (typed := type_name(base.name)):
                base = base.x
            if isinstance(base, S.Index) and self.regfile(base):  # VGPR[l][r][hi : lo] = v: read-modify-write
                file, idx = self.reg_index(base)
                old = Op("reg_read", idx, U32, file)
                new = Op("insert", (old, lo, convert_bits(bitcast_to_int(v), uint(width))), U32, width)
                self.file_writes.add(file)
                self.out.append(Store(file, idx, new, 32))
                return None
            if not isinstance(base, S.Name):
                raise Unsupported(f"slice assignment to {show(target.x)}")
            hi = const_value(target.hi)
            reach = hi + 1 if hi is not None else None  # D0.u32[63 : 32] writes bits up to 63 whatever its type
            written = max(typed.bits, reach or 0) if typed else reach
            var, _ = self.target_var(base.id, uint(reach or 32), written)
            return self.set_bits(var, lo, width, convert_bits(bitcast_to_int(v), uint(width)))
        if isinstance(target, S.Index):
            if isinstance(target.x, S.Name) and target.x.id in MEMORIES:
                if isinstance(v, Op) and v.op == "fmt_encode":  # MEM[..] = ConvertToFormat(x)
                    self.files.update(("MEM", "FORMAT"))
                    self.file_writes.add("MEM")
                    addr = convert(self.expr(target.i), U64)
                    self.out.append(Store("FORMAT", (addr,), v.args[0], channel_of(target.i)))
                    return None
                return self.store_mem(target.x.id, target.i, v, 32)
            if self.regfile(target):
                return self.store_reg(target, v, 32)
            base = target.x.x if isinstance(target.x, S.Field) else target.x
            if not isinstance(base, S.Name):
                raise Unsupported(f"indexed assignment to {show(target.x)}")
            if base.id in self.masks and self.f.vector and is_lane(target.i):
                self.target_var(base.id, U64)
                self.written.add(base.id)  # every lane on this path assigned
                self.out.append(SetLaneBit(base.id, to_bool(v)))
                return
            var = self.lookup_var(base.id)
            if var in self.f.arrays:
                self.arrays_set.add(var)
                self.out.append(Assign(var, convert(v, self.f.vars[var]), index=convert(self.expr(target.i), U32)))
                return
            var, _ = self.target_var(base.id, U32)
            return self.set_bits(var, self.expr(target.i), 1, convert_bits(bitcast_to_int(v), uint(1)))
        raise Unsupported(f"assignment to {show(target)}")

    def clamped(self, v: Op, t: Ty) -> Expr:
        """An integer sum written to D0 under the encoding's clamp bit: saturated to t (CLAMP read from st)."""
        def wide(e: Expr) -> Expr:
            if _int_sum(e):
                return Op(e.op, tuple(wide(a) for a in e.args), I64)
            return convert(e, I64)
        sat = Op("sat", (wide(v),), t)
        return Op("select", (to_bool(self.state("CLAMP")), sat, convert(v, t)), t)

    def assign_concat(self, parts: tuple, v: Expr) -> None:
        """{ hi, ..., lo } = v: each part (typed) gets its bits of v."""
        widths = []
        for p in parts:
            t = type_name(p.name) if isinstance(p, S.Field) else None
            if t is None:
                raise Unsupported("concatenation target part without a type")
            widths.append(t.bits)
        v = convert_bits(bitcast_to_int(concrete(v)), uint(sum(widths)))
        lo = 0
        for p, w in reversed(list(zip(parts, widths, strict=True))):
            self.assign(p, extract(v, Const(lo, U32), w))
            lo += w

    def is_state(self, var: str) -> bool:
        return var not in self.locals

    def lookup_var(self, name: str) -> str:
        for sc in reversed(self.scopes):
            if name in sc:
                b = sc[name]
                if isinstance(b, str):
                    return b
                raise Unsupported(f"assignment to lambda parameter {name}")
        return name

    def local(self, name: str, new: bool = False) -> str:
        """The variable of a local name (renamed inside inlined code)."""
        r = self.lookup_var(name)
        if r != name and not new:
            return r
        if len(self.scopes) > 1:
            r = f"{name}_{self.ninline}"
            self.scopes[-1][name] = r
        self.locals.add(r)
        return r

    def state_name(self, name: str) -> bool:
        return name in STATE_NAMES or "." in name or name in self.f.inputs

    def target_var(self, name: str, ty: Ty, written: int | None = None) -> tuple[str, Ty]:
        """The variable an assignment to `name` of type `ty` writes; a state name's output width is the widest
        part any assignment writes (`written` bits, None: all of it), not the widest access: `D0.i32 = x` then
        `SCC = D0.u64 != 0` writes a 32-bit destination (S_BCNT1_I32_B64), which reads back zero-extended."""
        var = self.lookup_var(name)
        fresh = len(self.scopes) > 1 and name not in self.scopes[-1]  # an inlined op's own local, never its caller's
        if (var == name and var not in self.locals or fresh) and not self.state_name(name):
            var = self.local(name, new=fresh)
        if var not in self.f.vars:
            if self.is_state(var):
                self.f.vars[var] = uint(max(self.state_bits.get(var, 0), ty.bits if ty.kind != "int" else 32, 1))
            else:
                t = concrete_type(ty)
                wide = self.state_bits.get(name, 0)
                self.f.vars[var] = uint(wide) if wide > t.bits and t.is_int else t
        if self.is_state(var):
            full = self.f.vars[var].bits
            self.f.outputs[var] = max(self.f.outputs.get(var, 0), min(written or full, full))
        return var, self.f.vars[var]

    def set_var(self, var: str, v: Expr) -> None:
        if self.is_state(var):
            self.written.add(var)
        self.out.append(Assign(var, v))

    def set_bits(self, var: str, lo: Expr, width: int, v: Expr) -> None:
        if self.f.vars[var].is_float:
            raise Unsupported(f"bit assignment into float variable {var}")
        if self.is_state(var) and not self.depth and isinstance(lo, Const):  # slices that add up to a full write
            self.covered[var] = self.covered.get(var, 0) | mask(width) << lo.value
            if self.covered[var] & mask(self.f.vars[var].bits) == mask(self.f.vars[var].bits):
                self.written.add(var)
        self.out.append(Assign(var, v, lo=lo, width=width))

    def store_mem(self, file: str, addr: S.Node, v: Expr, bits: int) -> None:
        self.files.add(file)
        self.file_writes.add(file)
        self.out.append(Store(file, (convert(self.expr(addr), U64),), bitcast_to_int(v), bits))

    def regfile(self, n: S.Index) -> str | None:
        base = n
        while isinstance(base, S.Index):
            base = base.x
        return base.id if isinstance(base, S.Name) and base.id in REGFILES else None

    def reg_index(self, n: S.Index) -> tuple[str, tuple]:
        file = self.regfile(n)
        idx = []
        while isinstance(n, S.Index):
            idx.insert(0, convert(self.expr(n.i), U32))
            n = n.x
        if len(idx) != REGFILES[file]:
            raise Unsupported(f"{file} takes {REGFILES[file]} indices")
        self.files.add(file)
        return file, tuple(idx)

    def store_reg(self, n: S.Index, v: Expr, bits: int) -> None:
        file, idx = self.reg_index(n)
        self.file_writes.add(file)
        self.out.append(Store(file, idx, convert_bits(bitcast_to_int(v), uint(bits)), bits))


def _int_sum(e: Expr) -> bool:
    return isinstance(e, Op) and e.op in ("add", "sub") and e.ty.is_int
