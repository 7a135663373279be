"""Pseudocode for the matrix instructions, whose vendor entries are prose ("D = A (32x8) * B (8x32) + C (32x32)").

The text is generated from the shape and types in the instruction name and the operand layout across lanes
and registers that AMD's matrix instruction calculator documents. It addresses the operands as registers
(`VGPR[lane][SRC0.u32 + n]`, `VDST`), like the other cross-lane instructions, so the caller passes register
numbers SRC0 SRC1 SRC2 VDST and the register file, with every lane active (matrix ops ignore EXEC).

MFMA (CDNA, wave64), M x N x K with B blocks; lane l, A element item t of a lane:
  A[b][i][k]: lane i + M*g, item t; single block: g = k // T, t = k % T (T = K*M/64 items per lane);
              several blocks: g = b, t = k.  B[b][k][j] likewise with j and N.
  D[b][i][j] (C alike), register r of lane l, j = l % N: if B*N == 64: b = l // N, i = r;
              else per-block registers R = M*N/64, b = r // R, q = r % R, i = 4*((64/N)*(q//4) + l//N) + q%4.
WMMA (RDNA3, wave32, 16x16x16): lane l holds row l%16 of A (column l%16 of B) with all 16 k (lanes 16..31
  repeat lanes 0..15); D[i][j] (32-bit) is register i//2 of lane j + 16*(i%2); a 16-bit D (and C) sits in the
  half of that register OPSEL[2] selects, the other half kept.
WMMA (RDNA4, wave32, 16x16xK): lanes 0..15 hold k 0..K/2-1 of row / column l%16, lanes 16..31 the rest;
  D[i][j] is register i%8 of lane j + 16*(i//8).
"""
from __future__ import annotations

import re

_ELEM = {"F32": ("f32", 32), "F16": ("f16", 16), "BF16": ("bf16", 16), "I8": ("i8", 8), "FP8": ("fp8", 8),
         "BF8": ("bf8", 8), "F64": ("f64", 64), "IU8": ("i8", 8), "IU4": ("i4", 4)}
_MFMA = re.compile(r"^V_MFMA_(F32|I32|F64)_(\d+)X(\d+)X(\d+)(?:_(\d+)B)?_(F32|F16|BF16|I8|FP8|BF8|F64)(?:_(FP8|BF8))?$")
_WMMA = re.compile(r"^V_WMMA_(F32|I32|F16|BF16)_16X16X(\d+)_(F16|BF16|IU8|IU4|FP8|BF8)(?:_(FP8|BF8))?$")


class NotMatrix(ValueError):
    pass


def _elem(src: str, lane: str, t: str, ty: str, bits: int) -> str:
    """Pcode reading item t (an expression) of the matrix operand in register src of lane `lane`."""
    if bits == 64:
        return f"{{ VGPR[{lane}][{src}.u32 + ({t}) * 2 + 1], VGPR[{lane}][{src}.u32 + ({t}) * 2] }}.f64"
    reg = f"{src}.u32 + ({t}) * {bits} / 32"
    lo = f"({t}) * {bits} % 32"
    return f"VGPR[{lane}][{reg}][{lo} + {bits - 1} : {lo}].{ty}"


def _value(x: str, ty: str, out: str) -> str:
    """An element converted to the accumulator type."""
    if out == "i32":
        return f"32'I(signext({x}))" if ty in ("i8", "i4") else f"32'I({x})"
    if ty == out:
        return x
    return f"{out[1:]}'F({x})"


def _acc(out: str, a: str, b: str) -> str:
    return f"acc = acc + {a} * {b}" if out == "i32" else f"acc = fma({a}, {b}, acc)"


def _cd(out: str, read: bool, reg: str, lane: str = "laneId") -> str:
    if out == "f64":
        if read:
            return f"{{ VGPR[{lane}][SRC2.u32 + ({reg}) * 2 + 1], VGPR[{lane}][SRC2.u32 + ({reg}) * 2] }}.f64"
        return (f"VGPR[{lane}][VDST.u32 + ({reg}) * 2].b32 = acc.b64[31 : 0];\n"
                f"VGPR[{lane}][VDST.u32 + ({reg}) * 2 + 1].b32 = acc.b64[63 : 32]")
    if read:
        return f"VGPR[{lane}][SRC2.u32 + {reg}].{out}"
    return f"VGPR[{lane}][VDST.u32 + {reg}].{out} = acc"


