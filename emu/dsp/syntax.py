"""Parser for the vendor's semantics: C statements and expressions over the macros of macros.def.

The text comes from the instruction table after preprocessing; macro invocations stay calls (the lowering
knows them), `fHIDE(x)` is unwrapped (it only hides declarations from the vendor's documentation tools), and
a macro argument that is not an expression (a size letter such as `u`, `4_8`, an empty argument) is kept as
`Raw` tokens. Statement-like macro calls may omit their `;` as the vendor text does.
"""
from __future__ import annotations

from dataclasses import dataclass

from emu.dsp.cpp import Tok, spell, tokenize


class ParseError(ValueError):
    pass


# ---- expressions ----
@dataclass(frozen=True, slots=True)
class Num:
    value: int | float
    suffix: str  # u, ll, ull, f ... lower case


@dataclass(frozen=True, slots=True)
class Name:
    id: str


@dataclass(frozen=True, slots=True)
class Raw:
    text: str


@dataclass(frozen=True, slots=True)
class Call:
    name: str
    args: tuple


@dataclass(frozen=True, slots=True)
class Index:
    base: object
    index: object


@dataclass(frozen=True, slots=True)
class Member:
    base: object
    field: str


@dataclass(frozen=True, slots=True)
class Unary:
    op: str  # - ~ ! + & * pre++ pre-- post++ post--
    x: object


@dataclass(frozen=True, slots=True)
class Binary:
    op: str
    a: object
    b: object


@dataclass(frozen=True, slots=True)
class Assign:
    op: str  # = += -= ...
    target: object
    value: object


@dataclass(frozen=True, slots=True)
class Cond:
    c: object
    a: object
    b: object


@dataclass(frozen=True, slots=True)
class Cast:
    type: str
    x: object


@dataclass(frozen=True, slots=True)
class Sizeof:
    x: object


@dataclass(frozen=True, slots=True)
class StmtExpr:
    """GNU ({ ...; value; }): the value of the last expression statement."""
    body: Block


# ---- statements ----
@dataclass(frozen=True, slots=True)
class Block:
    body: tuple


@dataclass(frozen=True, slots=True)
class If:
    c: object
    then: object
    orelse: object | None


@dataclass(frozen=True, slots=True)
class For:
    init: object | None
    cond: object | None
    step: object | None
    body: object


@dataclass(frozen=True, slots=True)
class While:
    c: object
    body: object
    do: bool  # do { } while (c)


@dataclass(frozen=True, slots=True)
class Switch:
    x: object
    cases: tuple  # ((value expr, or None for default, statements), ...) in order; C fall-through applies


@dataclass(frozen=True, slots=True)
class Decl:
    type: str
    vars: tuple  # ((name, init expr or None, array size or None), ...)


@dataclass(frozen=True, slots=True)
class ExprStmt:
    x: object


@dataclass(frozen=True, slots=True)
class Jump:
    kind: str  # return break continue


_TYPE_WORDS = frozenset({"int", "unsigned", "signed", "long", "short", "char", "float", "double", "const", "void",
                         "union", "struct"})
_BINARY = [("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!="), ("<", ">", "<=", ">="), ("<<", ">>"),
           ("+", "-"), ("*", "/", "%")]
_ASSIGN = frozenset({"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="})


def is_type(t: Tok) -> bool:
    return t.kind == "id" and (t.text in _TYPE_WORDS or t.text.endswith("_t"))


def _number(text: str) -> Num:
    body = text.rstrip("uUlL") if text[:2].lower() == "0x" else text.rstrip("uUlLfF")
    suffix = text[len(body):].lower()
    try:
        if body[:2].lower() == "0x" and "p" in body.lower():
            return Num(float.fromhex(body), suffix)
        if "." in body or ("e" in body.lower() and not body.lower().startswith("0x")):
            return Num(float(body), suffix)
        octal = len(body) > 1 and body[0] == "0" and body[1:].isdigit()
        return Num(int(body, 8) if octal else int(body, 0), suffix)
    except ValueError:
        raise ParseError(f"bad number {text!r}") from None


