"""Numeric tables the vendor semantics index that the vendor's *.idef / *.def files do not contain.

They are C arrays of Qualcomm's simulator in QEMU 7.2's target/hexagon/arch.c, which emu.dsp.vendor extracts
into the cache next to imported/ (never committed here); each is parsed from that file at first use:

    rLPS_table_64x4, AC_next_state_MPS_64, AC_next_state_LPS_64
                          S2_cabacdecbin: H.264 CABAC rangeTabLPS and the transIdxMPS / transIdxLPS state
                          transitions (ITU-T H.264 tables 9-44, 9-45), under the names the vendor text indexes
    recip_lookup_table    F2_sfrecipa's reciprocal seed ROM (fSF_RECIP_LOOKUP; RECIP_SEED)
    invsqrt_lookup_table  F2_sfinvsqrta's inverse-square-root seed ROM (fSF_INVSQRT_LOOKUP; INVSQRT_SEED)

An array that cannot be read (arch.c missing and not fetchable, the array absent or malformed) raises
TableMissing naming the file and the array; it is then not `in TABLES`, so the compiler reports an instruction
that indexes it as one without semantics. tests/test_dsp_semantics_qemu.py checks the readers against qemu-hexagon.
"""
from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path

from emu.dsp.vendor import VendorMissing, arch_c

# arch.c array -> the dimensions its readers index (checked against the declaration)
_SHAPES: dict[str, tuple[int, ...]] = {
    "rLPS_table_64x4": (64, 4), "AC_next_state_MPS_64": (64,), "AC_next_state_LPS_64": (64,),
    "recip_lookup_table": (128,), "invsqrt_lookup_table": (128,),
}
_SEEDS = {"RECIP_SEED": "recip_lookup_table", "INVSQRT_SEED": "invsqrt_lookup_table"}
_INT = re.compile(r"(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)[uU]?")


class TableMissing(VendorMissing):
    """A table's C array could not be read from the vendor's arch.c."""


def parse_array(text: str, name: str) -> tuple[bytes, tuple[int, ...]]:
    """The bytes (row-major) and dimensions of `const uint8_t name[..]... = { ... };` in C source `text`
    (nested braces per dimension, C integer literals 0..255, comments allowed); ValueError if absent or malformed."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)
    m = re.search(rf"\bconst\s+uint8_t\s+{re.escape(name)}\s*((?:\[[^\]]*\]\s*)+)=\s*(\{{.*?\}})\s*;", text, re.S)
    if m is None:
        raise ValueError("no `const uint8_t NAME[...] = {...};` definition")
    dims = tuple(int(d, 0) if d.strip() else None for d in re.findall(r"\[([^\]]*)\]", m[1]))
    tokens = re.findall(r"[{}]|[^\s{},]+", m[2])
    try:
        value, end = _braced(tokens, 0)
    except IndexError:
        raise ValueError("malformed initializer (unbalanced braces)") from None
    if end != len(tokens):
        raise ValueError("text after the initializer")
    shape = _shape(value)
    if shape is None or len(shape) != len(dims) or any(d not in (None, n) for d, n in zip(dims, shape, strict=True)):
        raise ValueError(f"initializer of shape {shape} for dimensions {dims}")
    flat = value
    for _ in dims[1:]:
        flat = [x for row in flat for x in row]
    return bytes(flat), shape


def _braced(tokens: list[str], pos: int) -> tuple[list, int]:
    if tokens[pos] != "{":
        raise ValueError(f"expected '{{' at {tokens[pos]!r}")
    items, pos = [], pos + 1
    while tokens[pos] != "}":
        if tokens[pos] == "{":
            item, pos = _braced(tokens, pos)
        else:
            lit = _INT.fullmatch(tokens[pos])
            digits = lit[1] if lit else ""
            item = int(digits, 16 if digits[:2] in ("0x", "0X") else 8 if digits[:1] == "0" else 10) if lit else -1
            if not 0 <= item <= 255:
                raise ValueError(f"malformed initializer: not a uint8_t literal: {tokens[pos]!r}")
            pos += 1
        items.append(item)
    return items, pos + 1


def _shape(value: object) -> tuple[int, ...] | None:
    """The dimensions of nested lists of ints, None if ragged."""
    if isinstance(value, int):
        return ()
    inner = {_shape(v) for v in value} if isinstance(value, list) else {None}
    if len(inner) > 1 or None in inner:
        return None
    return (len(value), *(inner.pop() if inner else ()))


@functools.cache
def _source() -> tuple[Path, str] | str:
    """arch.c's path and text, or why they are unavailable (once per process: no retried download)."""
    try:
        path = arch_c()
        return path, path.read_text(encoding="utf-8", errors="replace")
    except (VendorMissing, OSError) as e:
        return f"the vendor's target/hexagon/arch.c is unavailable ({e})"


_missed: list[str] = []  # the tables this process could not read


def missed() -> bool:
    """Whether a table read failed in this process (then compile errors may be this machine's, not the code's)."""
    return bool(_missed)


@functools.cache
def _table(name: str) -> tuple[bytes, tuple[int, ...]] | str:
    src = _source()
    if isinstance(src, str):
        problem = f"{src}: array {name}"
    else:
        try:
            data, dims = parse_array(src[1], name)
            if dims != _SHAPES[name]:
                raise ValueError(f"dimensions {dims}, its readers index {_SHAPES[name]}")
            return data, dims
        except ValueError as e:
            problem = f"{src[0]}: array {name}: {e}"
    warnings.warn(problem, RuntimeWarning, stacklevel=3)
    _missed.append(name)
    return problem


def table(name: str) -> tuple[bytes, tuple[int, ...]]:
    """The bytes (row-major) and dimensions of one of arch.c's tables (see the module doc); TableMissing if the
    array cannot be read."""
    got = _table(name) if name in _SHAPES else f"{name}: not a table of arch.c this module reads"
    if isinstance(got, str):
        raise TableMissing(got)
    return got


class _Tables(Mapping[str, tuple[bytes, tuple[int, ...]]]):
    """Table name -> (bytes, dimensions), read at first use; a table that cannot be read is not in it."""

    def __getitem__(self, name: str) -> tuple[bytes, tuple[int, ...]]:
        if name not in _SHAPES:
            raise KeyError(name)
        return table(name)

    def __contains__(self, name: object) -> bool:
        return name in _SHAPES and not isinstance(_table(name), str)

    def __iter__(self) -> Iterator[str]:
        return iter(_SHAPES)

    def __len__(self) -> int:
        return len(_SHAPES)


TABLES: Mapping[str, tuple[bytes, tuple[int, ...]]] = _Tables()


def lookup(name: str, *index: int) -> int:
    """Element `index` of a table (row-major); an index outside the table reads 0 (the C would read past it)."""
    data, dims = TABLES[name]
    flat = 0
    for i, n in zip(index, dims, strict=True):
        if not 0 <= i < n:
            return 0
        flat = flat * n + i
    return data[flat]


def fSF_RECIP_LOOKUP(idx: int) -> int:
    return table("recip_lookup_table")[0][idx & 0x7F]


def fSF_INVSQRT_LOOKUP(idx: int) -> int:
    return table("invsqrt_lookup_table")[0][idx & 0x7F]


def __getattr__(name: str) -> bytes:  # RECIP_SEED, INVSQRT_SEED: read at first use
    if name in _SEEDS:
        return table(_SEEDS[name])[0]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
