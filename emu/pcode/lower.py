"""Front end, second half: syntax tree -> typed IR (emu.pcode.ir).

Names become state variables (S0, D0, VCC, ...) or locals, typed through emu.pcode.typed (`N'T(x)` converts,
an integer given to `N'F` being a bit pattern). Lambdas and calls of other instructions (`v_min_f32(a, b)`) are
inlined; library functions become IR ops (emu.pcode.library).
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable

from emu.pcode import syntax as S
from emu.pcode.ir import (
    BOOL,
    I32,
    MINIFLOATS,
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
    Var,
    uint,
)
from emu.pcode.typed import (
    FLIT,
    Unsupported,
    binary,
    bitcast_to_int,
    concrete,
    concrete_type,
    convert,
    convert_bits,
    extract,
    lnot,
    mask,
    promote,
    reinterpret,
    to_bool,
    type_name,
    unify,
)

REGFILES = {"VGPR": 2, "SGPR": 1, "HW_REGISTERS": 1, "TTMP": 1}
MEMORIES = ("MEM", "LDS")
MASK_NAMES = ("EXEC", "VCC")
ADDRESS_NAMES = {"ADDR": 64, "ADDR_BASE": 64, "PC": 64}
LOCAL_NAMES = ("ROUND_MODE",)  # upper-case names that are local variables, not state
STATE_NAMES = frozenset("""S0 S1 S2 S3 D0 D1 SCC VCC EXEC M0 PC MODE SIMM16 SIMM32 ADDR ADDR_BASE DATA DATA0 DATA1
    DATA2 OFFSET OFFSET0 OFFSET1 RETURN_DATA VDATA SDATA VDST SRC0 SRC1 SRC2 DST OPSEL OPSEL_HI NEG NEG_HI TBA TMA
    SDST""".split())
ADDR_FUNCS = ("CalcImageAddr", "CalcDsAddr", "CalcGlobalAddr", "CalcFlatAddr", "CalcScratchAddr", "CalcBufferAddr",
              "CalcScalarGlobalAddr", "CalcScalarBufferAddr", "CalcScalarScratchAddr")
FCONST = {"PI": math.pi, "INF": math.inf, "NAN": math.nan}
ICONST = {"TRUE": (1, BOOL), "FALSE": (0, BOOL), "ROUND_NEAREST_EVEN": (0, U32), "ROUND_TOWARD_ZERO": (3, U32)}
MODE_FIELDS = {"IEEE": (9, 1), "DX10_CLAMP": (8, 1)}  # WAVE_MODE.<field>: bit offset, width in MODE
# float constants named with their type: MAX_FLOAT = largest finite; OVERFLOW / UNDERFLOW = the rounded result of
# a quotient too large / too small for the type (infinity / zero, as IEEE division gives)
_NAMED_FLOAT = re.compile(r"^(OVERFLOW|UNDERFLOW|MAX_FLOAT)_F(16|32|64)$")


def _fmax(t: Ty) -> float:
    return {16: 65504.0, 32: 3.4028234663852886e38, 64: 1.7976931348623157e308}[t.bits]


class Lowerer:
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
        def visit(n):
            if isinstance(n, S.Field) and isinstance(n.x, S.Name) and (t := type_name(n.name)):
                self.widen(n.x.id, t.bits)
            if isinstance(n, S.Slice) and isinstance(n.x, S.Name | S.Field):
                base = n.x.x if isinstance(n.x, S.Field) else n.x
                hi = _const(n.hi)
                if isinstance(base, S.Name) and hi is not None:
                    self.widen(base.id, hi + 1)
            if isinstance(n, S.Index) and self.f.vector and _is_lane(n.i):
                base = n.x.x if isinstance(n.x, S.Field) else n.x
                if isinstance(base, S.Name):
                    self.masks.add(base.id)
            if isinstance(n, S.Declare) and n.count is None:
                self.widen(n.name, n.bits)
            for v in getattr(n, "__dict__", {}).values():
                for c in (v if isinstance(v, tuple) else (v,)):
                    if isinstance(c, tuple):
                        for cc in c:
                            visit(cc)
                    elif isinstance(c, S.Node):
                        visit(c)
        for st in tree:
            visit(st)
        for name, bits in ADDRESS_NAMES.items():  # byte addresses are 64-bit however the text types them
            self.widen(name, bits)
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
                self.written = _Everything()  # the path ends here
                return
            raise Unsupported(f"statement without effect: {_show(x)}")
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
            bits = bitcast_to_int(convert(v, t))
            if isinstance(inner, S.Name):
                var, vty = self.target_var(inner.id, bits.ty)
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
            width = _width(target.hi, target.lo)
            base = target.x
            if isinstance(base, S.Field) and type_name(base.name):
                base = base.x
            if isinstance(base, S.Index) and self.regfile(base):  # VGPR[l][r][hi : lo] = v: read-modify-write
                file, idx = self.reg_index(base)
                old = Op("reg_read", idx, U32, file)
                new = Op("insert", (old, lo, convert_bits(bitcast_to_int(v), uint(width))), U32, width)
                self.file_writes.add(file)
                self.out.append(Store(file, idx, new, 32))
                return None
            if not isinstance(base, S.Name):
                raise Unsupported(f"slice assignment to {_show(target.x)}")
            var, _ = self.target_var(base.id, uint(_const(target.hi) + 1 if _const(target.hi) is not None else 32))
            return self.set_bits(var, lo, width, convert_bits(bitcast_to_int(v), uint(width)))
        if isinstance(target, S.Index):
            if isinstance(target.x, S.Name) and target.x.id in MEMORIES:
                if isinstance(v, Op) and v.op == "fmt_encode":  # MEM[..] = ConvertToFormat(x)
                    self.files.update(("MEM", "FORMAT"))
                    self.file_writes.add("MEM")
                    addr = convert(self.expr(target.i), U64)
                    self.out.append(Store("FORMAT", (addr,), v.args[0], _channel(target.i)))
                    return None
                return self.store_mem(target.x.id, target.i, v, 32)
            if self.regfile(target):
                return self.store_reg(target, v, 32)
            base = target.x.x if isinstance(target.x, S.Field) else target.x
            if not isinstance(base, S.Name):
                raise Unsupported(f"indexed assignment to {_show(target.x)}")
            if base.id in self.masks and self.f.vector and _is_lane(target.i):
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
        raise Unsupported(f"assignment to {_show(target)}")

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

    def target_var(self, name: str, ty: Ty) -> tuple[str, Ty]:
        var = self.lookup_var(name)
        if var == name and var not in self.locals and not self.state_name(name):
            var = self.local(name)
        if var not in self.f.vars:
            if self.is_state(var):
                self.f.vars[var] = uint(max(self.state_bits.get(var, 0), ty.bits if ty.kind != "int" else 32, 1))
            else:
                t = concrete_type(ty)
                wide = self.state_bits.get(name, 0)
                self.f.vars[var] = uint(wide) if wide > t.bits and t.is_int else t
        if self.is_state(var):
            self.f.outputs[var] = self.f.vars[var].bits
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

    # ---- expressions ------------------------------------------------------------------------------------------
    def expr(self, n: S.Node) -> Expr:
        m = getattr(self, "x_" + type(n).__name__, None)
        if m is None:
            raise Unsupported(f"expression {type(n).__name__}")
        return m(n)

    def x_Num(self, n: S.Num) -> Expr:
        if n.kind == "f" or isinstance(n.value, float):
            return Const(float(n.value), Ty("f", n.bits) if n.bits else FLIT)
        if n.kind is None:
            return Const(n.value, Ty("int", n.bits or 0))
        t = Ty(n.kind, n.bits)
        return Const(n.value & mask(t.bits), t)

    def x_Str(self, n: S.Str) -> Expr:
        raise Unsupported(f"string {n.text!r} used as a value")

    def x_Name(self, n: S.Name) -> Expr:
        name = n.id
        for sc in reversed(self.scopes):
            if name in sc:
                b = sc[name]
                return Var(b, self.f.vars[b]) if isinstance(b, str) else b
        if name == "ROUND_MODE":
            return self.round_mode()
        if m := _NAMED_FLOAT.match(name):
            t = Ty("f", int(m.group(2)))
            return Const({"UNDERFLOW": 0.0, "OVERFLOW": math.inf}.get(m.group(1), _fmax(t)), t)
        if name in self.locals:
            if name in self.f.arrays:
                raise Unsupported(f"array {name} used as a value")
            return Var(name, self.f.vars[name])
        if name in FCONST:
            return Const(FCONST[name], FLIT)
        if name in ICONST:
            v, t = ICONST[name]
            return Const(v, t)
        if name in ("laneId", "laneID"):
            return Op("lane_id", (), U32)
        if name in ("WAVE64", "WAVE32", "wave64", "wave32"):
            w = Op("wave64", (), BOOL)
            return w if name.upper() == "WAVE64" else Op("lnot", (w,), BOOL)
        if name in ("EXEC_LO", "VCC_LO"):
            return Op("resize", (self.state(name[:-3]),), U32)
        if name in ("EXEC_HI", "VCC_HI"):
            return Op("resize", (Op("shr", (self.state(name[:-3]), Const(32, U32)), U64),), U32)
        if name in ("VCCZ", "EXECZ"):
            return Op("eq", (self.state(name[:-1]), Const(0, U64)), BOOL)
        if name == "ROUND_MODE":
            return self.round_mode()
        if not name.isupper() and name not in STATE_NAMES:
            raise Unsupported(f"{name} read before it is assigned")
        if name in REGFILES or name in MEMORIES:
            raise Unsupported(f"{name} used without an index")
        return self.state(name)

    def round_mode(self) -> Expr:
        """The f32 rounding mode: MODE.FP_ROUND[1:0] until the pcode assigns ROUND_MODE."""
        if "ROUND_MODE" not in self.f.vars:
            self.f.vars["ROUND_MODE"] = U32
            self.out.append(Assign("ROUND_MODE", convert(extract(self.state("MODE"), Const(0, U32), 2), U32)))
        return Var("ROUND_MODE", U32)

    def state(self, name: str) -> Expr:
        if name not in self.f.vars:
            self.f.vars[name] = uint(max(self.state_bits.get(name, 0), 1) if name in self.state_bits else 32)
        if name not in self.written:
            self.f.inputs[name] = self.f.vars[name].bits
        return Var(name, self.f.vars[name])

    def x_Field(self, n: S.Field) -> Expr:
        t = type_name(n.name)
        if t is None:
            if isinstance(n.x, S.Name) and n.x.id == "WAVE_MODE" and n.name in MODE_FIELDS:
                off, w = MODE_FIELDS[n.name]
                return extract(self.state("MODE"), Const(off, U32), w)
            if isinstance(n.x, S.Name) and n.x.id in ("OVERFLOW", "UNDERFLOW", "INF", "NAN"):
                raise Unsupported(f"{n.x.id}.{n.name}")
            if isinstance(n.x, S.Name) and n.x.id == "TADDR" and n.name in ("X", "Y", "Z", "W"):
                self.files.add("FORMAT")  # the address of one channel of a formatted buffer element
                off = Op("fmt_offset", (), U64, "XYZW".index(n.name))
                return Op("add", (convert(self.state("ADDR"), U64), off), U64)
            if isinstance(n.x, S.Name) and n.x.id.isupper():
                return self.state(f"{n.x.id}.{n.name}")
            raise Unsupported(f"field .{n.name} of {_show(n.x)}")
        if isinstance(n.x, S.Name) and n.x.id in ("INF", "NAN") and t.is_float:
            return Const(FCONST[n.x.id], t)
        if isinstance(n.x, S.Unary) and n.x.op == "-" and isinstance(n.x.x, S.Name) and n.x.x.id == "INF":
            return Const(-math.inf, t)
        if isinstance(n.x, S.Index) and isinstance(n.x.x, S.Name) and n.x.x.id in MEMORIES:
            return self.load(n.x.x.id, n.x.i, t)
        if isinstance(n.x, S.Index) and self.regfile(n.x):
            file, idx = self.reg_index(n.x)
            return reinterpret(Op("reg_read", idx, U32, file), t)
        return reinterpret(self.expr(n.x), t)

    def load(self, file: str, addr: S.Node, t: Ty) -> Expr:
        self.files.add(file)
        return reinterpret(Op("load", (convert(self.expr(addr), U64),), uint(t.bits), file), t)

    def x_Index(self, n: S.Index) -> Expr:
        if isinstance(n.x, S.Name) and n.x.id in MEMORIES:
            return self.load(n.x.id, n.i, U32)
        if self.regfile(n):
            file, idx = self.reg_index(n)
            return Op("reg_read", idx, U32, file)
        if isinstance(n.x, S.Name):
            var = self.lookup_var(n.x.id)
            if var in self.f.arrays:
                self.arrays_read.add(var)
                return Op("elem", (Var(var, self.f.vars[var]), convert(self.expr(n.i), U32)), self.f.vars[var])
        x = self.expr(n.x)
        return extract(bitcast_to_int(x), convert(self.expr(n.i), U32), 1)

    def x_Slice(self, n: S.Slice) -> Expr:
        x = bitcast_to_int(self.expr(n.x))
        hi, lo = _const(n.hi), _const(n.lo)
        if hi is not None and lo is not None and hi < lo:  # x[0 : 31]: the bits in reverse order
            return Op("bitrev", (extract(x, Const(hi, U32), lo - hi + 1),), uint(lo - hi + 1))
        return extract(x, convert(self.expr(n.lo), U32), _width(n.hi, n.lo))

    def x_PartSelect(self, n: S.PartSelect) -> Expr:
        w = _const(n.width)
        if w is None:
            raise Unsupported("part-select with a variable width")
        return extract(bitcast_to_int(self.expr(n.x)), convert(self.expr(n.base), U32), w)

    def x_Unary(self, n: S.Unary) -> Expr:
        x = self.expr(n.x)
        if n.op == "!":
            return lnot(to_bool(x))
        if n.op == "~":
            if x.ty.kind == "bool":
                return lnot(x)
            x = concrete(x)
            return Op("not", (x,), x.ty)
        if n.op == "-":
            if isinstance(x, Const) and x.ty.kind in ("int", "flt"):
                return Const(-x.value, x.ty)
            if x.ty.kind == "bool":
                x = convert(x, I32)
            x = promote(concrete(x))
            return Op("neg", (x,), x.ty)
        raise Unsupported(f"unary {n.op}")

    def x_Binary(self, n: S.Binary) -> Expr:
        for x, y in ((n.a, n.b), (n.b, n.a)):  # `x == DENORM.f32`: x is a denormal number
            if n.op == "==" and isinstance(y, S.Field) and isinstance(y.x, S.Name) and y.x.id == "DENORM":
                from emu.pcode.library import call
                return call("isDENORM", [self.expr(x)], self)
        return binary(n.op, self.expr(n.a), self.expr(n.b))

    def x_Ternary(self, n: S.Ternary) -> Expr:
        c = to_bool(self.expr(n.cond))
        a, b = unify(self.expr(n.a), self.expr(n.b))
        if isinstance(c, Const):
            return a if c.value else b
        a, b = concrete(a), concrete(b)
        return Op("select", (c, a, b), a.ty)

    def x_Cast(self, n: S.Cast) -> Expr:
        x = self.expr(n.x)
        if n.kind in ("f", "bf"):
            t = Ty(n.kind, n.bits)
            if x.ty.kind in MINIFLOATS:
                return Op("mf_decode", (x,), t, x.ty.kind)
            if t.kind == "f" and t.bits not in (16, 32, 64):
                raise Unsupported(f"{n.bits}'F")
            if x.ty.is_float or x.ty.kind == "flt":
                return convert(x, t)
            return Op("bitcast", (convert_bits(concrete(x), uint(t.bits)),), t)
        t = Ty("u" if n.kind == "b" else n.kind, n.bits)
        if x.ty.kind == "flt" and n.bits > 64:
            raise Unsupported(f"{n.bits}-bit integer cast of a real number")
        if x.ty.is_float:
            x = bitcast_to_int(x)
        return convert(x, t) if x.ty.kind != "flt" else Const(int(x.value) & mask(t.bits), t)

    def x_Concat(self, n: S.Concat) -> Expr:
        parts = []
        for p in n.parts:
            x = self.expr(p)
            if x.ty.kind == "int":
                if not x.ty.bits:
                    raise Unsupported("unsized literal in a concatenation")
                x = Const(x.value & mask(x.ty.bits), uint(x.ty.bits))
            parts.append(convert_bits(bitcast_to_int(x), uint(x.ty.bits)))
        return Op("concat", tuple(parts), uint(sum(p.ty.bits for p in parts)))

    def x_Call(self, n: S.Call) -> Expr:
        if n.name in self.lambdas:
            return self.inline_lambda(self.lambdas[n.name], n.args)
        if n.name in ("ChannelOffsetX", "ChannelOffsetY", "ChannelOffsetZ", "ChannelOffsetW") and not n.args:
            self.files.add("FORMAT")
            return Op("fmt_offset", (), U64, "XYZW".index(n.name[-1]))
        if n.name == "ConvertToFormat" and len(n.args) == 1:
            return Op("fmt_encode", (convert(concrete(self.expr(n.args[0])), U32),), U32)
        if n.name == "ConvertFromFormat" and len(n.args) == 1:
            a = n.args[0]
            if not (isinstance(a, S.Index) and isinstance(a.x, S.Name) and a.x.id == "MEM"):
                raise Unsupported("ConvertFromFormat of something other than MEM[...]")
            self.files.update(("MEM", "FORMAT"))
            return Op("fmt_load", (convert(self.expr(a.i), U64),), U32, _channel(a.i))
        if n.name in ADDR_FUNCS:
            return self.state("ADDR")  # computed by the executor from the encoding's fields
        args = [self.expr(a) for a in n.args]
        if n.name.startswith("v_") or n.name.startswith("s_") and self.find_op(n.name.upper()):
            return self.inline_op(n.name.upper(), args)
        from emu.pcode.library import call
        return call(n.name, args, self)

    def inline_lambda(self, lam: S.Lambda, args: tuple) -> Expr:
        if len(args) != len(lam.params):
            raise Unsupported(f"lambda takes {len(lam.params)} arguments, got {len(args)}")
        vals = [self.expr(a) for a in args]
        self.ninline += 1
        self.scopes.append(dict(zip(lam.params, vals, strict=True)))
        try:
            if isinstance(lam.body, S.Node):
                return self.expr(lam.body)
            res = f"ret_{self.ninline}"
            self.lambda_result.append(res)
            self.depth += 1
            for st in lam.body:
                self.stmt(st)
            self.depth -= 1
            self.lambda_result.pop()
            return Var(res, self.f.vars[res])
        finally:
            self.scopes.pop()

    def inline_op(self, name: str, args: list[Expr]) -> Expr:
        text = self.find_op(name)
        if text is None:
            raise Unsupported(f"calls {name.lower()}, which has no pcode")
        self.ninline += 1
        k = self.ninline
        scope: dict = {f"S{i}": a for i, a in enumerate(args)}
        for st in ("D0", "D1"):
            scope[st] = f"{st}_{k}"
            self.locals.add(scope[st])
        self.scopes.append(scope)
        saved_lambdas = dict(self.lambdas)
        try:
            tree = S.parse(text)
            dty = _d0_type(tree)
            self.f.vars[f"D0_{k}"] = uint(dty.bits)
            self.depth += 1
            for st in tree:
                self.stmt(st)
            self.depth -= 1
            return reinterpret(Var(f"D0_{k}", uint(dty.bits)), dty)
        finally:
            self.scopes.pop()
            self.lambdas = saved_lambdas


def _channel(n: S.Node) -> int:
    """The channel (0..3 = X..W) a formatted-buffer address expression names."""
    if isinstance(n, S.Call) and n.name.startswith("ChannelOffset"):
        return "XYZW".index(n.name[-1])
    if isinstance(n, S.Field) and isinstance(n.x, S.Name) and n.x.id == "TADDR":
        return "XYZW".index(n.name)
    for v in getattr(n, "__dict__", {}).values():
        if isinstance(v, S.Node) and (c := _channel(v)) >= 0:
            return c
    return -1


class _Everything(set):
    """The written-names set of a path that ends (in a Fail): contains every name."""

    def __contains__(self, name) -> bool:
        return True

    def add(self, name) -> None:
        pass

    def __and__(self, other):
        return set(other)

    __rand__ = __and__


def _d0_type(tree: tuple) -> Ty:
    found = []

    def visit(n):
        if isinstance(n, S.Assign) and isinstance(n.target, S.Field) and isinstance(n.target.x, S.Name) \
                and n.target.x.id == "D0" and (t := type_name(n.target.name)):
            found.append(t)
        for v in getattr(n, "__dict__", {}).values():
            for c in (v if isinstance(v, tuple) else (v,)):
                for cc in (c if isinstance(c, tuple) else (c,)):
                    if isinstance(cc, S.Node):
                        visit(cc)
    for st in tree:
        visit(st)
    if not found:
        raise Unsupported("called instruction has no typed D0")
    return found[0]


# ---- typing helpers ---------------------------------------------------------------------------------------------

def _is_lane(n: S.Node) -> bool:
    return isinstance(n, S.Name) and n.id in ("laneId", "laneID")


def _const(n: S.Node, env: dict | None = None) -> int | None:
    """Value of a constant integer expression (names looked up in env), else None."""
    if isinstance(n, S.Num) and isinstance(n.value, int):
        return n.value
    if isinstance(n, S.Name) and env and n.id in env:
        return env[n.id]
    if isinstance(n, S.Field) and type_name(n.name):
        return _const(n.x, env)
    if isinstance(n, S.Binary) and n.op in ("+", "-", "*", "/", "%"):
        a, b = _const(n.a, env), _const(n.b, env)
        if a is None or b is None or (n.op in "/%" and b == 0):
            return None
        return {"+": a + b, "-": a - b, "*": a * b, "/": a // b, "%": a % b}[n.op]
    return None


def _names(n: S.Node) -> set[str]:
    if isinstance(n, S.Name):
        return {n.id}
    out: set[str] = set()
    for v in getattr(n, "__dict__", {}).values():
        if isinstance(v, S.Node):
            out |= _names(v)
    return out


def _width(hi: S.Node, lo: S.Node) -> int:
    """Width of x[hi : lo]: constant, or hi - lo constant for every value of the names in them."""
    if isinstance(hi, S.Binary) and hi.op == "+" and hi.a == lo and isinstance(hi.b, S.Num):  # [x + c : x]
        return hi.b.value + 1
    names = _names(hi) | _names(lo)
    widths = set()
    for val in (0, 1, 5):
        env = {k: val for k in names}
        h, lo_ = _const(hi, env), _const(lo, env)
        if h is None or lo_ is None:
            raise Unsupported("bit slice of variable width")
        widths.add(h - lo_ + 1)
    if len(widths) != 1 or min(widths) < 1:
        raise Unsupported("bit slice of variable width")
    return widths.pop()


def _show(n: S.Node) -> str:
    return type(n).__name__ + (f" {n.id}" if isinstance(n, S.Name) else "")


