"""Lexer, syntax tree and parser of the AMD ISA pseudocode language (the `Op.pcode` text of emu.amd.isa).

The language is C/Verilog-like: statements end with `;` or a line break, blocks are `if .. then .. elsif ..
else .. endif`, `for v in lo : hi do .. endfor` and `while c do .. endwhile`; values carry types by access
(`S0.u32`, `x[31 : 16].f16`), literals may be sized (`16'0U`, `1'1U`, `8'0xff`) and `N'T(expr)` converts
to an N-bit value of kind T.
"""
from __future__ import annotations

import re
from dataclasses import dataclass


class PcodeSyntaxError(ValueError):
    """Text that is not pseudocode; the message names the line and column."""


# ---- tokens -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Tok:
    kind: str  # num, sized, type, id, op, str, eof
    text: str
    pos: int
    value: object = None  # num/sized: (value, kind|None, bits|None); type: (bits, kind)


_TOKEN = re.compile(r"""
  (?P<ws>[ \t\r\n]+|//[^\n]*)
 |(?P<sized>(?P<sbits>\d+)'(?P<sneg>-?)(?P<snum>0x[0-9a-fA-F]+|\d+\.\d+|\d+)(?P<ssuf>[UIF]?)(?![A-Za-z0-9_]))
 |(?P<type>(?P<tbits>\d+)'(?P<tkind>BF|[IUFB])(?![A-Za-z0-9_]))
 |(?P<num>(?:0x[0-9a-fA-F]+|\d+\.\d+(?:[eE][-+]?\d+)?|\d+)(?P<suf>ULL|LL|UL|U|L|F)?(?![A-Za-z0-9_]))
 |(?P<id>[A-Za-z_][A-Za-z0-9_]*)
 |(?P<str>"[^"\n]*")
 |(?P<op>\+:|<<=|>>=|\*\*|<<|>>|<=|>=|==|!=|<>|&&|\|\||\+=|-=|\*=|/=|\|=|&=|\^=|\+\+|--|\.\.|[-+*/%&|^~!?:;,()\[\]{}=<>.'])
""", re.X)

_SUFFIX = {"U": ("u", 32), "UL": ("u", 32), "ULL": ("u", 64), "LL": ("i", 64), "L": ("i", 32), "F": ("f", 32)}


def _number(text: str) -> int | float:
    if text.startswith("0x"):
        return int(text, 16)
    return float(text) if "." in text else int(text)


def tokenize(src: str) -> list[Tok]:
    toks, pos = [], 0
    while pos < len(src):
        m = _TOKEN.match(src, pos)
        if not m:
            raise PcodeSyntaxError(f"{_where(src, pos)}: unexpected character {src[pos]!r}")
        kind = m.lastgroup if m.lastgroup in ("ws", "id", "str", "op") else None
        if m.group("sized"):
            val = _number(m.group("snum"))
            val = -val if m.group("sneg") else val
            k = {"U": "u", "I": "i", "F": "f", "": None}[m.group("ssuf")]
            if isinstance(val, float):
                k = "f"
            toks.append(Tok("sized", m.group(0), pos, (val, k, int(m.group("sbits")))))
        elif m.group("type"):
            toks.append(Tok("type", m.group(0), pos, (int(m.group("tbits")), m.group("tkind").lower())))
        elif m.group("num"):
            body = m.group(0)[: len(m.group(0)) - len(m.group("suf") or "")]
            val = _number(body)
            k, bits = _SUFFIX.get(m.group("suf") or "", (None, None))
            if isinstance(val, float) and k != "f":
                k, bits = "f", None  # an unsuffixed float literal takes its partner's float type
            toks.append(Tok("num", m.group(0), pos, (val, k, bits)))
        elif kind != "ws":
            toks.append(Tok(kind, m.group(0), pos))
        pos = m.end()
    toks.append(Tok("eof", "", len(src)))
    return toks


def _where(src: str, pos: int) -> str:
    line = src.count("\n", 0, pos) + 1
    col = pos - (src.rfind("\n", 0, pos) + 1) + 1
    return f"line {line} col {col}"


# ---- syntax tree --------------------------------------------------------------------------------------------

class Node:
    pass


@dataclass(frozen=True)
class Num(Node):
    value: int | float
    kind: str | None  # u, i, f, b or None (takes the type of its partner)
    bits: int | None


@dataclass(frozen=True)
class Name(Node):
    id: str


@dataclass(frozen=True)
class Field(Node):  # x.u32 (typed access) or x.IEEE (named field)
    x: Node
    name: str


