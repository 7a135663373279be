"""The kernarg segment of a launch (code object v4-v6, LLVM's AMDGPUUsage): a kernel's explicit arguments packed
as its metadata types them, and the hidden arguments a dispatch's shape determines.

  pack_kernargs(k, args, hidden)  # the kernarg segment bytes of objfile.codeobj.Kernel k
  hidden_args(grid_size, block)   # values of the dispatch-shape hidden arguments, for pack_kernargs
"""
from __future__ import annotations

import struct

import numpy as np

from objfile.codeobj import MAX_KERNARG_SEGMENT, KernArg, Kernel, check_limit

# -- kernarg segment -------------------------------------------------------------------------------------------------
FLOAT_FORMATS = {2: "<e", 4: "<f", 8: "<d"}


def hidden_args(grid_size: tuple[int, ...], block: tuple[int, ...], dynamic_lds_size: int = 0) -> dict[str, int]:
    """The hidden arguments a dispatch's shape determines, as AMDGPUUsage defines them (code object v5).

    `grid_size` counts work-items per dimension (as the AQL packet does; HIP's gridDim times blockDim), `block` is
    the workgroup size; shorter tuples mean the remaining dimensions are 1. A partial last workgroup is allowed:
    hidden_remainder_* is its size (0 when the grid is a multiple of the block). Global offsets are 0."""
    if not 1 <= len(grid_size) <= 3 or len(block) > 3 or min(*grid_size, *block, 1) < 1:
        raise ValueError(f"bad dispatch shape: grid size {grid_size}, block {block}")
    g, b = (*grid_size, 1, 1)[:3], (*block, 1, 1, 1)[:3]
    out = {"hidden_grid_dims": len(grid_size), "hidden_dynamic_lds_size": dynamic_lds_size}
    for axis, n, k in zip("xyz", g, b, strict=True):
        out |= {f"hidden_block_count_{axis}": -(-n // k), f"hidden_group_size_{axis}": k,
                f"hidden_remainder_{axis}": n % k, f"hidden_global_offset_{axis}": 0}
    return out


def pack_kernargs(kernel: Kernel, args, hidden: dict[str, int] | None = None, raw: bytes | None = None) -> bytes:
    """The kernarg segment for `kernel`: its explicit arguments in order, then hidden ones by value_kind.

    Arguments are checked against the metadata's type (`arg_type`), never reinterpreted: an int fills a pointer
    or an integer type and must lie in its signed or unsigned range; a float fills a scalar half/float/double and
    must lie in its range; a numpy scalar must be of the type's kind (floating or integer) and size; bytes or a
    numpy array give the raw bits of exactly the argument's size (vectors, structs); an object with an int `.addr`
    (a buffer) fills a pointer. Where the metadata names no type, ints of the size and raw values are taken.
    `raw` instead gives the explicit part as bytes (HIP's HIP_LAUNCH_PARAM_BUFFER_POINTER): any length for a kernel
    whose metadata lists no arguments, else it must cover the declared explicit arguments and stay inside the
    kernarg segment. `hidden` maps value kinds ('hidden_block_count_x', ...) to ints; hidden arguments not given are
    zero."""
    explicit = kernel.explicit_args
    if raw is not None:
        check_limit(f"kernel {kernel.name!r}", "raw kernargs size", len(raw), MAX_KERNARG_SEGMENT)
    out = bytearray(max(kernel.kernarg_segment_size, kernel.descriptor.kernarg_size, len(raw or b"")))
    if raw is not None:
        end = max((a.offset + a.size for a in explicit), default=0)
        if args:
            raise ValueError(f"kernel {kernel.name!r}: give explicit arguments or raw kernarg bytes, not both")
        if explicit and not end <= len(raw) <= kernel.kernarg_segment_size:
            raise ValueError(f"kernel {kernel.name!r} declares explicit arguments in bytes [0, {end}) of a "
                             f"{kernel.kernarg_segment_size}-byte kernarg segment; raw kernargs are {len(raw)} bytes")
        out[:len(raw)] = raw
    elif len(args) != len(explicit):
        raise ValueError(f"kernel {kernel.name!r} takes {len(explicit)} explicit arguments "
                         f"({', '.join(a.name or a.value_kind for a in explicit)}), got {len(args)}")
    for i, (a, v) in enumerate(zip(explicit, args, strict=False)):
        out[a.offset:a.offset + a.size] = _pack_arg(kernel, i, a, v)
    for a in kernel.args:
        if a.hidden and a.value_kind in (hidden or {}):
            out[a.offset:a.offset + a.size] = _pack_int(f"kernel {kernel.name!r} {a.value_kind}", a,
                                                        hidden[a.value_kind])
    return bytes(out)


def arg_type(a: KernArg) -> tuple[str, bool]:
    """(kind, scalar) of an explicit argument from its metadata: kind 'pointer', 'float', 'int' (signed), 'uint' or
    '' (a type the metadata leaves out or that is none of these: raw values of its size); scalar is False for
    vectors (float4, ...), which only bytes or numpy arrays fill."""
    if a.value_kind in ("global_buffer", "dynamic_shared_pointer") or a.type_name.endswith("*"):
        return "pointer", True
    t = a.type_name.replace("const ", "").replace("volatile ", "").strip()
    base = t.rstrip("0123456789") if t[-1:].isdigit() and not t.endswith("_t") else t
    if base in FLOAT_TYPES:
        return "float", FLOAT_TYPES[base] == a.size
    unsigned = base.startswith(("u", "unsigned ")) or base in ("size_t", "bool", "_Bool")
    name = base.removeprefix("unsigned ").removeprefix("signed ").removeprefix("u")
    if name in INT_NAMES or base in ("size_t", "bool", "_Bool"):
        return ("uint" if unsigned else "int"), base == t
    return "", True


FLOAT_TYPES = {"half": 2, "_Float16": 2, "__fp16": 2, "float": 4, "double": 8}
INT_NAMES = ("char", "short", "int", "long", "long long", "int8_t", "int16_t", "int32_t", "int64_t", "intptr_t",
             "ptrdiff_t")


def _pack_arg(kernel: Kernel, index: int, a: KernArg, v) -> bytes:
    kind, scalar = arg_type(a)
    where = f"kernel {kernel.name!r} argument {index}{' ' + a.name if a.name else ''} " \
            f"({a.type_name or a.value_kind}, {a.size} bytes)"
    if hasattr(v, "addr") and isinstance(v.addr, int):
        if kind not in ("pointer", ""):
            raise ValueError(f"{where}: a buffer is not a {kind} value")
        v = v.addr
    signed = {"int": True, "uint": False, "pointer": False}.get(kind)
    if isinstance(v, (bytes, bytearray, memoryview, np.ndarray, np.generic)):
        if isinstance(v, np.generic) and kind and not (v.dtype.kind == "f") == (kind == "float"):
            raise ValueError(f"{where}: a numpy {v.dtype} is not a {kind} value")
        raw = bytes(v.tobytes() if isinstance(v, (np.generic, np.ndarray)) else v)
        if len(raw) != a.size:
            raise ValueError(f"{where} is {a.size} bytes, the value is {len(raw)}")
        # a numpy integer keeps its value: np.int32(-1) does not become 0xFFFFFFFF for an unsigned argument
        return _pack_int(where, a, int(v), signed) if isinstance(v, np.integer) else raw
    if isinstance(v, float):
        if kind != "float" or not scalar or a.size not in FLOAT_FORMATS:
            raise ValueError(f"{where}: cannot pack float {v} (not a scalar floating-point argument)")
        try:
            return struct.pack(FLOAT_FORMATS[a.size], v)
        except OverflowError:
            raise ValueError(f"{where}: {v} is outside the range of a {8 * a.size}-bit float") from None
    if isinstance(v, bool) and a.type_name not in ("bool", "_Bool", ""):
        raise ValueError(f"{where}: {v} is a bool, not a {kind or a.type_name} value")
    if isinstance(v, int):
        if kind == "float" or not scalar:
            raise ValueError(f"{where}: an int ({v}) is not a {'float' if scalar else 'vector'} value; give "
                             f"{'a float or a numpy float scalar' if scalar else 'bytes or a numpy array'}")
        return _pack_int(where, a, v, signed)
    raise ValueError(f"{where}: cannot pack a {type(v).__name__}")


def _pack_int(where: str, a: KernArg, v: int, signed: bool | None = None) -> bytes:
    """`v` in a.size bytes: in the signed or unsigned range, or (signed None) either."""
    bits = 8 * a.size
    lo = 0 if signed is False else -(1 << (bits - 1))
    hi = 1 << (bits - 1 if signed else bits)
    if not lo <= v < hi:
        how = "" if signed is None else " as a signed integer" if signed else " as an unsigned integer"
        raise ValueError(f"{where}: {v} does not fit {a.size} bytes{how}")
    return (v & ((1 << bits) - 1)).to_bytes(a.size, "little")
