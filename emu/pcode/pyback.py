"""Reference backend: IR -> Python source over numpy (lanes at once) -> one compiled function per instruction.

The generated function `f(st, lanes)` loads its inputs from `st`, runs the body under predicates (an `If`
narrows the lane mask, a `Break` removes lanes from its loop) and returns the outputs; the helpers it calls
live in emu.pcode.runtime (imported as `L`) and emu.pcode.floats (`F`). Nothing here knows any particular instruction.
"""
from __future__ import annotations

import re

import numpy as np

from emu.pcode import floats, runtime
from emu.pcode.ir import DEFAULT_MODE, Assign, Break, Const, Expr, Fail, Func, If, Loop, Op, SetLaneBit, Store, Ty, Var
from emu.pcode.typed import Unsupported

_FDT = {16: np.float16, 32: np.float32, 64: np.float64}
_ARITH = {"add": "+", "sub": "-", "mul": "*"}
_BIT = {"and": "&", "or": "|", "xor": "^"}
CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
NP1 = {"sqrt": "np.sqrt", "trunc": "np.trunc", "floor": "np.floor", "ceil": "np.ceil", "fabs": "np.abs",
        "signbit": "np.signbit", "isnan": "np.isnan", "isinf": "np.isinf", "fract": "F.fract", "log2": "F.log2",
        "exp2": "F.exp2", "sin": "F.sin", "cos": "F.cos", "mantissa": "F.mantissa", "is_even": "F.is_even",
        "rint": "np.rint", "rsq": "F.rsq"}
_VIEWS = {"bitcast", "resize", "extract", "fconv", "tobool", "frombool"}
ROUNDED = ("add", "sub", "mul", "div", "fma", "sqrt")  # rounded as MODE.FP_ROUND says (floats.rop)
_ROUNDS = {"add", "sub", "mul", "div", "fma", "sqrt", "exp2", "log2", "sin", "cos", "pow", "ldexp", "fract", "rsq"}


def _m(bits: int) -> int:
    return (1 << bits) - 1


def is_bf(t: Ty) -> bool:
    """Whether `t` is bfloat16 (computed as f32, rounded to bf16)."""
    return t.kind == "bf"


def _fbits(t: Ty) -> int:
    return 32 if t.kind == "bf" else t.bits


def pyname(var: str) -> str:
    return "v_" + re.sub(r"\W", "_", var)


