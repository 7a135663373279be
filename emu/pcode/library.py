"""The pseudocode's library functions, typed: each call becomes an IR op with explicit argument and result types.

Op names and meaning (all backends implement them):
  fabs sqrt trunc floor fract exp2 log2 sin cos (radians) rint (roundEven: ties to even) rsq (1 / sqrt, one
  rounding) : float -> same float
  fma(a, b, c[, n]) (times 2**n, one rounding) pow(a, b) fmin/fmax (plain IEEE) : float -> same float;  ldexp(x, n: i32)
  signbit isnan issnan isqnan is_even isdenorm : float -> bool;  quiet : float -> quiet NaN of it
  exponent : float -> biased exponent field (i32);  mantissa : float -> frexp mantissa in [0.5, 1)
  iabs : signed int;  popcount -> u32;  bitrev;  ff1 -> index of the lowest 1 bit or -1 (i32)
  sext_from(x, n) : sign-extend x from bit n-1;  sat(x) : integer clamp to the result type
  snorm / unorm : float -> 16-bit normalized integer
  fconv itof ftoi : conversions (optional second arg: the rounding mode; fconv attr "quiet": a conversion
                    instruction, which returns signaling NaNs quieted as IEEE convertFormat does; without it, as
                    for the text's N'F(x), the NaN keeps its bits)
  callout(args) : st[attr](*args), for what depends on machine configuration (HwRegWriteMask(id, priv):
                  the bits of hardware register id that may be written)
"""
from __future__ import annotations

import re

from emu.pcode.ir import BOOL, I32, MINIFLOATS, U32, Const, Expr, Op, Ty
from emu.pcode.typed import Unsupported, bitcast_to_int, concrete, convert, extract, reinterpret, unify

F64 = Ty("f", 64)
SIGNIFICAND = {16: 11, 32: 24, 64: 53}  # bits of precision: integers this wide convert exactly
CALLOUTS = {"HwRegWriteMask": "HwRegWriteMask", "writeableBitMask": "HwRegWriteMask"}  # pcode name -> st key
_SAME_FLOAT = {"sqrt": "sqrt", "trunc": "trunc", "floor": "floor", "fract": "fract", "log2": "log2",
               "sin": "sin", "cos": "cos", "exp2": "exp2", "ceil": "ceil", "roundEven": "rint"}
_FLOAT_PRED = {"isNAN": "isnan", "isSignalNAN": "issnan", "isQuietNAN": "isqnan", "isEven": "is_even",
               "isDENORM": "isdenorm", "isINF": "isinf"}
_CVT = re.compile(r"^(f16|f32|f64|bf16|i32|u32|i16|u16|u8|i8|u4|i4|u64)_to_(f16|f32|f64|bf16|i32|u32|i16|u16|u8|i8)$")
_TY = {"f16": Ty("f", 16), "f32": Ty("f", 32), "f64": Ty("f", 64), "bf16": Ty("bf", 16), "i32": I32, "u32": U32,
       "i16": Ty("i", 16), "u16": Ty("u", 16), "u8": Ty("u", 8), "i8": Ty("i", 8), "u4": Ty("u", 4),
       "i4": Ty("i", 4), "u64": Ty("u", 64)}


def _float(x: Expr) -> Expr:
    x = concrete(x)
    if not x.ty.is_float:
        raise Unsupported(f"float function applied to {x.ty}")
    return x


