"""A small C preprocessor, enough for the vendor's definition files.

The *.idef / *.def files build their tables with #define'd generator macros (`##` pasting, `#` stringizing,
variadic macros), #include, and #if/#ifdef/#ifndef/#else/#endif. `preprocess` returns the expanded token
stream; `calls` picks the top-level invocations of the table macros (Q6INSN, DEF_ENC32, ...) out of it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_TOKEN = re.compile(r"""
  (?P<ws>[ \t\r\f\v]+|\\\n) | (?P<nl>\n) | (?P<comment>//[^\n]*|/\*.*?\*/) |
  (?P<id>[A-Za-z_]\w*) |
  (?P<num>\.?\d(?:[eEpP][+-]|[\w.])*) |
  (?P<str>"(?:\\.|[^"\\\n])*") | (?P<chr>'(?:\\.|[^'\\\n])*') |
  (?P<op>\#\#|\.\.\.|<<=|>>=|->|\+\+|--|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^]=|[^\s])
""", re.S | re.X)


class CppError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Tok:
    kind: str  # id num str chr op
    text: str
    space: bool = False  # preceded by white space (for re-spelling)
    hide: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Macro:
    params: tuple[str, ...] | None  # None: object-like
    body: tuple[Tok, ...]
    variadic: bool = False


def tokenize(text: str) -> list[list[Tok]]:
    """Logical lines of tokens (continuations joined, comments a space)."""
    lines: list[list[Tok]] = [[]]
    space = False
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        if kind == "nl":
            lines.append([])
            space = False
        elif kind in ("ws", "comment"):
            space = True
        else:
            lines[-1].append(Tok(kind, m.group(), space))
            space = False
    return lines


def spell(toks: list[Tok] | tuple[Tok, ...]) -> str:
    return "".join((" " if t.space and i else "") + t.text for i, t in enumerate(toks))


class Preprocessor:
    def __init__(self, root: Path | None, defines: dict[str, str] | None = None):
        self.root = root
        self.macros: dict[str, Macro] = {}
        for name, value in (defines or {}).items():
            self.macros[name] = Macro(None, tuple(tokenize(value)[0]))

    def run(self, name: str) -> list[Tok]:
        out: list[Tok] = []
        pending: list[Tok] = []
        stack: list[tuple[bool, bool]] = []  # (this branch active, some branch taken)
        for line in tokenize((self.root / name).read_text()):
            active = all(a for a, _ in stack)
            if line and line[0].text == "#" and len(line) > 1:
                d, rest = line[1].text, line[2:]
                if d in ("if", "ifdef", "ifndef"):
                    known = rest[0].text in self.macros
                    cond = active and (self._cond(rest) if d == "if" else known == (d == "ifdef"))
                    stack.append((cond, cond))
                elif d == "else":
                    was, taken = stack.pop()
                    stack.append((not taken, True))
                elif d == "endif":
                    stack.pop()
                elif not active:
                    continue
                else:
                    out += self.expand(pending)
                    pending = []
                    if d == "define":
                        self._define(rest)
                    elif d == "undef":
                        self.macros.pop(rest[0].text, None)
                    elif d == "include":
                        out += self.run(str(Path(name).parent / rest[0].text.strip('"')))
                    else:
                        raise CppError(f"{name}: unsupported directive #{d}")
            elif active:
                pending += line
        if stack:
            raise CppError(f"{name}: unterminated #if")
        return out + self.expand(pending)

    def _cond(self, toks: list[Tok]) -> bool:
        if len(toks) != 1:
            raise CppError(f"unsupported #if {spell(toks)}")
        t = self.expand(toks)
        return bool(t) and t[0].kind == "num" and int(t[0].text.rstrip("uUlL"), 0) != 0

    def _define(self, toks: list[Tok]) -> None:
        name = toks[0].text
        if len(toks) > 1 and toks[1].text == "(" and not toks[1].space:
            end = next(i for i, t in enumerate(toks) if t.text == ")")
            params = tuple(t.text for t in toks[2:end] if t.text != ",")
            variadic = bool(params) and params[-1] == "..."
            params = params[:-1] + ("__VA_ARGS__",) if variadic else params
            self.macros[name] = Macro(params, tuple(toks[end + 1:]), variadic)
        else:
            self.macros[name] = Macro(None, tuple(toks[1:]))

    def expand(self, toks: list[Tok]) -> list[Tok]:
        out: list[Tok] = []
        inp = list(reversed(toks))  # a stack: the next token is at the end
        while inp:
            t = inp.pop()
            m = self.macros.get(t.text) if t.kind == "id" and t.text not in t.hide else None
            if m is None:
                out.append(t)
                continue
            if m.params is None or (m.params == () and not (inp and inp[-1].text == "(")):
                body = self._subst(m, {}, t)  # a macro without parameters may also be used without ()
            elif inp and inp[-1].text == "(":
                inp.pop()
                args = _split_args(inp, t.text)
                if m.variadic:
                    n = len(m.params) - 1
                    va = [x for i, a in enumerate(args[n:]) for x in ([Tok("op", ",")] if i else []) + a]
                    args = args[:n] + [va]
                if len(args) != len(m.params) and not (len(m.params) == 0 and args == [[]]):
                    raise CppError(f"{t.text}: {len(args)} arguments for {len(m.params)} parameters")
                body = self._subst(m, dict(zip(m.params, args, strict=False)), t)
            else:
                out.append(t)
                continue
            inp += reversed(body)
        return out

    def _subst(self, m: Macro, args: dict[str, list[Tok]], call: Tok) -> list[Tok]:
        hide = call.hide | {call.text}
        body = m.body
        res: list[Tok] = []
        i = 0
        while i < len(body):
            t = body[i]
            glued = (i > 0 and body[i - 1].text == "##") or (i + 1 < len(body) and body[i + 1].text == "##")
            if t.text == "#" and i + 1 < len(body) and body[i + 1].text in args:
                text = spell(args[body[i + 1].text]).replace("\\", "\\\\").replace('"', '\\"')
                res.append(Tok("str", f'"{text}"', t.space))
                i += 2
                continue
            if t.text in args:
                a = args[t.text] if glued else self.expand(args[t.text])
                a = [Tok(x.kind, x.text, t.space if j == 0 else x.space, x.hide) for j, x in enumerate(a)]
                res += a or [Tok("pm", "", t.space)]  # a placemarker: an empty argument
            else:
                res.append(t)
            i += 1
        pasted: list[Tok] = []
        i = 0
        while i < len(res):
            t = res[i]
            if t.text == "##" and pasted:
                left, right = pasted.pop(), res[i + 1]
                pasted.append(_paste(left, right))
                i += 2
                continue
            pasted.append(t)
            i += 1
        return [Tok(t.kind, t.text, t.space, t.hide | hide) for t in pasted if t.kind != "pm"]


def _paste(left: Tok, right: Tok) -> Tok:
    if left.kind == "pm" or right.kind == "pm":
        return left if right.kind == "pm" else Tok(right.kind, right.text, left.space)
    text = left.text + right.text
    lines = tokenize(text)
    if len(lines) != 1 or len(lines[0]) != 1:
        raise CppError(f"pasting {left.text!r} and {right.text!r} does not give one token")
    return Tok(lines[0][0].kind, text, left.space)


_OPEN, _CLOSE = frozenset("([{"), frozenset(")]}")


def _split_args(inp: list[Tok], name: str) -> list[list[Tok]]:
    """Pop a macro's arguments (after its '(') off the reversed token stack, up to the matching ')'."""
    args: list[list[Tok]] = [[]]
    depth = 0
    while inp:
        t = inp.pop()
        if t.text in _OPEN:
            depth += 1
        elif t.text in _CLOSE:
            if depth == 0:
                return args
            depth -= 1
        elif t.text == "," and depth == 0:
            args.append([])
            continue
        args[-1].append(t)
    raise CppError(f"{name}: unterminated argument list")


def calls(toks: list[Tok], names: set[str]) -> list[tuple[str, list[list[Tok]]]]:
    """The top-level invocations NAME(arg, ...) in a token stream, arguments split at top-level commas."""
    found: list[tuple[str, list[list[Tok]]]] = []
    inp = list(reversed(toks))
    while inp:
        t = inp.pop()
        if t.kind == "id" and t.text in names and inp and inp[-1].text == "(":
            inp.pop()
            found.append((t.text, _split_args(inp, t.text)))
    return found


def string(toks: list[Tok]) -> str:
    """The value of adjacent string literals ("a" "b" -> ab)."""
    if not toks or any(t.kind != "str" for t in toks):
        raise CppError(f"not a string: {spell(toks)}")
    return "".join(t.text[1:-1].encode().decode("unicode_escape") for t in toks)