@dataclass(frozen=True)
class Index(Node):  # x[i]
    x: Node
    i: Node


@dataclass(frozen=True)
class Slice(Node):  # x[hi : lo]
    x: Node
    hi: Node
    lo: Node


@dataclass(frozen=True)
class PartSelect(Node):  # x[base +: width]
    x: Node
    base: Node
    width: Node


@dataclass(frozen=True)
class Unary(Node):
    op: str
    x: Node


@dataclass(frozen=True)
class Binary(Node):
    op: str
    a: Node
    b: Node


@dataclass(frozen=True)
class Ternary(Node):
    cond: Node
    a: Node
    b: Node


@dataclass(frozen=True)
class Call(Node):
    name: str
    args: tuple[Node, ...]


@dataclass(frozen=True)
class Cast(Node):  # N'T(x)
    bits: int
    kind: str
    x: Node


@dataclass(frozen=True)
class Concat(Node):  # { hi, ..., lo }
    parts: tuple[Node, ...]


@dataclass(frozen=True)
class Lambda(Node):
    params: tuple[str, ...]
    body: Node | tuple  # an expression or a statement list


@dataclass(frozen=True)
class Str(Node):
    text: str


@dataclass(frozen=True)
class Assign(Node):
    target: Node
    op: str  # '=', '+=', ...
    value: Node


@dataclass(frozen=True)
class If(Node):
    arms: tuple[tuple[Node, tuple], ...]  # (condition, body)
    orelse: tuple


@dataclass(frozen=True)
class For(Node):
    var: str
    lo: Node
    hi: Node
    body: tuple


@dataclass(frozen=True)
class While(Node):
    cond: Node
    body: tuple


@dataclass(frozen=True)
class Declare(Node):
    name: str
    bits: int
    kind: str
    count: int | None  # array length or None


@dataclass(frozen=True)
class Break(Node):
    pass


@dataclass(frozen=True)
class Return(Node):
    value: Node


@dataclass(frozen=True)
class ExprStmt(Node):
    x: Node


# ---- parser -------------------------------------------------------------------------------------------------

_BINARY = [  # lowest to highest precedence
    ("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!=", "<>"), ("<", "<=", ">", ">="), ("<<", ">>"),
    ("+", "-"), ("*", "/", "%"), ("**",),
]
_ASSIGN_OPS = ("=", "+=", "-=", "*=", "/=", "|=", "&=", "^=", "<<=", ">>=")
_BLOCK_END = ("endif", "elsif", "else", "endfor", "endwhile", "end")
KEYWORDS = frozenset("if then elsif else endif for do endfor while endwhile declare break return lambda".split())


