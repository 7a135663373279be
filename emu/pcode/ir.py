"""Typed IR of one instruction's semantics: what every backend consumes.

Types are explicit: `Ty(kind, bits)` with kind 'u' (unsigned / raw bits), 'i' (signed two's complement),
'f' (IEEE binary16/32/64), 'bf' (bfloat16) or 'bool'. Every implicit conversion of the pseudocode is an explicit
`Op` here ('resize', 'bitcast', 'fconv', 'itof', 'ftoi', 'tobool', 'frombool'); calls of library functions,
lambdas and other instructions are gone (library functions are `Op`s with their own names, lambdas and
instruction calls are inlined). Statements run under an implicit per-lane predicate: `If` narrows it,
`Break` removes lanes from the innermost `Loop`.

State names (S0, D0, VCC, SCC, ...) are variables of the function: `Func.inputs` are loaded from the caller's
state before the body runs, `Func.outputs` are returned after it; all of them hold raw bits (kind 'u').
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Ty:
    kind: str  # u, i, f, bf, bool
    bits: int

    def __str__(self) -> str:
        return "bool" if self.kind == "bool" else f"{self.kind}{self.bits}"

    @property
    def is_float(self) -> bool:
        return self.kind in ("f", "bf")

    @property
    def is_int(self) -> bool:  # minifloats (fp8 bf8 fp6 bf6 fp4) are held as their raw bits
        return self.kind in ("u", "i") or self.kind in MINIFLOATS


# small float formats, held as raw bits: exponent bits, mantissa bits, bias, special values
# ('ieee': inf and NaN at the top exponent, 'nan': only all-ones is NaN, 'none': all codes finite)
MINIFLOATS = {"fp8": (4, 3, 7, "nan"), "bf8": (5, 2, 15, "ieee"), "fp6": (2, 3, 1, "none"),
              "bf6": (3, 2, 3, "none"), "fp4": (2, 1, 1, "none"),
              "fp8fnuz": (4, 3, 8, "fnuz"), "bf8fnuz": (5, 2, 16, "fnuz")}  # fnuz: 0x80 is NaN, no inf, no -0


DEFAULT_MODE = 0xF0  # MODE where the caller gives none: FP_ROUND nearest even, FP_DENORM keeping every denormal
BOOL = Ty("bool", 1)
U32, I32, U64, I64 = Ty("u", 32), Ty("i", 32), Ty("u", 64), Ty("i", 64)


def uint(bits: int) -> Ty:
    return Ty("u", bits)


class Expr:
    ty: Ty


@dataclass(frozen=True)
class Const(Expr):
    value: int | float | bool  # ints as raw bits of ty (non-negative)
    ty: Ty


@dataclass(frozen=True)
class Var(Expr):
    name: str
    ty: Ty


@dataclass(frozen=True)
class Op(Expr):
    """An operation. Arithmetic/logic: add sub mul div mod neg and or xor not shl shr (arithmetic for signed ty)
    eq ne lt le gt ge (on the operand type) land lor lnot select; conversions: resize bitcast fconv itof ftoi
    tobool frombool; bits: extract(x, lo) insert(x, lo, v) (attr: width) concat(hi..lo); state: lane_id wave64
    elem(array, index) load(addr) reg_read(file, lane, reg) fmt_offset fmt_load; library: fma sqrt ... (see
    emu.pcode.library); small floats: mf_decode mf_encode (attr: format)."""
    op: str
    args: tuple
    ty: Ty
    attr: object = None  # op-specific constant (e.g. extract width, round mode, register file name)


class Stmt:
    pass


@dataclass(frozen=True)
class Assign(Stmt):
    """var = value. `lo`/`width`: only bits lo .. lo+width-1 of the variable change (lo may be an Expr)."""
    var: str
    value: Expr
    lo: Expr | None = None
    width: int | None = None
    index: Expr | None = None  # element of an array variable


@dataclass(frozen=True)
class SetLaneBit(Stmt):
    """Bit `laneId` of the wave-wide mask variable `var` = value (a per-lane bool)."""
    var: str
    value: Expr


@dataclass(frozen=True)
class Store(Stmt):
    """Memory (file 'MEM'/'LDS') or register-file (file 'VGPR'/'SGPR'/...) write."""
    file: str
    addr: tuple  # (addr,) for memory, (lane, reg) / (reg,) for register files
    value: Expr
    bits: int


@dataclass(frozen=True)
class If(Stmt):
    cond: Expr
    then: tuple
    orelse: tuple


@dataclass(frozen=True)
class Loop(Stmt):
    var: str  # a uniform integer
    lo: Expr
    hi: Expr  # inclusive
    body: tuple


@dataclass(frozen=True)
class Break(Stmt):
    pass


@dataclass(frozen=True)
class Fail(Stmt):
    """Lanes reaching this statement raise Unsupported(reason) (a case the semantics do not model)."""
    reason: str


@dataclass
class Func:
    name: str
    vector: bool  # operates per lane (VALU/VMEM/DS) or on scalars
    body: tuple
    vars: dict[str, Ty] = field(default_factory=dict)  # every variable (state names included)
    arrays: dict[str, int] = field(default_factory=dict)  # array variables: element count
    inputs: dict[str, int] = field(default_factory=dict)  # state name -> bits, loaded before the body
    outputs: dict[str, int] = field(default_factory=dict)  # state name -> bits, returned
    masks: frozenset[str] = frozenset()  # wave-wide lane masks (one bit per lane)
    files: frozenset[str] = frozenset()  # memories and register files touched: MEM, LDS, VGPR, SGPR, ...
    file_writes: frozenset[str] = frozenset()