class Gen:
    def __init__(self, f: Func):
        self.f = f
        self.lines: list[str] = []
        self.consts: list = []
        self.const_index: dict[tuple, int] = {}
        self.n = 0
        self.loops: list[str] = []
        self.hoisted: dict[str, str] = {}  # code of an invariant expression -> its variable
        self.assigned = _assigned(f.body)

    def fresh(self, base: str) -> str:
        self.n += 1
        return f"{base}{self.n}"

    def const(self, value) -> str:
        key = (type(value).__name__, value.dtype.str, value.shape, value.tobytes())  # arrays too (npback's)
        if key not in self.const_index:
            self.const_index[key] = len(self.consts)
            self.consts.append(value)
        return f"K[{self.const_index[key]}]"

    def emit(self, line: str, ind: int) -> None:
        self.lines.append("    " * ind + line)

    # ---- expressions ----------------------------------------------------------------------------------------------
    def hoistable(self, e: Expr) -> bool:
        """A cheap view (bitcast, resize, bit field, ...) of constants and variables the body never assigns."""
        return isinstance(e, Op) and e.op in _VIEWS and all(
            isinstance(a, Const) or (isinstance(a, Var) and a.name not in self.assigned) for a in e.args)

    def ex(self, e: Expr, m: str) -> str:
        if self.hoistable(e):  # computed once at the function's entry, shared when repeated
            code = self.ex_op(e, m)
            if code not in self.hoisted:
                self.hoisted[code] = f"h{len(self.hoisted)}"
            return self.hoisted[code]
        return self.ex_op(e, m)

    def ex_op(self, e: Expr, m: str) -> str:
        if isinstance(e, Const):
            t = e.ty
            if t.kind == "bool":
                return repr(bool(e.value))
            if t.is_float:
                return self.const(_FDT[_fbits(t)](floats.bf16(np.float32(e.value)) if is_bf(t) else e.value))
            if t.is_int:
                return repr(int(e.value) & _m(t.bits))
            raise Unsupported(f"untyped constant {e.value!r}")
        if isinstance(e, Var):
            return pyname(e.name)
        if not isinstance(e, Op):
            raise Unsupported(f"IR node {type(e).__name__}")
        a = [self.ex(x, m) for x in e.args]
        t = e.ty
        fn = getattr(self, "op_" + e.op, None)
        if fn is not None:
            return fn(e, a, m)
        if e.op == "sqrt":
            return self.directed(e, a, f"np.sqrt({a[0]})")
        if e.op in NP1:
            return self.round(t, f"{NP1[e.op]}({a[0]})", e.op)
        raise Unsupported(f"no backend for op {e.op}")

    def round(self, t: Ty, code: str, op: str) -> str:
        return f"F.bf16({code})" if is_bf(t) and op in _ROUNDS else code

    def directed(self, e: Op, a, native: str) -> str:
        """A basic float operation: nearest even, or as MODE.FP_ROUND says when the caller passes MODE."""
        if is_bf(e.ty):
            return self.round(e.ty, native, e.op)
        return f"F.rop({e.op!r}, st.get('MODE', {DEFAULT_MODE}), {', '.join(a)})"

    def arith(self, e: Op, a, sym: str) -> str:
        t = e.ty
        if t.is_float:
            return self.directed(e, a, f"({a[0]} {sym} {a[1]})")
        return f"(({a[0]} {sym} {a[1]}) & {_m(t.bits)})"

    def op_add(self, e, a, m):
        return self.arith(e, a, "+")

    def op_sub(self, e, a, m):
        return self.arith(e, a, "-")

    def op_mul(self, e, a, m):
        return self.arith(e, a, "*")

    def op_div(self, e, a, m):
        if e.ty.is_float:
            return self.directed(e, a, f"({a[0]} / {a[1]})")
        return f"L.idiv({a[0]}, {a[1]}, {e.ty.bits}, {e.ty.kind == 'i'})"

    def op_mod(self, e, a, m):
        if e.ty.is_float:
            raise Unsupported("float remainder")
        return f"L.idiv({a[0]}, {a[1]}, {e.ty.bits}, {e.ty.kind == 'i'}, True)"

    def op_neg(self, e, a, m):
        return f"(-{a[0]})" if e.ty.is_float else f"((-{a[0]}) & {_m(e.ty.bits)})"

    def op_not(self, e, a, m):
        return f"((~{a[0]}) & {_m(e.ty.bits)})"

    def _bitop(self, e, a, m):
        return f"({a[0]} {_BIT[e.op]} {a[1]})"

    op_and = op_or = op_xor = _bitop

    def _cmp(self, e, a, m):
        t = e.args[0].ty
        if t.kind == "i":
            a = [f"L.sx({x}, {t.bits})" for x in a]
        return f"({a[0]} {CMP[e.op]} {a[1]})"

    op_eq = op_ne = op_lt = op_le = op_gt = op_ge = _cmp

    def op_land(self, e, a, m):
        return f"({a[0]} & {a[1]})"

    def op_lor(self, e, a, m):
        return f"({a[0]} | {a[1]})"

    def op_lnot(self, e, a, m):
        return f"L.lnot({a[0]})"

    def op_select(self, e, a, m):
        return f"L.sel({a[0]}, {a[1]}, {a[2]})"

    def op_shl(self, e, a, m):
        return f"L.shl({a[0]}, {a[1]}, {e.ty.bits})"

    def op_shr(self, e, a, m):
        return f"L.shr({a[0]}, {a[1]}, {e.ty.bits}, {e.ty.kind == 'i'})"

    def op_tobool(self, e, a, m):
        return f"({a[0]} != 0)"

    def op_frombool(self, e, a, m):
        return f"L.b2i({a[0]})"

    def op_resize(self, e, a, m):
        s, t = e.args[0].ty, e.ty
        if s.bits > 64 or t.bits > 64:
            return f"L.wresize({a[0]}, {s.bits}, {s.kind == 'i'}, {t.bits})"
        if t.bits > s.bits and s.kind == "i":
            return f"L.sext({a[0]}, {s.bits}, {t.bits})"
        if t.bits < s.bits:
            return f"({a[0]} & {_m(t.bits)})"
        return a[0]

    def op_bitcast(self, e, a, m):
        s, t = e.args[0].ty, e.ty
        if t.is_float:
            return f"F.i2f({a[0]}, {t.bits}, {is_bf(t)})"
        return f"F.f2i({a[0]}, {s.bits}, {is_bf(s)})"

    def op_fconv(self, e, a, m):
        rm = a[1] if len(a) > 1 else "0"
        return f"F.fconv({a[0]}, {_fbits(e.ty)}, {is_bf(e.ty)}, {rm}, {e.attr == 'quiet'})"

    def op_itof(self, e, a, m):
        s = e.args[0].ty
        return f"F.itof({a[0]}, {s.bits}, {s.kind == 'i'}, {_fbits(e.ty)}, {is_bf(e.ty)})"

    def op_ftoi(self, e, a, m):
        return f"F.ftoi({a[0]}, {e.ty.bits}, {e.ty.kind == 'i'})"

    def op_extract(self, e, a, m):
        return f"L.ext({a[0]}, {a[1]}, {e.attr})"

    def op_insert(self, e, a, m):
        return f"L.setbits({a[0]}, {a[1]}, {e.attr}, {a[2]}, True, {e.ty.bits})"

    def op_concat(self, e, a, m):
        return "L.cat(" + ", ".join(f"({x}, {p.ty.bits})" for x, p in zip(a, e.args, strict=True)) + ")"

    def op_lane_id(self, e, a, m):
        return "lane"

    def op_wave64(self, e, a, m):
        return "wave64"

    def op_elem(self, e, a, m):
        return f"L.aget({a[0]}, {a[1]})"

    def op_load(self, e, a, m):
        return f"L.load(st, {e.attr!r}, {a[0]}, {e.ty.bits}, {m}, nl)"

    def op_callout(self, e, a, m):
        return f"L.arr(st[{e.attr!r}]({', '.join(a)}))"

    def op_fmt_offset(self, e, a, m):
        return f"st['FORMAT'].offset({e.attr})"

    def op_fmt_load(self, e, a, m):
        return f"L.fmt_load(st, {a[0]}, {e.attr}, {m}, nl)"

    def op_mf_decode(self, e, a, m):
        return f"F.mf_decode({a[0]}, {e.attr!r}, {_fbits(e.ty)}, {is_bf(e.ty)})"

    def op_mf_encode(self, e, a, m):
        if len(a) == 2:
            return f"F.mf_encode_sr({a[0]}, {a[1]}, {e.attr!r})"
        return f"F.mf_encode({a[0]}, {e.attr!r})"

    def op_fconv_sr(self, e, a, m):
        return f"F.fconv_sr({a[0]}, {a[1]}, {_fbits(e.ty)}, {is_bf(e.ty)})"

    def op_reg_read(self, e, a, m):
        return f"L.rget(st, {e.attr!r}, ({', '.join(a)},), {e.ty.bits})"

    def op_fma(self, e, a, m):
        return self.directed(e, a, f"F.fma({', '.join(a)})")

    def op_pow(self, e, a, m):
        return self.round(e.ty, f"F.pow_({a[0]}, {a[1]})", "pow")

    def op_ldexp(self, e, a, m):
        return self.round(e.ty, f"F.ldexp({a[0]}, {a[1]})", "ldexp")

    def _fclass(self, e, a, m):
        t = e.args[0].ty
        return f"F.{e.op}({a[0]}, {_fbits(t) if not is_bf(t) else 16}, {is_bf(t)})"

    op_issnan = op_isqnan = op_isdenorm = op_exponent = _fclass

    def op_quiet(self, e, a, m):
        return f"F.quiet({a[0]}, {e.ty.bits}, {is_bf(e.ty)})"

    def op_iabs(self, e, a, m):
        return f"L.iabs({a[0]}, {e.ty.bits})"

    def op_popcount(self, e, a, m):
        return f"L.popcount({a[0]})"

    def op_bitrev(self, e, a, m):
        return f"L.bitrev({a[0]}, {e.ty.bits})"

    def op_ff1(self, e, a, m):
        return f"L.ff1({a[0]}, {e.args[0].ty.bits})"

    def op_sext_from(self, e, a, m):
        return f"L.sext_from({a[0]}, {a[1]}, {e.ty.bits})"

    def op_sat(self, e, a, m):
        s = e.args[0].ty
        return f"L.sat({a[0]}, {s.bits}, {s.kind == 'i'}, {e.ty.bits}, {e.ty.kind == 'i'})"

    def op_snorm(self, e, a, m):
        return f"F.norm({a[0]}, True)"

    def op_unorm(self, e, a, m):
        return f"F.norm({a[0]}, False)"

    # ---- statements -----------------------------------------------------------------------------------------------
    def block(self, stmts: tuple, m: str, ind: int) -> None:
        if not stmts:
            self.emit("pass", ind)
        for s in stmts:
            self.stmt(s, m, ind)

    def stmt(self, s, m: str, ind: int) -> None:
        if isinstance(s, Assign):
            v, val = pyname(s.var), self.ex(s.value, m)
            if s.index is not None:
                self.emit(f"L.aset({v}, {self.ex(s.index, m)}, {val}, {m})", ind)
            elif s.width is not None:
                bits = self.f.vars[s.var].bits
                self.emit(f"{v} = L.setbits({v}, {self.ex(s.lo, m)}, {s.width}, {val}, {m}, {bits})", ind)
            elif m == "True":
                self.emit(f"{v} = {val}", ind)
            else:
                self.emit(f"{v} = L.sel({m}, {val}, {v})", ind)
        elif isinstance(s, SetLaneBit):
            v = pyname(s.var)
            self.emit(f"{v} = L.setlane({v}, {self.ex(s.value, m)}, {m}, lanes)", ind)
        elif isinstance(s, Store):
            idx = [self.ex(x, m) for x in s.addr]
            val = self.ex(s.value, m)
            if s.file == "FORMAT":
                self.emit(f"L.fmt_store(st, {idx[0]}, {val}, {s.bits}, {m}, nl)", ind)
            elif s.file in ("MEM", "LDS"):
                self.emit(f"L.store(st, {s.file!r}, {idx[0]}, {val}, {s.bits}, {m}, nl)", ind)
            else:
                self.emit(f"L.rset(st, {s.file!r}, ({', '.join(idx)},), {val}, {m}, nl, {s.bits})", ind)
        elif isinstance(s, If | Loop | Break | Fail) and not self.f.vector:
            self.scalar_flow(s, ind)
        elif isinstance(s, If):
            c = self.fresh("c")
            self.emit(f"{c} = {self.ex(s.cond, m)}", ind)
            for body, cond in ((s.then, c), (s.orelse, f"L.lnot({c})")):
                if not body:
                    continue
                mm = self.fresh("m")
                self.emit(f"{mm} = L.land({m}, {cond})", ind)
                self.emit(f"if L.any_({mm}):", ind)
                self.block(body, mm, ind + 1)
        elif isinstance(s, Loop):
            mb = self.fresh("mb")
            self.emit(f"{mb} = {m}", ind)
            lo, hi = self.ex(s.lo, m), self.ex(s.hi, m)
            self.emit(f"for {pyname(s.var)} in range(L.uniform({lo}), L.uniform({hi}) + 1):", ind)
            self.loops.append(mb)
            self.block(s.body, mb, ind + 1)
            self.loops.pop()
            self.emit(f"if not L.any_({mb}):", ind + 1)
            self.emit("break", ind + 2)
        elif isinstance(s, Fail):
            self.emit(f"if L.any_({m}):", ind)
            self.emit(f"raise Unsupported({s.reason!r})", ind + 1)
        elif isinstance(s, Break):
            if not self.loops:
                raise Unsupported("break outside a loop")
            mb = self.loops[-1]
            self.emit(f"{mb} = L.land({mb}, L.lnot({m}))", ind)
        else:
            raise Unsupported(f"statement {type(s).__name__}")

    def scalar_flow(self, s, ind: int) -> None:
        """Control flow of a scalar instruction: every value is uniform, so plain Python branches and loops."""
        if isinstance(s, If):
            self.emit(f"if {self.ex(s.cond, 'True')}:", ind)
            self.block(s.then, "True", ind + 1)
            if s.orelse:
                self.emit("else:", ind)
                self.block(s.orelse, "True", ind + 1)
        elif isinstance(s, Loop):
            lo, hi = self.ex(s.lo, "True"), self.ex(s.hi, "True")
            self.emit(f"for {pyname(s.var)} in range(L.uniform({lo}), L.uniform({hi}) + 1):", ind)
            self.block(s.body, "True", ind + 1)
        elif isinstance(s, Break):
            self.emit("break", ind)
        else:
            self.emit(f"raise Unsupported({s.reason!r})", ind)

    # ---- the function ---------------------------------------------------------------------------------------------
    def function(self) -> str:
        f = self.f
        self.emit("def sem(st, lanes):", 0)
        self.emit("lane = L.lane_ids(lanes)" if f.vector else "lane = 0", 1)
        self.emit("wave64 = lanes == 64", 1)
        self.emit(f"nl = {'lanes' if f.vector else 0}  # lanes of memory accesses; 0: one scalar access", 1)
        self.declare(1)
        entry = len(self.lines)
        self.block(f.body, "True", 1)
        self.lines[entry:entry] = [f"    {v} = {code}" for code, v in self.hoisted.items()]
        outs = []
        for name, bits in f.outputs.items():
            v = pyname(name)
            if name in f.masks or not f.vector:
                outs.append(f"{name!r}: L.out_scalar({v}, {bits})")
            else:
                outs.append(f"{name!r}: L.out_lanes({v}, {bits}, lanes)")
        self.emit("return {" + ", ".join(outs) + "}", 1)
        return "\n".join(self.lines) + "\n"

    def declare(self, ind: int) -> None:
        """Every variable's initial value: inputs loaded from the caller's state, the others zero."""
        f = self.f
        loops = _loop_vars(f.body)
        for var, t in f.vars.items():
            if var in loops:
                continue
            v = pyname(var)
            if var in f.inputs:
                self.emit(f"{v} = {self.load_input(var)}", ind)
            elif var in f.arrays:
                self.emit(f"{v} = [{self.zero(t)}] * {f.arrays[var]}", ind)
            else:
                self.emit(f"{v} = {self.zero(t)}", ind)

    def load_input(self, var: str) -> str:
        if var == "MODE":  # nearest even, denormals kept, when the caller does not give it (as for rounding)
            return f"L.inp(st.get('MODE', {DEFAULT_MODE}), 32)"
        return f"L.inp(st[{var!r}], {self.f.inputs[var]})"

    def zero(self, t: Ty) -> str:
        if t.kind == "bool":
            return "False"
        if t.is_float:
            return self.const(_FDT[_fbits(t)](0))
        return "0"


def _assigned(body: tuple) -> set[str]:
    out: set[str] = set()
    for s in body:
        if isinstance(s, Assign | SetLaneBit):
            out.add(s.var)
        elif isinstance(s, Loop):
            out |= {s.var} | _assigned(s.body)
        elif isinstance(s, If):
            out |= _assigned(s.then) | _assigned(s.orelse)
    return out


def _loop_vars(body: tuple) -> set[str]:
    out: set[str] = set()
    for s in body:
        if isinstance(s, Loop):
            out.add(s.var)
            out |= _loop_vars(s.body)
        elif isinstance(s, If):
            out |= _loop_vars(s.then) | _loop_vars(s.orelse)
    return out


def build(f: Func):
    """(python function, its source) for an IR function."""
    g = Gen(f)
    src = g.function()
    ns = {"L": runtime, "F": floats, "np": np, "K": g.consts, "Unsupported": Unsupported}
    exec(compile(src, f"<pcode {f.name}>", "exec"), ns)
    return ns["sem"], src