class Parser:
    def __init__(self, src: str):
        self.src = src
        self.toks = tokenize(src)
        self.i = 0

    # token helpers
    @property
    def tok(self) -> Tok:
        return self.toks[self.i]

    def peek(self, n: int = 1) -> Tok:
        return self.toks[min(self.i + n, len(self.toks) - 1)]

    def at(self, *texts: str) -> bool:
        return self.tok.kind in ("op", "id") and self.tok.text in texts

    def take(self, *texts: str) -> Tok | None:
        if self.at(*texts):
            self.i += 1
            return self.toks[self.i - 1]
        return None

    def expect(self, text: str) -> Tok:
        if not self.at(text):
            self.error(f"expected {text!r}")
        self.i += 1
        return self.toks[self.i - 1]

    def error(self, msg: str):
        t = self.tok
        raise PcodeSyntaxError(f"{_where(self.src, t.pos)}: {msg}, found {t.text or 'end of text'!r}")

    # statements
    def program(self) -> tuple:
        body = self.block()
        if self.tok.kind != "eof":
            self.error("expected a statement")
        return body

    def block(self, stop: tuple[str, ...] = _BLOCK_END) -> tuple:
        out = []
        while self.tok.kind != "eof" and not (self.tok.kind == "id" and self.tok.text in stop) and not self.at(")"):
            if self.take(";"):
                continue
            out.append(self.statement())
        return tuple(out)

    def statement(self) -> Node:
        t = self.tok
        if t.kind == "id":
            if t.text == "if":
                return self.if_stmt()
            if t.text == "for":
                return self.for_stmt()
            if t.text == "while":
                self.i += 1
                cond = self.expr()
                self.expect("do")
                body = self.block()
                self.expect("endwhile")
                return While(cond, body)
            if t.text == "declare":
                self.i += 1
                name = self.ident()
                self.expect(":")
                if self.tok.kind != "type":
                    self.error("expected a type like 32'U")
                bits, kind = self.tok.value
                self.i += 1
                count = None
                if self.take("["):
                    count = self.int_const()
                    self.expect("]")
                return Declare(name, bits, kind, count)
            if t.text == "break":
                self.i += 1
                return Break()
            if t.text == "return":
                self.i += 1
                return Return(self.expr())
        x = self.expr()
        if self.tok.kind == "op" and self.tok.text in _ASSIGN_OPS:
            op = self.tok.text
            self.i += 1
            if self.at("lambda") and op == "=":
                return Assign(x, op, self.lambda_expr())
            return Assign(x, op, self.assign_rhs())
        return ExprStmt(x)

    def assign_rhs(self) -> Node:  # chained assignment a = b = expr
        x = self.expr()
        if self.at("="):
            self.i += 1
            return Assign(x, "=", self.assign_rhs())
        return x

    def ident(self) -> str:
        if self.tok.kind != "id":
            self.error("expected a name")
        self.i += 1
        return self.toks[self.i - 1].text

    def int_const(self) -> int:
        if self.tok.kind != "num" or not isinstance(self.tok.value[0], int):
            self.error("expected an integer")
        self.i += 1
        return self.toks[self.i - 1].value[0]

    def if_stmt(self) -> If:
        arms = []
        self.expect("if")
        while True:
            cond = self.expr()
            self.take("then")
            arms.append((cond, self.block()))
            if self.take("elsif"):
                continue
            break
        orelse = ()
        if self.take("else"):
            orelse = self.block()
        self.expect("endif")
        return If(tuple(arms), orelse)

    def for_stmt(self) -> For:
        self.expect("for")
        var = self.ident()
        self.expect("in")
        lo = self.expr()
        self.expect(":")
        hi = self.expr()
        self.expect("do")
        body = self.block()
        self.expect("endfor")
        return For(var, lo, hi, body)

    def lambda_expr(self) -> Lambda:
        self.expect("lambda")
        self.expect("(")
        params = []
        while not self.take(")"):
            params.append(self.ident())
            self.take(",")
        self.expect("(")
        if self.tok.kind == "id" and self.tok.text in ("if", "declare", "for", "return"):
            body = self.block()
        else:
            body = self.expr()
        self.expect(")")
        return Lambda(tuple(params), body)

    # expressions
    def expr(self) -> Node:
        cond = self.binary(0)
        if self.take("?"):
            a = self.expr()
            self.expect(":")
            return Ternary(cond, a, self.expr())
        return cond

    def binary(self, level: int) -> Node:
        if level == len(_BINARY):
            return self.unary()
        x = self.binary(level + 1)
        while self.tok.kind == "op" and self.tok.text in _BINARY[level]:
            op = self.tok.text
            self.i += 1
            y = self.binary(level + 1)
            x = Binary(op, x, y)
        return x

    def unary(self) -> Node:
        if self.tok.kind == "op" and self.tok.text in ("-", "+", "!", "~"):
            op = self.tok.text
            self.i += 1
            x = self.unary()
            if op == "-" and isinstance(x, Num):
                return Num(-x.value, x.kind, x.bits)
            return x if op == "+" else Unary(op, x)
        return self.postfix(self.primary())

    def primary(self) -> Node:
        t = self.tok
        self.i += 1
        if t.kind in ("num", "sized"):
            val, kind, bits = t.value
            return Num(val, kind, bits)
        if t.kind == "type":
            bits, kind = t.value
            self.expect("(")
            x = self.expr()
            self.expect(")")
            return Cast(bits, kind, x)
        if t.kind == "str":
            return Str(t.text[1:-1])
        if t.kind == "id" and t.text not in KEYWORDS:
            if self.at("("):
                self.i += 1
                args = []
                while not self.take(")"):
                    args.append(self.expr())
                    if not self.at(")"):
                        self.expect(",")
                return Call(t.text, tuple(args))
            return Name(t.text)
        if t.kind == "op" and t.text == "(":
            x = self.expr()
            self.expect(")")
            return x
        if t.kind == "op" and t.text == "{":
            parts = [self.expr()]
            while self.take(","):
                parts.append(self.expr())
            self.expect("}")
            return Concat(tuple(parts))
        self.i -= 1
        self.error("expected an expression")

    def postfix(self, x: Node) -> Node:
        while True:
            if self.take("."):
                x = Field(x, self.ident())
            elif self.take("["):
                i = self.expr()
                if self.take(":"):
                    x = Slice(x, i, self.expr())
                elif self.take("+:"):  # Verilog part-select x[base +: width]
                    x = PartSelect(x, i, self.expr())
                else:
                    x = Index(x, i)
                self.expect("]")
            else:
                return x


