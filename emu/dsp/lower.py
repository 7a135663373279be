"""Lowering of one instruction's semantics to the typed IR.

The vendor text is expanded with the macros of library.PARAMS (their macros.def bodies), parsed
(emu.dsp.syntax) and typed by C's rules. Side effects inside expressions (assignments, ++, GNU statement
expressions, a saturation that sets the overflow bit inside a ?:) become statements in evaluation order.
What the lowering has no rule for raises CompileError with the reason the coverage tool reports.
"""
from __future__ import annotations

from dataclasses import dataclass

from emu.dsp import cpp, ir, runtime, syntax
from emu.dsp import operands as ops
from emu.dsp.fixups import FIXUPS
from emu.dsp.ir import C_TYPES, LANES, Type
from emu.dsp.isa import ISA, Insn
from emu.dsp.library import CONSTANTS, PARAMS, PRIMITIVES
from emu.dsp.tables import TABLES


class CompileError(ValueError):
    pass


@dataclass(frozen=True)
class Semantics:
    tag: str
    inputs: tuple[tuple[str, Type], ...]  # operands read, in syntax order (immediates included)
    outputs: tuple[tuple[str, Type], ...]  # operands written, in syntax order
    body: tuple


_REG_TYPES = {"R": (ir.S32, ir.S64), "C": (ir.S32, ir.S64), "M": (ir.S32, ir.S32), "P": (ir.U8, ir.U8),
              "N": (ir.S32, ir.S32), "V": (ir.VEC, ir.PAIR), "O": (ir.VEC, ir.VEC), "Q": (ir.QREG, ir.QREG)}
_VEC_LOG_SIZE = 7  # 128-byte HVX
# primitives that write one of their arguments: its index, and whether it is also an input
_OUT_ARG = {"fLOADMMV": (1, False), "fLOADMMVU": (1, False), "fcirc_add": (0, True), "READ_EXT_VREG": (1, False)}
# primitives that take arguments by reference (C's &N): the positions of those the result tuple gives back
_BY_REFERENCE = {"fSF_RECIP_COMMON": (0, 1, 2, 3), "fSF_INVSQRT_COMMON": (0, 1, 2)}
_CANCEL = frozenset({"CANCEL", "LOAD_CANCEL", "STORE_CANCEL"})
_CONTEXT = frozenset({"thread", "insn"})  # the simulator's handles the vendor text passes around


def operand_type(o: ops.Operand) -> Type:
    if o.cls == "#":
        return ir.S32 if o.signed else ir.U32
    return _REG_TYPES[o.cls][o.pair]


_EXPANDERS: dict[int, cpp.Preprocessor] = {}  # per ISA object


def expand(isa: ISA, text: str) -> list[cpp.Tok]:
    pre = _EXPANDERS.get(id(isa))
    if pre is None:
        pre = _EXPANDERS[id(isa)] = cpp.Preprocessor(None, {})
        pre.macros = {name: cpp.Macro(params, tuple(syntax.tokens(isa.macros[name].body)))
                      for name, params in PARAMS.items()}
    return syntax.unhide(pre.expand(syntax.tokens(text)))


def _const_type(n: syntax.Num) -> Type:
    if isinstance(n.value, float):
        return ir.F32 if "f" in n.suffix else ir.F64
    unsigned, long = "u" in n.suffix, "l" in n.suffix
    for t in (ir.S32, ir.U32, ir.S64, ir.U64):
        if (long and t.bits < 64) or (unsigned and t.signed):
            continue
        if n.value < (1 << (t.bits - t.signed)):
            return t
    raise CompileError(f"constant {n.value} too wide")


def conv(t: Type, x) -> object:
    if x.t == t:
        return x
    if t.kind in ("vec", "pair", "qreg") or x.t.kind in ("vec", "pair", "qreg", "void"):
        raise CompileError(f"cannot convert {x.t} to {t}")
    if isinstance(x, ir.Const) and t.kind == "int" and x.t.kind == "int":
        v = x.value & ((1 << t.bits) - 1)
        return ir.Const(t, v - (1 << t.bits) if t.signed and v >> (t.bits - 1) else v)
    return ir.Conv(t, x)


def _truth(x) -> object:
    """A scalar as a C condition (nonzero)."""
    if x.t.kind not in ("int", "float"):
        raise CompileError(f"{x.t} used as a condition")
    return x


