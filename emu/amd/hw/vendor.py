"""Read the vendor's hardware headers (tinygrad's autogen modules of the pinned wheel) as data.

The modules are parsed with `ast` and never executed: integer constants (`NAME = 0x10`, `NAME = (1 << 12)`),
enumerators (`{(NAME:=0): 'NAME'}`), field macros (`NAME = lambda x: ((x & MASK) << SHIFT)`), dict displays of
register tables and struct layouts (`S.register_fields([(name, type, offset[, bits, bit])])`). emu.amd.hw
converts what it needs once and caches it; afterwards nothing here runs.
"""
from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path

_BINOPS = {ast.LShift: lambda a, b: a << b, ast.RShift: lambda a, b: a >> b, ast.BitOr: lambda a, b: a | b,
           ast.BitAnd: lambda a, b: a & b, ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
           ast.Mult: lambda a, b: a * b}


def autogen_dir() -> Path:
    """tinygrad/runtime/autogen of the installed wheel, located without importing tinygrad."""
    spec = importlib.util.find_spec("tinygrad")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the vendor hardware tables need the tinygrad==0.14.0 wheel installed (data only)")
    return Path(next(iter(spec.submodule_search_locations))) / "runtime" / "autogen"


@functools.cache
def parse(rel: str) -> ast.Module:
    """The syntax tree of autogen/`rel` (e.g. 'am/pm4_nv.py')."""
    path = autogen_dir() / rel
    return ast.parse(path.read_text(), str(path))


def _int(node: ast.AST, env: dict[str, int]) -> int | None:
    """The value of an integer expression of literals, known names and shifts/masks; None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name):
        return env.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _int(node.operand, env)
        return None if v is None else -v
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        a, b = _int(node.left, env), _int(node.right, env)
        return None if a is None or b is None else _BINOPS[type(node.op)](a, b)
    return None


@functools.cache
def constants(rel: str) -> dict[str, int]:
    """Every integer constant and enumerator a module defines, by name."""
    env: dict[str, int] = {}
    for st in parse(rel).body:
        if isinstance(st, (ast.Assign, ast.AnnAssign)):
            target = st.targets[0] if isinstance(st, ast.Assign) else st.target
            value = st.value
            if value is None:
                continue
            for node in ast.walk(value):  # enumerators: {(NAME:=value): 'NAME', ...}
                if isinstance(node, ast.NamedExpr):
                    v = _int(node.value, env)
                    if v is not None:
                        env[node.target.id] = v
            if isinstance(target, ast.Name):
                v = _int(value, env)
                if v is not None:
                    env[target.id] = v
    return env


def _macro_field(body: ast.AST, env: dict[str, int]) -> tuple[int, int | None] | None:
    """(shift, width or None) of a field macro's body: ((x & MASK) << SHIFT), (x << SHIFT) or (x)."""
    if isinstance(body, ast.BinOp) and isinstance(body.op, ast.LShift):
        shift = _int(body.right, env)
        inner = body.left
        if shift is None:
            return None
        if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.BitAnd):
            mask = _int(inner.right, env)
            return (shift, mask.bit_length()) if mask is not None and mask & (mask + 1) == 0 else None
        return shift, None
    if isinstance(body, ast.BinOp) and isinstance(body.op, ast.BitAnd):  # ((h >> SHIFT) & MASK): a getter
        mask, inner = _int(body.right, env), body.left
        shift = 0
        if isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.RShift):
            shift = _int(inner.right, env)
        if mask is None or shift is None or mask & (mask + 1):
            return None
        return shift, mask.bit_length()
    if isinstance(body, (ast.Name, ast.Call)):
        return 0, None
    return None


@functools.cache
def field_macros(rel: str) -> dict[str, tuple[int, int | None]]:
    """Field macros `NAME = lambda x: ((x & MASK) << SHIFT)` by name: (shift, width; None when unmasked)."""
    env = constants(rel)
    out: dict[str, tuple[int, int | None]] = {}
    for st in parse(rel).body:
        if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name) and isinstance(st.value, ast.Lambda):
            if len(st.value.args.args) == 1:
                f = _macro_field(st.value.body, env)
                if f is not None:
                    out[st.targets[0].id] = f
    return out


def dict_display(rel: str, name: str):
    """The literal value of the module-level `name = {...}` (register tables)."""
    for st in parse(rel).body:
        if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name) and st.targets[0].id == name:
            return ast.literal_eval(st.value)
    raise RuntimeError(f"{rel}: no table {name}")


def _type_text(node: ast.AST) -> str:
    return ast.unparse(node)


@functools.cache
def structs(rel: str) -> dict[str, list[tuple]]:
    """Struct layouts: {struct: [(field, type text, byte offset) or (field, type text, byte offset, bits, bit)]}."""
    out: dict[str, list[tuple]] = {}
    for st in parse(rel).body:
        call = st.value if isinstance(st, ast.Expr) else None
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and call.func.attr == "register_fields" and isinstance(call.func.value, ast.Name)):
            continue
        rows = []
        for elt in call.args[0].elts:
            name, typ, *rest = elt.elts
            rows.append((ast.literal_eval(name), _type_text(typ), *(ast.literal_eval(r) for r in rest)))
        out[call.func.value.id] = rows
    return out


@functools.cache
def struct_sizes(rel: str) -> dict[str, int]:
    """`SIZE = n` of each @c.record struct class."""
    out: dict[str, int] = {}
    for cls in (n for n in parse(rel).body if isinstance(n, ast.ClassDef)):
        for st in cls.body:
            if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name) and st.targets[0].id == "SIZE":
                out[cls.name] = ast.literal_eval(st.value)
    return out


@functools.cache
def ioctl_requests(rel: str) -> dict[str, tuple[str, int, str | None]]:
    """`NAME = PREFIX_IOWR(nr, struct)` request definitions: {NAME: (direction 'IO'/'IOR'/'IOW'/'IOWR', nr,
    argument struct or None)}."""
    out: dict[str, tuple[str, int, str | None]] = {}
    for st in parse(rel).body:
        if not (isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name) and isinstance(st.value, ast.Call)
                and isinstance(st.value.func, ast.Name)):
            continue
        kind = st.value.func.id.rpartition("_")[2]
        if kind not in ("IO", "IOR", "IOW", "IOWR") or not st.value.args:
            continue
        nr = _int(st.value.args[0], {})
        arg = st.value.args[1].id if len(st.value.args) > 1 and isinstance(st.value.args[1], ast.Name) else None
        if nr is not None:
            out[st.targets[0].id] = (kind, nr, arg)
    return out