def parse(src: str) -> tuple:
    """The statement list of a pcode text; raises PcodeSyntaxError naming line and column."""
    return Parser(src).program()


def walk(tree):
    """Every node of a syntax tree (a node or nested tuples of them), parents first."""
    if isinstance(tree, tuple):
        for t in tree:
            yield from walk(t)
    elif isinstance(tree, Node):
        yield tree
        for v in tree.__dict__.values():
            yield from walk(v)


# ---- printing -----------------------------------------------------------------------------------------------

def _real(v: int | float) -> str:
    if isinstance(v, int):
        return repr(v)
    text = repr(v)
    mant, _, exp = text.partition("e")
    return (mant if "." in mant else mant + ".0") + (f"e{exp}" if exp else "")


def unparse(tree: tuple | Node) -> str:
    """Pcode text of a syntax tree, fully parenthesized; parse(unparse(t)) == t."""
    if isinstance(tree, tuple):
        return ";\n".join(unparse(s) for s in tree)
    n = tree
    if isinstance(n, Num):
        if n.kind is None and n.bits is None:
            return repr(n.value) if n.value >= 0 else f"(-{-n.value!r})"
        if isinstance(n.value, float) and n.value != n.value:
            raise ValueError("NaN literal")
        sign, v = ("-", -n.value) if n.value < 0 else ("", n.value)
        if n.bits is not None:
            suffix = {"u": "U", "i": "I", "f": "" if isinstance(v, float) else "F", None: ""}[n.kind]
            text = f"{n.bits}'{_real(v)}{suffix}"
            return text if not sign else f"(-{text})"
        suffix = {("u", 32): "U", ("u", 64): "ULL", ("i", 64): "LL", ("i", 32): "L", ("f", 32): "F",
                  ("f", None): ""}[(n.kind, n.bits)]
        text = _real(v) + suffix
        return text if not sign else f"(-{text})"
    if isinstance(n, Name):
        return n.id
    if isinstance(n, Field):
        return f"{unparse(n.x)}.{n.name}"
    if isinstance(n, Index):
        return f"{unparse(n.x)}[{unparse(n.i)}]"
    if isinstance(n, Slice):
        return f"{unparse(n.x)}[{unparse(n.hi)} : {unparse(n.lo)}]"
    if isinstance(n, PartSelect):
        return f"{unparse(n.x)}[{unparse(n.base)} +: {unparse(n.width)}]"
    if isinstance(n, Unary):
        return f"({n.op}{unparse(n.x)})"
    if isinstance(n, Binary):
        return f"({unparse(n.a)} {n.op} {unparse(n.b)})"
    if isinstance(n, Ternary):
        return f"({unparse(n.cond)} ? {unparse(n.a)} : {unparse(n.b)})"
    if isinstance(n, Call):
        return f"{n.name}({', '.join(unparse(a) for a in n.args)})"
    if isinstance(n, Cast):
        return f"{n.bits}'{'BF' if n.kind == 'bf' else n.kind.upper()}({unparse(n.x)})"
    if isinstance(n, Concat):
        return "{ " + ", ".join(unparse(p) for p in n.parts) + " }"
    if isinstance(n, Lambda):
        body = unparse(n.body) if isinstance(n.body, Node) else unparse(n.body)
        return f"lambda({', '.join(n.params)}) ({body})"
    if isinstance(n, Str):
        return f'"{n.text}"'
    if isinstance(n, Assign):
        return f"{unparse(n.target)} {n.op} {unparse(n.value)}"
    if isinstance(n, If):
        arms = " elsif ".join(f"{unparse(c)} then\n{unparse(b)}\n" for c, b in n.arms)
        return f"if {arms}" + (f"else\n{unparse(n.orelse)}\n" if n.orelse else "") + "endif"
    if isinstance(n, For):
        return f"for {n.var} in {unparse(n.lo)} : {unparse(n.hi)} do\n{unparse(n.body)}\nendfor"
    if isinstance(n, While):
        return f"while {unparse(n.cond)} do\n{unparse(n.body)}\nendwhile"
    if isinstance(n, Declare):
        count = f"[{n.count}]" if n.count is not None else ""
        return f"declare {n.name} : {n.bits}'{'BF' if n.kind == 'bf' else n.kind.upper()}{count}"
    if isinstance(n, Break):
        return "break"
    if isinstance(n, Return):
        return f"return {unparse(n.value)}"
    if isinstance(n, ExprStmt):
        return unparse(n.x)
    raise TypeError(f"cannot print {type(n).__name__}")
