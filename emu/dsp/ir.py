"""Typed IR of one instruction's semantics: C types, expressions and statements with side effects made explicit.

Integers follow C on the host the vendor semantics were written for (LP64: long is 64 bits): the usual
arithmetic conversions, promotion to int, wrap-around at the type's width. HVX values are vectors (1024 bits),
vector pairs and vector predicates (128 bits); their elements are reached through lanes (`VuV.h[i]`).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Type:
    kind: str  # int float vec pair qreg void
    bits: int
    signed: bool = False

    def __str__(self) -> str:
        if self.kind == "int":
            return f"{'s' if self.signed else 'u'}{self.bits}"
        return self.kind if self.kind != "float" else f"f{self.bits}"


def I(bits: int, signed: bool) -> Type:  # noqa: E743
    return Type("int", bits, signed)


S8, U8, S16, U16, S32, U32, S64, U64, S128 = (I(8, True), I(8, False), I(16, True), I(16, False), I(32, True),
                                               I(32, False), I(64, True), I(64, False), I(128, True))
F32, F64 = Type("float", 32, True), Type("float", 64, True)
VEC, PAIR, QREG, VOID = Type("vec", 1024), Type("pair", 2048), Type("qreg", 128), Type("void", 0)

# C type names the semantics use -> types (size4s_t: 4 bytes signed)
C_TYPES: dict[str, Type] = {
    **{f"size{n}{s}_t": I(8 * n, s == "s") for n in (1, 2, 4, 8, 16) for s in "su"},
    "int": S32, "signed int": S32, "signed": S32, "unsigned": U32, "unsigned int": U32, "short": S16,
    "unsigned short": U16, "char": S8, "signed char": S8, "unsigned char": U8, "long": S64, "unsigned long": U64,
    "long long": S64, "long long int": S64, "unsigned long long": U64, "unsigned long long int": U64,
    "float": F32, "double": F64, "mmvector_t": VEC, "mmvector_pair_t": PAIR, "mmqreg_t": QREG, "void": VOID,
    "paddr_t": U64, "vaddr_t": U32,
    **{f"{u}int{n}_t": I(n, not u) for n in (8, 16, 32, 64) for u in ("", "u")},
}
# lane fields of vectors and vector predicates -> element type
LANES: dict[str, Type] = {"b": S8, "ub": U8, "h": S16, "uh": U16, "w": S32, "uw": U32, "d": S64, "ud": U64}


def promote(t: Type) -> Type:
    return S32 if t.kind == "int" and t.bits < 32 else t


def common(a: Type, b: Type) -> Type:
    """The usual arithmetic conversions."""
    if a.kind == "float" or b.kind == "float":
        return F64 if F64 in (a, b) else F32
    a, b = promote(a), promote(b)
    if a.signed == b.signed:
        return a if a.bits >= b.bits else b
    s, u = (a, b) if a.signed else (b, a)
    return u if u.bits >= s.bits else s


# ---- expressions: every node has its type t ----
@dataclass(frozen=True, slots=True)
class Const:
    t: Type
    value: int | float


@dataclass(frozen=True, slots=True)
class Var:
    t: Type
    name: str


@dataclass(frozen=True, slots=True)
class Bin:
    t: Type  # the type the operation is done in (the operands have it); comparisons give int
    op: str
    a: object
    b: object


@dataclass(frozen=True, slots=True)
class Un:
    t: Type
    op: str  # - ~ !
    x: object


@dataclass(frozen=True, slots=True)
class Conv:
    t: Type
    x: object


@dataclass(frozen=True, slots=True)
class Select:
    t: Type
    c: object
    a: object
    b: object


@dataclass(frozen=True, slots=True)
class Prim:
    """A primitive of the core model (library.PRIMITIVES); args are expressions or register names (str)."""
    t: Type
    name: str
    args: tuple


@dataclass(frozen=True, slots=True)
class Lane:
    """Element `index` of a vector / vector predicate viewed as lanes of type t (VuV.h[i])."""
    t: Type
    vec: object
    index: object


@dataclass(frozen=True, slots=True)
class Half:
    """Vector k of a pair (VddV.v[k]); an lvalue when the pair is."""
    t: Type
    pair: object
    index: object


# ---- statements ----
@dataclass(frozen=True, slots=True)
class Set:
    target: object  # Var, Lane or Half
    value: object


@dataclass(frozen=True, slots=True)
class Do:
    x: object  # a primitive evaluated for its effect


@dataclass(frozen=True, slots=True)
class If:
    c: object
    then: tuple
    orelse: tuple


@dataclass(frozen=True, slots=True)
class Loop:
    """while (pre; c) { body; step }: `pre` re-evaluated before each test; do-while tests after the body."""
    pre: tuple
    c: object
    body: tuple
    step: tuple
    test_first: bool = True


@dataclass(frozen=True, slots=True)
class Jump:
    kind: str  # break continue cancel (the instruction's slot is cancelled: nothing it wrote commits)


@dataclass(frozen=True, slots=True)
class Local:
    """A declared local (zero-initialised vectors; integers get their first value by Set)."""
    var: Var
