"""What the LLVM backend's emitter (emu.pcode.llvmemit) reads off the IR before it emits: conditions it folds,
float conversions it may skip, Ifs small enough to run without branches, the variables a body assigns and loops."""
from __future__ import annotations

from emu.pcode.ir import Assign, Const, Expr, If, Loop, Op, SetLaneBit, Var

COMPARES = {"eq", "ne", "lt", "le", "gt", "ge"}
NAN_BLIND = {"isnan", "issnan", "isqnan", "isinf", "signbit"}  # kept by a widening conversion (NaN payloads too)
FOLD = {
    "extract": lambda a, w: (a[0] >> a[1]) & ((1 << w) - 1), "tobool": lambda a, w: int(a[0] != 0),
    "lnot": lambda a, w: int(not a[0]), "land": lambda a, w: int(a[0] and a[1]), "lor": lambda a, w: int(a[0] or a[1]),
    "and": lambda a, w: a[0] & a[1], "or": lambda a, w: a[0] | a[1], "xor": lambda a, w: a[0] ^ a[1],
    "eq": lambda a, w: int(a[0] == a[1]), "ne": lambda a, w: int(a[0] != a[1]), "shr": lambda a, w: a[0] >> a[1],
}
_EFFECTS = {"load", "reg_read", "callout", "fmt_load", "fmt_offset", "elem"}
_FLAT_LIMIT = 80  # IR nodes of an If's bodies that run branch-free


def widening(e: Expr) -> bool:
    """A float conversion to a wider IEEE format (exact; NaN payloads shifted), nearest even, not quieting."""
    if not (isinstance(e, Op) and e.op == "fconv" and e.attr != "quiet" and e.ty.kind == "f"):
        return False
    src = e.args[0].ty
    return src.kind == "f" and src.bits < e.ty.bits and all(
        isinstance(x, Const) and x.value == 0 for x in e.args[1:])


def round_trip(e: Op) -> Expr:
    """fconv(fconv_wide(x)) and fconv(quiet(fconv_wide(x))) back to x's format are x and quiet(x) (widening is
    exact, NaN payloads included, and the narrowing takes the same bits back)."""
    if not all(isinstance(x, Const) and x.value == 0 for x in e.args[1:]) or e.ty.kind != "f":
        return e
    inner, quiet = e.args[0], e.attr == "quiet"
    if isinstance(inner, Op) and inner.op == "quiet" and len(inner.args) == 1:
        inner, quiet = inner.args[0], True
    if not widening(inner) or inner.args[0].ty != e.ty:
        return e
    x = inner.args[0]
    return Op("quiet", (x,), e.ty) if quiet else x


def _size(node) -> int | None:
    """IR nodes of an expression or statements, None when they reach anything but assignments of values."""
    if isinstance(node, tuple):
        total = 0
        for x in node:
            k = _size(x)
            if k is None:
                return None
            total += k
        return total
    if isinstance(node, (Const, Var)) or node is None:
        return 1
    if isinstance(node, Op):
        return None if node.op in _EFFECTS else _size(node.args)
    if isinstance(node, Assign):
        return None if node.index is not None else _size((node.value, node.lo))
    if isinstance(node, If):
        return _size((node.cond, node.then, node.orelse))
    return None


def flat(s: If) -> bool:
    k = _size((s.then, s.orelse))
    return k is not None and k <= _FLAT_LIMIT


def assigned(body: tuple) -> set[str]:
    out: set[str] = set()
    for s in body:
        if isinstance(s, (Assign, SetLaneBit)):
            out.add(s.var)
        elif isinstance(s, If):
            out |= assigned(s.then) | assigned(s.orelse)
        elif isinstance(s, Loop):
            out |= {s.var} | assigned(s.body)
    return out


def loop_vars(body: tuple) -> set[str]:
    out: set[str] = set()
    for s in body:
        if isinstance(s, Loop):
            out |= {s.var} | loop_vars(s.body)
        elif isinstance(s, If):
            out |= loop_vars(s.then) | loop_vars(s.orelse)
    return out


