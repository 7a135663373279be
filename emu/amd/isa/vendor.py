"""Conversion of the vendor ISA tables (tinygrad's autogen modules, read as data) into emu.amd.isa.

The modules are parsed with `ast` and never executed: only literal class bodies and dict displays are
read. This runs once per family and wheel version; emu.amd.isa caches the result.
"""
from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from emu.amd.isa.tables import ISA, Encoding, Field, Op, Operand

_FIELD_KINDS = {"BitField": "bits", "FixedBitField": "fixed", "EnumBitField": "enum", "VGPRField": "vgpr",
                "SGPRField": "sgpr", "SSrcField": "ssrc", "SrcField": "src", "SBaseField": "sbase",
                "SRsrcField": "srsrc", "VDSTYField": "vdsty"}
_NAMED_DEFAULTS = {"NULL": 124}  # the SGPR-operand encoding of null (rdna); used only where the field is absent


def tables_dir(fam: str) -> Path:
    spec = importlib.util.find_spec("tinygrad")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the vendor ISA tables need the tinygrad==0.14.0 wheel installed (data only)")
    return Path(next(iter(spec.submodule_search_locations))) / "runtime" / "autogen" / "amd" / fam


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def _enums(tree: ast.Module) -> dict[str, dict[str, int]]:
    """class NAME(ReprEnum): members -> {class: {member: value}}, aliases resolved."""
    out: dict[str, dict[str, int]] = {}
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        members: dict[str, int] = {}
        for st in cls.body:
            if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name):
                v = st.value
                members[st.targets[0].id] = members[v.id] if isinstance(v, ast.Name) else ast.literal_eval(v)
        out[cls.name] = members
    return out


def _canonical_names(members: dict[str, int]) -> dict[int, str]:
    """value -> vendor name; where an alias without the _E32/_E64 suffix exists, that short name."""
    names: dict[int, str] = {}
    for name, value in members.items():
        if value not in names or len(name) < len(names[value]):
            names[value] = name
    return names


def _encodings(tree: ast.Module) -> dict[str, tuple]:
    """ins.py classes -> {name: (fields, admitted (enum, member) pairs or None, base class, opcode space)}."""
    raw: dict[str, dict[str, Field]] = {}
    ops: dict[str, frozenset[int] | None] = {}
    bases: dict[str, str] = {}
    spaces: dict[str, str] = {}
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        parent = cls.bases[0].id if cls.bases and isinstance(cls.bases[0], ast.Name) else "Inst"
        fields = dict(raw.get(parent, {}))
        ops[cls.name] = ops.get(parent)
        spaces.setdefault(cls.name, spaces.get(parent, ""))
        for st in cls.body:
            if not (isinstance(st, ast.Assign) and isinstance(st.value, ast.Call)):
                continue
            name, call = st.targets[0].id, st.value
            kind = _FIELD_KINDS[call.func.id]
            hi, lo = (ast.literal_eval(a) for a in call.args[:2])
            value = None
            if kind == "fixed":
                value = ast.literal_eval(call.args[2])
            elif kind == "enum" and len(call.args) > 3:
                ops[cls.name] = frozenset((e.value.id, e.attr) for e in call.args[3].elts)
            if kind == "enum" and name == "op":
                spaces[cls.name] = call.args[2].id.removesuffix("Op")
            for kw in call.keywords:
                if kw.arg == "default":
                    v = kw.value
                    value = _NAMED_DEFAULTS[v.id] if isinstance(v, ast.Name) else ast.literal_eval(v)
            # a variant's field replaces any inherited field over the same bits (MFMA's cbsz over neg_hi)
            for other in [f for f in fields.values() if f.name != name and f.lo <= hi and lo <= f.hi]:
                if other.name in raw.get(parent, {}):
                    del fields[other.name]
            fields[name] = Field(name, hi, lo, kind, value)
        raw[cls.name] = fields
        bases[cls.name] = bases.get(parent, cls.name) if parent != "Inst" else cls.name
    return {name: (fields, ops[name], bases[name], spaces[name]) for name, fields in raw.items()}


def convert(fam: str) -> ISA:
    d = tables_dir(fam)
    enums = _enums(_parse(d / "enum.py"))
    values = {(cls, m): v for cls, members in enums.items() for m, v in members.items()}
    encodings: dict[str, Encoding] = {}
    for name, (fields, opset, base, space) in _encodings(_parse(d / "ins.py")).items():
        size = (max(f.hi for f in fields.values()) + 8) // 8
        variant = name[len(base) + 1:]
        allowed = None if opset is None else frozenset(values[e] for e in opset)
        ordered = tuple(sorted(fields.values(), key=lambda f: f.lo))
        encodings[name] = Encoding(name, base, variant, size, ordered, allowed, space)

    def key(node: ast.Attribute) -> tuple[str, int, str]:
        cls = node.value.id
        return cls, values[(cls, node.attr)], node.attr

    operands: dict[tuple[str, int], dict[str, Operand]] = {}
    for k, v in zip(*_dict_display(d / "operands.py", "OPERANDS"), strict=True):
        cls, value, _ = key(k)
        entries = ((ast.literal_eval(fk), t.elts) for fk, t in zip(v.keys, v.values, strict=True))
        operands[(cls, value)] = {
            fname: Operand(fmt.attr.removeprefix("FMT_"), bits.value, kind.attr.removeprefix("OPR_"))
            for fname, (fmt, bits, kind) in entries}
    pcode: dict[tuple[str, int], str] = {}
    for k, v in zip(*_dict_display(d / "str_pcode.py", "PCODE"), strict=True):
        cls, value, _ = key(k)
        pcode[(cls, value)] = ast.literal_eval(v)

    ops: dict[tuple[str, int], Op] = {}
    other: dict[str, dict[int, str]] = {}
    for cls, members in enums.items():
        names = _canonical_names(members)
        if not cls.endswith("Op"):
            other[cls] = names
            continue
        enc = cls[:-2]
        for value, name in names.items():
            ops[(enc, value)] = Op(enc, name, value, operands.get((cls, value), {}), pcode.get((cls, value)))
    return ISA(fam, encodings, ops, other)


def _dict_display(path: Path, name: str) -> tuple[list, list]:
    for st in _parse(path).body:
        if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name) and st.targets[0].id == name:
            return st.value.keys, st.value.values
    raise RuntimeError(f"{path}: no table {name}")