def call(name: str, args: list[Expr], lw) -> Expr:
    """IR for the library function `name` applied to typed args (lw: the Lowerer, for state such as MODE)."""
    n = len(args)
    if name in _SAME_FLOAT and n == 1:
        x = _float(args[0])
        return Op(_SAME_FLOAT[name], (x,), x.ty)
    if name in _FLOAT_PRED and n == 1:
        return Op(_FLOAT_PRED[name], (_float(args[0]),), BOOL)
    if name == "abs" and n == 1:
        x = concrete(args[0])
        if x.ty.is_float:
            return Op("fabs", (x,), x.ty)
        return Op("iabs", (x,), x.ty)
    if name == "sign" and n == 1:
        x = concrete(args[0])
        if x.ty.is_float:
            return Op("signbit", (x,), BOOL)
        return Op("lt", (reinterpret(x, Ty("i", x.ty.bits)), Const(0, Ty("i", x.ty.bits))), BOOL)
    if name == "cvtToQuietNAN" and n == 1:
        x = _float(args[0])
        return Op("quiet", (x,), x.ty)
    if name == "exponent" and n == 1:
        return Op("exponent", (_float(args[0]),), I32)
    if name == "mantissa" and n == 1:
        x = _float(args[0])
        return Op("mantissa", (x,), x.ty)
    if name == "fma" and n in (3, 4):
        a, b = unify(args[0], args[1])
        a, c = unify(a, args[2])
        a, b, c = (convert(concrete(v), concrete(a).ty) for v in (a, b, c))
        scale = (convert(concrete(args[3]), I32),) if n == 4 else ()
        return Op("fma", (a, b, c, *scale), _float(a).ty)
    if name == "pow" and n == 2:
        base, x = args
        if isinstance(base, Const) and base.value == 2.0:
            x = _float(convert(x, base.ty) if base.ty.is_float else x)
            return Op("exp2", (x,), x.ty)
        a, b = unify(base, x)
        a = _float(a)
        return Op("pow", (a, convert(b, a.ty)), a.ty)
    if name == "ldexp" and n == 2:
        x = _float(args[0])
        return Op("ldexp", (x, convert(concrete(args[1]), I32)), x.ty)
    if name in ("signext",) and n == 1:
        x = concrete(bitcast_to_int(args[0]))
        return convert(reinterpret(x, Ty("i", x.ty.bits)), Ty("i", 64))
    if name == "signext_from_bit" and n == 2:
        x = concrete(args[0])
        return Op("sext_from", (x, convert(concrete(args[1]), U32)), x.ty)
    if name in ("count_ones", "countbits", "bitCount") and n == 1:
        return Op("popcount", (concrete(bitcast_to_int(args[0])),), U32)
    if name == "reverse_bits" and n == 1:
        x = concrete(args[0])
        return Op("bitrev", (x,), x.ty)
    if name in ("s_ff1_i32_b32", "s_ff1_i32_b64") and n == 1:
        bits = 32 if name.endswith("32") else 64
        return Op("ff1", (convert(concrete(args[0]), Ty("u", bits)),), I32)
    if name == "float32" and n == 3:  # float32(sign, exponent, mantissa) from its fields
        s, e, mt = (convert(concrete(a), U32) for a in args)
        parts = (Op("resize", (s,), Ty("u", 1)), Op("resize", (e,), Ty("u", 8)), Op("resize", (mt,), Ty("u", 23)))
        return Op("bitcast", (Op("concat", parts, U32),), Ty("f", 32))
    if name in CALLOUTS and n == 2:  # depends on machine configuration: the caller's function st[...]
        lw.files.add(CALLOUTS[name])
        return Op("callout", tuple(convert(concrete(a), U32) for a in args), U32, CALLOUTS[name])
    if name == "MIN" and n == 2:
        a, b = unify(args[0], args[1])
        a, b = concrete(a), concrete(b)
        return Op("select", (Op("lt", (a, b), BOOL), a, b), a.ty)
    if name in ("f16_to_snorm", "f32_to_snorm", "f16_to_unorm", "f32_to_unorm") and n == 1:
        return Op(name[-5:], (_float(args[0]),), Ty("i" if name.endswith("snorm") else "u", 16))
    m = _MINI_CVT.match(name)
    if m and (m.group(1) in MINIFLOATS or m.group(2) in MINIFLOATS) and n == 1 + bool(m.group(3)) + bool(m.group(4)):
        return minifloat_conversion(m, args)
    if name in ("f32_to_f16_SR", "f32_to_f16_sr", "f32_to_bf16_SR", "f32_to_bf16_sr") and n == 2:
        dst = _TY["bf16" if "bf16" in name else "f16"]
        return Op("fconv_sr", (conversion_src(args[0], _TY["f32"]), convert(concrete(args[1]), U32)), dst, "quiet")
    m = _CVT.match(name)
    if m and n == 1:
        return conversion(_TY[m.group(1)], _TY[m.group(2)], args[0], lw)
    raise Unsupported(f"unknown function {name}/{n}")


