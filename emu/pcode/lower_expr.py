"""Front end, expressions: syntax-tree expressions -> typed IR values, for emu.pcode.lower.

Names resolve to bound lambda parameters, locals, constants (PI, INF, ROUND_*), wave properties (laneId,
WAVE64, EXEC_LO, VCCZ) or state; `MEM[a].T` and `VGPR[l][r]` become loads and register reads; calls become
inlined lambdas, inlined instructions (`v_min_f32(a, b)`), executor-computed addresses (CalcGlobalAddr ->
ADDR), formatted-buffer callouts or library ops (emu.pcode.library).
"""
from __future__ import annotations

import math
import re

from emu.pcode import syntax as S
from emu.pcode.ir import (
    BOOL,
    I32,
    MINIFLOATS,
    U32,
    U64,
    Assign,
    Const,
    Expr,
    Op,
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
FIXED_BITS = {"ADDR": 64, "ADDR_BASE": 64, "PC": 64, "SCC": 1}  # however the text types them: byte addresses, a bit
LOCAL_NAMES = ("ROUND_MODE",)  # upper-case names that are local variables, not state
STATE_NAMES = frozenset("""S0 S1 S2 S3 D0 D1 SCC VCC EXEC M0 PC MODE SIMM16 SIMM32 ADDR ADDR_BASE DATA DATA0 DATA1
    DATA2 OFFSET OFFSET0 OFFSET1 RETURN_DATA VDATA SDATA VDST SRC0 SRC1 SRC2 DST OPSEL OPSEL_HI NEG NEG_HI TBA TMA
    SDST""".split())
ADDR_FUNCS = ("CalcImageAddr", "CalcDsAddr", "CalcGlobalAddr", "CalcFlatAddr", "CalcScratchAddr", "CalcBufferAddr",
              "CalcScalarGlobalAddr", "CalcScalarBufferAddr", "CalcScalarScratchAddr")
FCONST = {"PI": math.pi, "INF": math.inf, "NAN": math.nan}
ICONST = {"TRUE": (1, BOOL), "FALSE": (0, BOOL), "ROUND_NEAREST_EVEN": (0, U32), "ROUND_TOWARD_ZERO": (3, U32)}
MODE_FIELDS = {"IEEE": (9, 1), "DX10_CLAMP": (8, 1)}  # WAVE_MODE.<field>: bit offset, width in MODE
# MODE.FP_DENORM bits that keep denormals (inputs, results) of f32 and f16: the scalar float ops flush by them
KEEP_DENORMALS = {(32, False): 4, (32, True): 5, (16, False): 6, (16, True): 7}
SCALAR_FLOAT_OPERANDS = ("S0", "S1", "S2", "D0")
# float constants named with their type: MAX_FLOAT = largest finite; OVERFLOW / UNDERFLOW = the rounded result of
# a quotient too large / too small for the type (infinity / zero, as IEEE division gives)
_NAMED_FLOAT = re.compile(r"^(OVERFLOW|UNDERFLOW|MAX_FLOAT)_F(16|32|64)$")


def _fmax(t: Ty) -> float:
    return {16: 65504.0, 32: 3.4028234663852886e38, 64: 1.7976931348623157e308}[t.bits]




class ExpressionLowering:
    """The expression half of Lowerer (which provides the state: f, scopes, locals, written, lambdas, ...)."""

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
            # an untyped wave mask (EXECZ, VCCZ) is the whole mask: 64 bits, so wave64's upper lanes count
            default = 64 if name in ("EXEC", "VCC") else 32
            self.f.vars[name] = uint(max(self.state_bits.get(name, 0), 1) if name in self.state_bits else default)
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
            raise Unsupported(f"field .{n.name} of {show(n.x)}")
        if isinstance(n.x, S.Name) and n.x.id in ("INF", "NAN") and t.is_float:
            return Const(FCONST[n.x.id], t)
        if isinstance(n.x, S.Unary) and n.x.op == "-" and isinstance(n.x.x, S.Name) and n.x.x.id == "INF":
            return Const(-math.inf, t)
        if isinstance(n.x, S.Index) and isinstance(n.x.x, S.Name) and n.x.x.id in MEMORIES:
            return self.load(n.x.x.id, n.x.i, t)
        if isinstance(n.x, S.Index) and self.regfile(n.x):
            file, idx = self.reg_index(n.x)  # a value wider than 32 bits spans consecutive registers
            return reinterpret(Op("reg_read", idx, uint(max(32, t.bits)), file), t)
        x = reinterpret(self.expr(n.x), t)
        if not self.f.vector and isinstance(n.x, S.Name) and n.x.id in SCALAR_FLOAT_OPERANDS \
                and n.x.id not in self.written:
            return self.flushed(x, result=False)
        return x

    def flushed(self, x: Expr, result: bool) -> Expr:
        """A scalar op's f16 / f32 source (or result) with a denormal read as zero of its sign unless
        MODE.FP_DENORM keeps denormal inputs (results) of its type; other values unchanged."""
        bit = KEEP_DENORMALS.get((x.ty.bits, result)) if x.ty.kind == "f" else None
        if bit is None:
            return x
        if not isinstance(x, (Var, Const)):  # computed once, read three times below
            tmp = f"flush_{len(self.f.vars)}"
            self.f.vars[tmp] = x.ty
            self.locals.add(tmp)
            self.out.append(Assign(tmp, x))
            x = Var(tmp, x.ty)
        keep = to_bool(extract(self.state("MODE"), Const(bit, U32), 1))
        zero = reinterpret(Op("and", (bitcast_to_int(x), Const(1 << (x.ty.bits - 1), uint(x.ty.bits))),
                              uint(x.ty.bits)), x.ty)
        flush = Op("land", (Op("isdenorm", (x,), BOOL), lnot(keep)), BOOL)
        return Op("select", (flush, zero, x), x.ty)

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
        hi, lo = const_value(n.hi), const_value(n.lo)
        if hi is not None and lo is not None and hi < lo:  # x[0 : 31]: the bits in reverse order
            return Op("bitrev", (extract(x, Const(hi, U32), lo - hi + 1),), uint(lo - hi + 1))
        return extract(x, convert(self.expr(n.lo), U32), slice_width(n.hi, n.lo))

    def x_PartSelect(self, n: S.PartSelect) -> Expr:
        w = const_value(n.width)
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
            return Op("fmt_load", (convert(self.expr(a.i), U64),), U32, channel_of(a.i))
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


def channel_of(n: S.Node) -> int:
    """The channel (0..3 = X..W) a formatted-buffer address expression names."""
    if isinstance(n, S.Call) and n.name.startswith("ChannelOffset"):
        return "XYZW".index(n.name[-1])
    if isinstance(n, S.Field) and isinstance(n.x, S.Name) and n.x.id == "TADDR":
        return "XYZW".index(n.name)
    for v in getattr(n, "__dict__", {}).values():
        if isinstance(v, S.Node) and (c := channel_of(v)) >= 0:
            return c
    return -1


class Everything(set):
    """The written-names set of a path that ends (in a Fail): contains every name."""

    def __contains__(self, name) -> bool:
        return True

    def add(self, name) -> None:
        pass

    def __and__(self, other):
        return set(other)

    __rand__ = __and__


def _d0_type(tree: tuple) -> Ty:
    """The type the called instruction's text gives D0 (its result)."""
    for n in S.walk(tree):
        if isinstance(n, S.Assign) and isinstance(n.target, S.Field) and isinstance(n.target.x, S.Name) \
                and n.target.x.id == "D0" and (t := type_name(n.target.name)):
            return t
    raise Unsupported("called instruction has no typed D0")


def is_lane(n: S.Node) -> bool:
    return isinstance(n, S.Name) and n.id in ("laneId", "laneID")


def const_value(n: S.Node, env: dict | None = None) -> int | None:
    """Value of a constant integer expression (names looked up in env), else None."""
    if isinstance(n, S.Num) and isinstance(n.value, int):
        return n.value
    if isinstance(n, S.Name) and env and n.id in env:
        return env[n.id]
    if isinstance(n, S.Field) and type_name(n.name):
        return const_value(n.x, env)
    if isinstance(n, S.Binary) and n.op in ("+", "-", "*", "/", "%"):
        a, b = const_value(n.a, env), const_value(n.b, env)
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


def slice_width(hi: S.Node, lo: S.Node) -> int:
    """Width of x[hi : lo]: constant, or hi - lo constant for every value of the names in them."""
    if isinstance(hi, S.Binary) and hi.op == "+" and hi.a == lo and isinstance(hi.b, S.Num):  # [x + c : x]
        return hi.b.value + 1
    names = _names(hi) | _names(lo)
    widths = set()
    for val in (0, 1, 5):
        env = {k: val for k in names}
        h, lo_ = const_value(hi, env), const_value(lo, env)
        if h is None or lo_ is None:
            raise Unsupported("bit slice of variable width")
        widths.add(h - lo_ + 1)
    if len(widths) != 1 or min(widths) < 1:
        raise Unsupported("bit slice of variable width")
    return widths.pop()


def show(n: S.Node) -> str:
    return type(n).__name__ + (f" {n.id}" if isinstance(n, S.Name) else "")