class _Lowering:
    def __init__(self, isa: ISA, insn: Insn):
        self.isa = isa
        self.vars: dict[str, Type] = {}
        self.inputs: list[tuple[str, Type]] = []
        self.outputs: list[tuple[str, Type]] = []
        for o in ops.parse(insn.syntax):
            if o.name in self.vars:
                continue
            t = operand_type(o)
            self.vars[o.name] = t
            if o.read:
                self.inputs.append((o.name, t))
            if o.written:
                self.outputs.append((o.name, t))
        self.regnums = {o.name[:-1] + "N" for o in ops.parse(insn.syntax) if o.cls not in "#NO"} - set(self.vars)
        for n in self.regnums:  # register numbers (RsN, MuN): inputs when the semantics use them
            self.vars[n] = ir.S32
        self.vars["EA"] = ir.U32
        self.pre: list = []
        self.tmp = 0
        self.scopes: list[dict[str, str]] = [{}]  # per enclosing block: its declarations -> their variables

    # ---- statements ----
    def block(self, stmts) -> tuple:
        saved, self.pre = self.pre, []
        for s in stmts:
            self.statement(s)
        out, self.pre = tuple(self.pre), saved
        return out

    def statement(self, s) -> None:
        if isinstance(s, syntax.Block):
            self.scopes.append({})
            for x in s.body:
                self.statement(x)
            self.scopes.pop()
        elif isinstance(s, syntax.ExprStmt):
            self.effect(s.x)
        elif isinstance(s, syntax.If):
            c = _truth(self.expr(s.c))
            self.pre.append(ir.If(c, self.block([s.then]), self.block([s.orelse] if s.orelse else [])))
        elif isinstance(s, syntax.For):
            if s.init is not None:
                self.statement(s.init if isinstance(s.init, syntax.Decl) else syntax.ExprStmt(s.init))
            self._loop(s.cond, s.body, s.step, True)
        elif isinstance(s, syntax.While):
            self._loop(s.c, s.body, None, not s.do)
        elif isinstance(s, syntax.Decl):
            self.declare(s)
        elif isinstance(s, syntax.Switch):
            self.switch(s)
        elif isinstance(s, syntax.Jump):
            self.pre.append(ir.Jump(s.kind))
        else:
            raise CompileError(f"statement {type(s).__name__}")

    def _loop(self, cond, body, step, test_first: bool) -> None:
        if not test_first and isinstance(cond, syntax.Num) and cond.value == 0 and not _jumps(body):
            self.statement(body)  # do { ... } while (0): a statement wrapper
            return
        saved, self.pre = self.pre, []
        c = _truth(self.expr(cond)) if cond is not None else ir.Const(ir.S32, 1)
        pre, self.pre = tuple(self.pre), saved
        stepped = self.block([syntax.ExprStmt(step)] if step is not None else [])
        saved.append(ir.Loop(pre, c, self.block([body]), stepped, test_first))

    def declare(self, d: syntax.Decl) -> None:
        t = C_TYPES.get(d.type.replace("const ", "").strip())
        if t is None:
            raise CompileError(f"type {d.type!r}")
        for name, init, size in d.vars:
            if size is not None:
                raise CompileError("local array")
            here = self.scopes[-1]
            if name in here:
                name = here[name]
            elif any(name in outer for outer in self.scopes[1:-1]):  # shadows a local of an enclosing block
                self.tmp += 1
                here[name] = f"{name}_{self.tmp}"  # (a macro's `int offset` inside a body's `offset`)
                name = here[name]
            else:
                here[name] = name
            if self.vars.get(name, t) != t:
                raise CompileError(f"{name} redeclared as {t}")
            self.vars[name] = t
            self.pre.append(ir.Local(ir.Var(t, name)))
            if init is not None:
                self.pre.append(ir.Set(ir.Var(t, name), self.convert(t, self.expr(init))))

    def switch(self, s: syntax.Switch) -> None:
        x = self.expr(s.x)
        chain: tuple = ()
        for value, body in reversed(s.cases):
            if body and isinstance(body[-1], syntax.Jump) and body[-1].kind == "break":
                body = body[:-1]
            elif chain or (value is not None and not body):
                raise CompileError("switch case falls through")
            stmts = self.block(body)
            if value is None:
                chain = stmts
            else:
                v = self.expr(value)
                t = ir.common(x.t, v.t)
                chain = (ir.If(ir.Bin(t, "==", conv(t, x), conv(t, v)), stmts, chain),)
        self.pre.extend(chain)

    def effect(self, x) -> None:
        if isinstance(x, syntax.Call) and x.name == "fPART1":  # compound compare-jump: the compare runs first
            for a in x.args:
                self.statement(a if isinstance(a, syntax.Block) else syntax.ExprStmt(a))
            return
        if isinstance(x, syntax.Unary) and x.op.startswith("post"):  # its old value is not needed
            x = syntax.Unary("pre" + x.op[4:], x.x)
        v = self.expr(x, void_ok=True)
        if isinstance(v, ir.Prim):  # a primitive called for its effect (its value, if any, unused)
            self.pre.append(ir.Do(v))

    # ---- expressions ----
    def resolve(self, name: str) -> str:
        """The variable a name means here (block-local declarations shadow outer ones)."""
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return name

    def convert(self, t: Type, x) -> object:
        if t.kind in ("vec", "pair", "qreg") and x.t == t:
            return x
        return conv(t, x)

    def temp(self, t: Type) -> ir.Var:
        self.tmp += 1
        v = ir.Var(t, f"_t{self.tmp}")
        self.vars[v.name] = t
        return v

    def side(self, node) -> tuple[object, tuple]:
        """Lower node on its own, returning its value and the statements it needs."""
        saved, self.pre = self.pre, []
        v = self.expr(node)
        out, self.pre = tuple(self.pre), saved
        return v, out

    def expr(self, n, void_ok: bool = False) -> object:
        if isinstance(n, syntax.Num):
            return ir.Const(_const_type(n), n.value)
        if isinstance(n, syntax.Name):
            name = self.resolve(n.id)
            if name in self.vars:
                if name in self.regnums and (name, ir.S32) not in self.inputs:
                    self.inputs.append((name, ir.S32))
                return ir.Var(self.vars[name], name)
            if n.id in CONSTANTS:
                return ir.Const(ir.S32, CONSTANTS[n.id])
            if n.id in PRIMITIVES:  # CANCEL, fLSBNEW0 ...: used without ()
                return self.call(syntax.Call(n.id, ()), void_ok)
            raise CompileError(f"unknown name {n.id}")
        if isinstance(n, syntax.Call):
            return self.call(n, void_ok)
        if isinstance(n, syntax.Index | syntax.Member):
            return self.element(n)
        if isinstance(n, syntax.Cast):
            t = C_TYPES.get(n.type.replace("const ", ""))
            if t is None:
                raise CompileError(f"cast to {n.type!r}")
            return self.convert(t, self.expr(n.x))
        if isinstance(n, syntax.Sizeof):
            return ir.Const(ir.U64, self.expr(n.x).t.bits // 8)
        if isinstance(n, syntax.Unary):
            return self.unary(n)
        if isinstance(n, syntax.Binary):
            return self.binary(n)
        if isinstance(n, syntax.Assign):
            return self.assign(n)
        if isinstance(n, syntax.Cond):
            c = _truth(self.expr(n.c))
            (a, pa), (b, pb) = self.side(n.a), self.side(n.b)
            t = a.t if a.t == b.t else ir.common(a.t, b.t)
            a, b = self.convert(t, a), self.convert(t, b)
            if not pa and not pb:
                return ir.Select(t, c, a, b)
            v = self.temp(t)
            self.pre.append(ir.If(c, pa + (ir.Set(v, a),), pb + (ir.Set(v, b),)))
            return v
        if isinstance(n, syntax.StmtExpr):
            *stmts, last = n.body.body
            for s in stmts:
                self.statement(s)
            if not isinstance(last, syntax.ExprStmt):
                raise CompileError("statement expression without a value")
            return self.expr(last.x)
        if isinstance(n, syntax.Raw):
            raise CompileError(f"unparsed argument {n.text!r}")
        raise CompileError(f"expression {type(n).__name__}")

    def call(self, n: syntax.Call, void_ok: bool) -> object:
        name = n.name
        if name == "fVECLOGSIZE":
            return ir.Const(ir.S32, _VEC_LOG_SIZE)
        if name not in PRIMITIVES:
            raise CompileError(f"no rule for {name}")
        if name in _CANCEL:
            self.pre.append(ir.Jump("cancel"))
            return ir.Const(ir.VOID, 0)
        args = []
        for a in n.args:
            if isinstance(a, syntax.Name) and a.id in _CONTEXT:
                continue
            if isinstance(a, syntax.Name) and self.resolve(a.id) not in self.vars and a.id not in CONSTANTS:
                args.append(a.id)  # a register or mode name (REG_LR, COF_TYPE_JUMP)
            elif isinstance(a, syntax.Raw) and (not a.text or a.text.startswith('"')):
                args.append(a.text)  # an empty argument, a message string
            else:
                args.append(self.expr(a))
        t = C_TYPES[PRIMITIVES[name]]
        if name == "fcirc_add":  # the M register's number picks the CS register holding the buffer start
            args.append(self.expr(syntax.Name("MuN")))
        if name in _BY_REFERENCE:  # the call's value is item 0 of its result, the arguments' new values follow
            result = self.temp(ir.I(128, False))
            self.pre.append(ir.Set(result, ir.Prim(result.t, name, tuple(args))))
            for k, pos in enumerate(_BY_REFERENCE[name], 1):
                if not isinstance(args[pos], ir.Var):
                    raise CompileError(f"{name}: argument {pos} is not a variable")
                self.pre.append(ir.Set(args[pos], ir.Prim(args[pos].t, "_item", (result, ir.Const(ir.S32, k)))))
            return ir.Prim(t, "_item", (result, ir.Const(ir.S32, 0)))
        if name in _OUT_ARG:
            k, keep = _OUT_ARG[name]
            target = args[k] if keep else args.pop(k)
            if not isinstance(target, ir.Var | ir.Lane | ir.Half):
                raise CompileError(f"{name}: argument {k} is not assignable")
            self.pre.append(ir.Set(target, ir.Prim(target.t, name, tuple(args))))
            return ir.Const(ir.VOID, 0)
        if t == ir.VOID and not void_ok:
            raise CompileError(f"{name} used as a value")
        return ir.Prim(t, name, tuple(args))

    def element(self, n) -> object:
        index, base = [], n
        while isinstance(base, syntax.Index):
            index.insert(0, base.index)
            base = base.base
        if isinstance(base, syntax.Name) and base.id in TABLES:  # a constant table (emu.dsp.tables)
            if len(index) != len(TABLES[base.id][1]):
                raise CompileError(f"{base.id} indexed with {len(index)} subscripts")
            return ir.Prim(ir.U8, "_table", (base.id, *(self.expr(i) for i in index)))
        if isinstance(n, syntax.Index) and isinstance(n.base, syntax.Member):
            base = self.expr(n.base.base)
            field, idx = n.base.field, self.expr(n.index)
            if base.t == ir.PAIR and field == "v":
                return ir.Half(ir.VEC, base, idx)
            if base.t.kind in ("vec", "pair", "qreg") and field in LANES:
                return ir.Lane(LANES[field], base, idx)
        raise CompileError(f"element access {n}")

    def unary(self, n: syntax.Unary) -> object:
        if n.op in ("pre++", "pre--", "post++", "post--"):
            target = self.expr(n.x)
            old = None
            if n.op.startswith("post"):
                old = self.temp(target.t)
                self.pre.append(ir.Set(old, target))
            t = ir.promote(target.t)
            step = ir.Bin(t, n.op[-2], conv(t, target), ir.Const(t, 1))
            self.pre.append(ir.Set(target, conv(target.t, step)))
            return old if old is not None else target
        x = self.expr(n.x)
        if n.op == "+":
            return conv(ir.promote(x.t), x)
        if n.op == "!":
            return _fold(ir.Un(ir.S32, "!", _truth(x)))
        if n.op in ("-", "~") and x.t.kind in ("int", "float"):
            t = ir.promote(x.t)
            return _fold(ir.Un(t, n.op, conv(t, x)))
        raise CompileError(f"unary {n.op} on {x.t}")

    def binary(self, n: syntax.Binary) -> object:
        if n.op == ",":
            self.effect(n.a)
            return self.expr(n.b)
        a = self.expr(n.a)
        if n.op in ("&&", "||"):
            b, pb = self.side(n.b)
            if pb:
                v = self.temp(ir.S32)
                test = ir.Bin(ir.S32, "!=", conv(ir.S32, ir.Un(ir.S32, "!", _truth(b))), ir.Const(ir.S32, 1))
                done = ir.Const(ir.S32, int(n.op == "||"))
                then, orelse = (pb + (ir.Set(v, test),),), ((ir.Set(v, done),),)
                self.pre.append(ir.If(_truth(a), *((orelse[0], then[0]) if n.op == "||" else (then[0], orelse[0]))))
                return v
            return _fold(ir.Bin(ir.S32, n.op, _truth(a), _truth(b)))
        b = self.expr(n.b)
        if a.t.kind not in ("int", "float") or b.t.kind not in ("int", "float"):
            raise CompileError(f"{a.t} {n.op} {b.t}")
        if n.op in ("<<", ">>"):
            t = ir.promote(a.t)
            return _fold(ir.Bin(t, n.op, conv(t, a), conv(ir.promote(b.t), b)))
        t = ir.common(a.t, b.t)
        if n.op in ("==", "!=", "<", ">", "<=", ">="):
            return _fold(ir.Bin(ir.S32, n.op, conv(t, a), conv(t, b)))
        if t.kind == "float" and n.op not in ("+", "-", "*", "/"):
            raise CompileError(f"float {n.op}")
        return _fold(ir.Bin(t, n.op, conv(t, a), conv(t, b)))

    def assign(self, n: syntax.Assign) -> object:
        target = self.expr(n.target)
        if not isinstance(target, ir.Var | ir.Lane | ir.Half):
            raise CompileError("assignment to a non-lvalue")
        if n.op == "=":
            value = self.expr(n.value)
        else:
            value = self.binary(syntax.Binary(n.op[:-1], n.target, n.value))
        self.pre.append(ir.Set(target, self.convert(target.t, value)))
        return target


def _jumps(s) -> bool:
    """Whether a statement has a break or continue that is not inside a nested loop."""
    if isinstance(s, syntax.Jump):
        return s.kind in ("break", "continue")
    if isinstance(s, syntax.Block):
        return any(_jumps(x) for x in s.body)
    if isinstance(s, syntax.If):
        return _jumps(s.then) or (s.orelse is not None and _jumps(s.orelse))
    return isinstance(s, syntax.Switch) and any(_jumps(x) for _, body in s.cases for x in body[:-1])


def _fold(x):
    """Constant-fold integer operations on constants (C semantics, as the backend would compute them)."""
    if isinstance(x, ir.Bin) and isinstance(x.a, ir.Const) and isinstance(x.b, ir.Const) and x.t.kind == "int":
        a, b, op = x.a.value, x.b.value, x.op
        if op in ("<<", ">>") and not 0 <= b < x.a.t.bits:
            return x
        if op in ("/", "%") and b == 0:
            return x
        v = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "&": lambda: a & b, "|": lambda: a | b,
             "^": lambda: a ^ b, "<<": lambda: a << b, ">>": lambda: a >> b, "==": lambda: int(a == b),
             "!=": lambda: int(a != b), "<": lambda: int(a < b), ">": lambda: int(a > b), "<=": lambda: int(a <= b),
             ">=": lambda: int(a >= b), "/": lambda: runtime.cdiv(a, b), "%": lambda: runtime.cmod(a, b),
             "&&": lambda: int(bool(a and b)), "||": lambda: int(bool(a or b))}[op]()
        return conv(x.t, ir.Const(ir.I(max(x.t.bits, v.bit_length() + 1), True), v))
    if isinstance(x, ir.Un) and isinstance(x.x, ir.Const) and x.t.kind == "int":
        v = {"-": -x.x.value, "~": ~x.x.value, "!": int(not x.x.value)}[x.op]
        return conv(x.t, ir.Const(ir.I(max(x.t.bits, v.bit_length() + 1), True), v))
    return x


def lower(isa: ISA, insn: Insn) -> Semantics:
    text, reason = FIXUPS.get(insn.tag, (insn.semantics, ""))
    if text is None:
        raise CompileError(f"withheld (emu.dsp.fixups): {reason}")
    try:
        tree = syntax.parse(expand(isa, text))
    except (syntax.ParseError, cpp.CppError) as e:
        raise CompileError(f"parse: {e}") from None
    lo = _Lowering(isa, insn)
    body = lo.block([tree])
    return Semantics(insn.tag, tuple(lo.inputs), tuple(lo.outputs), body)