def mfma(name: str) -> str:
    m = _MFMA.match(name)
    if not m:
        raise NotMatrix(name)
    out = m.group(1).lower()
    M, N, K, B = int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5) or 1)
    ta, ea = _ELEM[m.group(6)]
    tb, eb = _ELEM[m.group(7) or m.group(6)]
    regs = M * N * B // 64
    if B > 1 and (64 // M != B or 64 // N != B):
        raise NotMatrix(f"{name}: blocks do not fill the lane groups")
    T = K * M // 64 if B == 1 else K
    if B * N == 64:
        where = f"b = laneId / {N};\ni = r;\nj = laneId % {N};"
    else:
        R = M * N // 64
        where = (f"b = r / {R};\nq = r % {R};\ni = 4 * ({64 // N} * (q / 4) + laneId / {N}) + q % 4;\n"
                 f"j = laneId % {N};")
    ga, ta_ = ("b", "k") if B > 1 else (f"k / {T}", f"k % {T}")
    a = _elem("SRC0", f"i + {M} * ({ga})", ta_, ta, ea)
    b = _elem("SRC1", f"j + {N} * ({ga})", ta_, tb, eb)
    return (f"declare acc : {64 if out == 'f64' else 32}'{'I' if out == 'i32' else 'F'};\n"
            f"for r in 0 : {regs - 1} do\n{where}\n"
            f"acc = {_cd(out, True, 'r')};\nfor k in 0 : {K - 1} do\n"
            f"{_acc(out, _value(a, ta, out), _value(b, tb, out))}\nendfor;\n{_cd(out, False, 'r')}\nendfor")


def wmma(name: str, family: str) -> str:
    m = _WMMA.match(name)
    if not m:
        raise NotMatrix(name)
    out = m.group(1).lower()
    if out in ("f16", "bf16") and family != "rdna3":
        raise NotMatrix(f"{name}: 16-bit results packed two per register are not modelled")
    acc = "f32" if out in ("f16", "bf16") else out
    K = int(m.group(2))
    ta, ea = _ELEM[m.group(3)]
    tb, eb = _ELEM[m.group(4) or m.group(3)]
    if family == "rdna3":
        if K != 16:
            raise NotMatrix(name)
        where, lane_a, lane_b, item = "i = r * 2 + laneId / 16;\nj = laneId % 16;", "i", "j", "k"
    else:
        half = K // 2
        where = "i = r + 8 * (laneId / 16);\nj = laneId % 16;"
        lane_a, lane_b, item = f"i + 16 * (k / {half})", f"j + 16 * (k / {half})", f"k % {half}"
    a = _elem("SRC0", lane_a, item, ta, ea)
    b = _elem("SRC1", lane_b, item, tb, eb)
    if ta in ("i8", "i4"):  # IU8 / IU4: NEG[0] / NEG[1] say whether A / B are signed
        a = f"(NEG[0].u1 ? {_value(a, ta, 'i32')} : 32'I({a[:-3]}.u{ea}))"
        b = f"(NEG[1].u1 ? {_value(b, tb, 'i32')} : 32'I({b[:-3]}.u{eb}))"
    else:
        a, b = _value(a, ta, acc), _value(b, tb, acc)
    read, write = _cd(acc, True, "r"), _cd(acc, False, "r")
    if out != acc:  # RDNA3 16-bit C / D: in the half of each register OPSEL[2] selects, the other half kept
        half = "OPSEL[2].u32 * 16 + 15 : OPSEL[2].u32 * 16"
        read = f"32'F(VGPR[laneId][SRC2.u32 + r][{half}].{out})"
        write = f"VGPR[laneId][VDST.u32 + r][{half}].{out} = 16'{'BF' if out == 'bf16' else 'F'}(acc)"
    return (f"declare acc : 32'{'I' if acc == 'i32' else 'F'};\nfor r in 0 : 7 do\n{where}\n"
            f"acc = {read};\nfor k in 0 : {K - 1} do\n{_acc(acc, a, b)}\nendfor;\n{write}\nendfor")