class _Parser:
    def __init__(self, toks: list[Tok]):
        self.toks = toks
        self.i = 0

    def peek(self, k: int = 0) -> Tok | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def at(self, text: str, k: int = 0) -> bool:
        t = self.peek(k)
        return t is not None and t.text == text and t.kind in ("op", "id")

    def next(self) -> Tok:
        t = self.peek()
        if t is None:
            raise ParseError("unexpected end")
        self.i += 1
        return t

    def expect(self, text: str) -> None:
        t = self.next()
        if t.text != text:
            raise ParseError(f"expected {text!r}, got {t.text!r} at {spell(self.toks[max(0, self.i - 4):self.i + 3])}")

    # statements
    def statement(self) -> object:
        t = self.peek()
        if t is None:
            raise ParseError("unexpected end")
        if t.text == "{":
            return self.block()
        if t.text == ";":
            self.i += 1
            return Block(())
        if t.kind == "id":
            if t.text == "if":
                self.i += 1
                self.expect("(")
                c = self.expr()
                self.expect(")")
                then = self.statement()
                orelse = None
                if self.at("else"):
                    self.i += 1
                    orelse = self.statement()
                return If(c, then, orelse)
            if t.text == "for":
                self.i += 1
                self.expect("(")
                init = None if self.at(";") else (self.decl() if is_type(self.peek()) else self.expr())
                self.expect(";")
                cond = None if self.at(";") else self.expr()
                self.expect(";")
                step = None if self.at(")") else self.expr()
                self.expect(")")
                return For(init, cond, step, self.statement())
            if t.text == "while":
                self.i += 1
                self.expect("(")
                c = self.expr()
                self.expect(")")
                return While(c, self.statement(), False)
            if t.text == "do":
                self.i += 1
                body = self.statement()
                self.expect("while")
                self.expect("(")
                c = self.expr()
                self.expect(")")
                self._semi(True)
                return While(c, body, True)
            if t.text == "switch":
                self.i += 1
                self.expect("(")
                x = self.expr()
                self.expect(")")
                self.expect("{")
                cases: list = []
                while not self.at("}"):
                    label = self.next()
                    value = None if label.text == "default" else self.ternary()
                    self.expect(":")
                    body = []
                    while not (self.at("case") or self.at("default") or self.at("}")):
                        body.append(self.statement())
                    cases.append((value, tuple(body)))
                self.i += 1
                return Switch(x, tuple(cases))
            if t.text in ("return", "break", "continue"):
                self.i += 1
                self._semi(True)
                return Jump(t.text)
            if is_type(t) and not self.at("(", 1):
                d = self.decl()
                self._semi(False)
                return d
        x = self.expr()
        self._semi(isinstance(x, Call))
        return ExprStmt(x)

    def _semi(self, optional: bool) -> None:
        if self.at(";"):
            self.i += 1
        elif not optional and self.peek() is not None and not self.at("}"):
            self.expect(";")

    def block(self) -> Block:
        self.expect("{")
        body = []
        while not self.at("}"):
            body.append(self.statement())
        self.i += 1
        return Block(tuple(body))

    def type_name(self) -> str:
        words = []
        while self.peek() is not None and is_type(self.peek()):
            words.append(self.next().text)
            if words[-1] in ("union", "struct"):
                words.append(spell(self._balanced_braces()))
        return " ".join(words)

    def _balanced_braces(self) -> list[Tok]:
        start, depth = self.i, 0
        while True:
            t = self.next()
            depth += {"{": 1, "}": -1}.get(t.text, 0)
            if depth == 0:
                return self.toks[start:self.i]

    def decl(self) -> Decl:
        ty = self.type_name()
        out = []
        while True:
            name = self.next()
            if name.kind != "id":
                raise ParseError(f"bad declarator {name.text!r}")
            size = None
            if self.at("["):
                self.i += 1
                size = self.expr()
                self.expect("]")
            init = None
            if self.at("="):
                self.i += 1
                init = self.assign()
            out.append((name.text, init, size))
            if not self.at(","):
                return Decl(ty, tuple(out))
            self.i += 1

    # expressions
    def expr(self) -> object:
        x = self.assign()
        while self.at(","):
            self.i += 1
            x = Binary(",", x, self.assign())
        return x

    def assign(self) -> object:
        x = self.ternary()
        t = self.peek()
        if t is not None and t.kind == "op" and t.text in _ASSIGN:
            self.i += 1
            return Assign(t.text, x, self.assign())
        return x

    def ternary(self) -> object:
        c = self.binary(0)
        if self.at("?"):
            self.i += 1
            a = self.assign()
            self.expect(":")
            return Cond(c, a, self.assign())
        return c

    def binary(self, level: int) -> object:
        if level == len(_BINARY):
            return self.unary()
        x = self.binary(level + 1)
        while (t := self.peek()) is not None and t.kind == "op" and t.text in _BINARY[level]:
            self.i += 1
            x = Binary(t.text, x, self.binary(level + 1))
        return x

    def unary(self) -> object:
        t = self.next()
        if t.kind == "op" and t.text in ("-", "+", "~", "!", "&", "*"):
            return Unary(t.text, self.unary())
        if t.kind == "op" and t.text in ("++", "--"):
            return Unary("pre" + t.text, self.unary())
        if t.text == "sizeof":
            return Sizeof(self.unary())
        if t.text == "(" and self.peek() is not None and is_type(self.peek()):
            ty = self.type_name()
            self.expect(")")
            return Cast(ty, self.unary())
        self.i -= 1
        return self.postfix(self.primary())

    def postfix(self, x: object) -> object:
        while True:
            if self.at("["):
                self.i += 1
                idx = self.expr()
                self.expect("]")
                x = Index(x, idx)
            elif self.at(".") or self.at("->"):
                self.i += 1
                x = Member(x, self.next().text)
            elif self.at("++") or self.at("--"):
                x = Unary("post" + self.next().text, x)
            else:
                return x

    def primary(self) -> object:
        t = self.next()
        if t.kind == "num":
            return _number(t.text)
        if t.kind in ("str", "chr"):
            return Raw(t.text)
        if t.text == "(":
            if self.at("{"):
                body = self.block()
                self.expect(")")
                return StmtExpr(body)
            x = self.expr()
            self.expect(")")
            return x
        if t.kind == "id":
            if self.at("("):
                self.i += 1
                return Call(t.text, tuple(self.arguments()))
            return Name(t.text)
        raise ParseError(f"unexpected {t.text!r}")

    def arguments(self) -> list[object]:
        """Arguments up to the closing ')': each an expression, else its raw tokens."""
        groups: list[list[Tok]] = [[]]
        depth = 0
        while True:
            t = self.next()
            if t.text in "([{" and t.kind == "op":
                depth += 1
            elif t.text in ")]}" and t.kind == "op":
                if depth == 0:
                    break
                depth -= 1
            elif t.text == "," and depth == 0:
                groups.append([])
                continue
            groups[-1].append(t)
        if groups == [[]]:
            return []
        return [_argument(g) for g in groups]