_MINI = "f32|f16|bf16|fp8fnuz|bf8fnuz|fp8|bf8|fp6|bf6|fp4"
_MINI_CVT = re.compile(rf"^({_MINI})_to_({_MINI})(_sr)?(_scale)?$")


def minifloat_conversion(m: re.Match, args: list[Expr]) -> Expr:
    """Conversions between IEEE floats and the small formats, optionally scaled by 2**(scale - 127)
    (scale an 8-bit biased exponent: decoding multiplies by it, encoding divides). Stochastic rounding (_sr,
    a 32-bit random operand r): the magnitude rounds up to the next representable value when r / 2**32 is below
    the fraction of the gap it covers, else down."""
    src, dst = m.group(1), m.group(2)
    x = args[0]
    rnd = convert(concrete(args[1]), U32) if m.group(3) else None
    scale = convert(concrete(args[-1]), U32) if m.group(4) else None
    if src in MINIFLOATS and dst in _TY:
        x = convert(concrete(x), Ty(src, MINIFLOATS[src][0] + MINIFLOATS[src][1] + 1))
        v = Op("mf_decode", (x,), Ty("f", 64), src)
        if scale is not None:
            v = Op("ldexp", (v, Op("sub", (convert(scale, I32), Const(127, I32)), I32)), v.ty)
        return convert(v, _TY[dst])
    if src in _TY and dst in MINIFLOATS:
        v = convert(conversion_src(x, _TY[src]), Ty("f", 64))
        if scale is not None:
            v = Op("ldexp", (v, Op("sub", (Const(127, I32), convert(scale, I32)), I32)), v.ty)
        t = Ty(dst, MINIFLOATS[dst][0] + MINIFLOATS[dst][1] + 1)
        return Op("mf_encode", (v,) if rnd is None else (v, rnd), t, dst)
    raise Unsupported(f"conversion {m.group(0)}")


def _round_mode(src: Ty, dst: Ty, lw) -> tuple[Expr, ...]:
    """The rounding mode of a conversion that can be inexact: ROUND_MODE where the pcode manages it, else
    MODE.FP_ROUND of the result's type ([1:0] f32, [3:2] f16 and f64; LLVM's llvm.fptrunc.round to f16 sets
    FP_ROUND[3:2] around v_cvt_f16_f32). Exact conversions and bfloat16 results (nearest even) take none."""
    exact = src.bits <= dst.bits if src.is_float else src.bits <= SIGNIFICAND.get(dst.bits, 0)
    if dst.kind != "f" or exact:
        return ()
    if "ROUND_MODE" in lw.f.vars:
        return (lw.round_mode(),)
    if not src.is_float and src.bits > 32:
        return ()
    return (convert(extract(lw.state("MODE"), Const(0 if dst.bits == 32 else 2, U32), 2), U32),)


def conversion_src(x: Expr, src: Ty) -> Expr:
    x = concrete(x)
    return convert(x, src) if x.ty.is_float else reinterpret(x, src)


def conversion(src: Ty, dst: Ty, x: Expr, lw) -> Expr:
    """src_to_dst(x): floats round (by ROUND_MODE when the pcode sets it, else as MODE.FP_ROUND says for the
    result's type, see _round_mode), float->int saturates, int->int narrowing saturates, widening extends by src's
    signedness."""
    x = concrete(x)
    if src.is_float:
        x = convert(x, src) if x.ty.is_float else reinterpret(x, src)
    else:
        x = reinterpret(bitcast_to_int(x), src)
    rm = _round_mode(src, dst, lw)
    if src.is_float and dst.is_float:
        return Op("fconv", (x, *rm), dst, "quiet")
    if src.is_float:
        return Op("ftoi", (x,), dst)
    if dst.is_float and rm:  # exact in f64 first (at most 32 bits), so the directed conversion rounds once
        return Op("fconv", (Op("itof", (x,), F64), *rm), dst)
    if dst.is_float:
        return Op("itof", (x,), dst)
    if dst.bits < src.bits:
        return Op("sat", (x,), dst)
    return convert(x, dst)