def _argument(toks: list[Tok]) -> object:
    if toks:
        p = _Parser(toks)
        try:
            x = p.expr()
            if p.i == len(toks):
                return x
            if is_type(toks[0]) or any(t.text == ";" for t in toks):  # a declaration or statements
                p = _Parser(toks)
                return Block(tuple(p.statement() for _ in iter(lambda: p.peek() is not None, False)))
        except ParseError:
            pass
    return Raw(spell(toks))


def unhide(toks: list[Tok]) -> list[Tok]:
    """fHIDE(x) -> x (its tokens keep apart from their neighbours)."""
    out: list[Tok] = []
    i = 0
    while i < len(toks):
        if toks[i].text == "fHIDE" and i + 1 < len(toks) and toks[i + 1].text == "(":
            depth, j = 0, i + 1
            while True:
                depth += {"(": 1, ")": -1}.get(toks[j].text, 0)
                if depth == 0:
                    break
                j += 1
            out += [Tok(t.kind, t.text, True) for t in unhide(toks[i + 2:j])]
            if j + 1 < len(toks):
                out.append(Tok(toks[j + 1].kind, toks[j + 1].text, True))
                j += 1
            i = j + 1
        else:
            out.append(toks[i])
            i += 1
    return out


def tokens(text: str) -> list[Tok]:
    return unhide([t for line in tokenize(text) for t in line])


def parse(text: str | list[Tok]) -> Block:
    """One instruction's semantics (a `{ ... }` block, or a bare statement list) -> Block."""
    toks = tokens(text) if isinstance(text, str) else text
    p = _Parser(toks)
    body = []
    while p.peek() is not None:
        body.append(p.statement())
    return body[0] if len(body) == 1 and isinstance(body[0], Block) else Block(tuple(body))
