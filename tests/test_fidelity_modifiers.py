"""A hypothesis sweep over VOP3 / VOP3P modifiers (issue 13 acceptance): instruction words assembled by
llvm-mc-19 from drawn text (abs, neg, clamp, omod, op_sel, op_sel_hi, neg_lo / neg_hi, inline constants, literals)
run through the engine and compared with an independent numpy model of the ISA manual's rules: source
modifiers |x| then -x on the operand's float type, the operation rounded once in that type, then omod (ignored
while MODE.IEEE is set, except on RDNA4 which has no IEEE mode), then clamp to [0, 1] with NaN to 0."""
from __future__ import annotations

import shutil
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fidelity_rounding import _to
from test_wave import asm, wave

pytestmark = pytest.mark.skipif(not shutil.which("llvm-mc-19"), reason="llvm-mc-19 is needed to assemble snippets")

ARCHS = ["gfx1100", "gfx1201", "gfx942"]
OPS = {"add": np.add, "mul": np.multiply, "sub": np.subtract}
FT = {"f16": np.float16, "f32": np.float32, "f64": np.float64}
UT = {np.float16: np.uint16, np.float32: np.uint32, np.float64: np.uint64}
CONSTS = {"0.5": 0.5, "-0.5": -0.5, "1.0": 1.0, "-1.0": -1.0, "2.0": 2.0, "-2.0": -2.0, "4.0": 4.0, "-4.0": -4.0}
OMOD = {0: "", 1: " mul:2", 2: " mul:4", 3: " div:2"}
SCALE = {0: 1.0, 1: 2.0, 2: 4.0, 3: 0.5}
VALUES = st.one_of(st.floats(-300, 300, width=16), st.sampled_from([0.0, -0.0, np.inf, -np.inf, np.nan]))


def _lane_values(draw, n: int) -> np.ndarray:
    return np.array(draw(st.lists(VALUES, min_size=n, max_size=n)))


def _same(got: np.ndarray, want: np.ndarray, zeros_equal: bool) -> None:
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    if zeros_equal:
        np.testing.assert_array_equal(got[~nan], want[~nan])
    else:
        np.testing.assert_array_equal(got[~nan].view(UT[got.dtype.type]), want[~nan].view(UT[want.dtype.type]))


def _out(r: np.ndarray, ft, omod: int, clamp: bool, mode_ieee: bool, keep_out: bool = True) -> np.ndarray:
    """Output modifiers: omod unless MODE.IEEE or output denormals are on (applied, it flushes denormals and -0 to
    +0), clamp, then output denormals flushed (to zero of their sign) unless kept."""
    tiny = np.finfo(ft).tiny
    if omod and not mode_ieee and not keep_out:
        r = (r * ft(SCALE[omod])).astype(ft)
        r = np.where(np.abs(r) < tiny, ft(0), r).astype(ft)
    if clamp:
        r = np.where(np.isnan(r), ft(0), np.clip(r, ft(0), ft(1))).astype(ft)
    if not keep_out:
        r = np.where(np.abs(r) < tiny, np.copysign(ft(0), r), r).astype(ft)
    return r


def _set_mode(w, arch: str, ieee: bool, keep_out: bool) -> None:
    """MODE.IEEE (not on RDNA4) and FP_DENORM: inputs kept, outputs of every type kept or flushed."""
    w.mode = w.mode & ~0xF0 | (0x5 | 0xA * keep_out) << 4
    if arch != "gfx1201":
        w.mode = w.mode & ~(1 << 9) | ieee << 9


@st.composite
def vop3_cases(draw):
    arch = draw(st.sampled_from(ARCHS))
    ty = draw(st.sampled_from(["f16", "f32", "f64"]))
    op = draw(st.sampled_from(["add", "mul"] if ty == "f64" else sorted(OPS)))  # there is no v_sub_f64
    srcs = []
    for _ in range(2):
        kinds = ["v", "c"] + (["lit"] if ty == "f32" and arch != "gfx942" and "lit" not in srcs else [])
        srcs.append(draw(st.sampled_from(kinds)))
    return (arch, ty, op, srcs, draw(st.sampled_from(sorted(CONSTS))), draw(st.floats(-1e3, 1e3, width=32)),
            draw(st.integers(0, 3)), draw(st.integers(0, 3)), draw(st.booleans()), draw(st.integers(0, 3)),
            draw(st.booleans()), draw(st.booleans()), _lane_values(draw, 64), _lane_values(draw, 64))


@settings(max_examples=60, deadline=None)
@given(vop3_cases())
def test_vop3_modifiers(case):
    arch, ty, op, srcs, const, lit, absb, negb, clamp, omod, ieee, keep_out, xa, xb = case
    ft = FT[ty]
    w = wave(arch)
    n = w.lanes
    _set_mode(w, arch, ieee, keep_out)
    regs = {0: "v[2:3]", 1: "v[4:5]"} if ty == "f64" else {0: "v2", 1: "v4"}
    vals, text = [], []
    for i, kind in enumerate(srcs):
        if kind == "v":
            x = (xa if i == 0 else xb)[:n].astype(ft)
            raw = x.view(UT[ft]).astype(np.uint64)
            w.vgpr[2 + 2 * i] = (raw & np.uint64(0xFFFFFFFF)).astype(np.uint32)
            w.vgpr[3 + 2 * i] = (raw >> np.uint64(32)).astype(np.uint32)
            vals.append(x)
            s = regs[i]
        elif kind == "c":
            vals.append(np.full(n, CONSTS[const], ft))
            s = const
        else:
            vals.append(np.full(n, lit, np.float32))
            s = f"0x{int(np.float32(lit).view(np.uint32)):08x}"
        if absb >> i & 1 and kind != "lit":  # llvm-mc folds a sign into a literal's value
            s, vals[i] = f"|{s}|", np.abs(vals[i])
        if negb >> i & 1 and kind != "lit":
            s, vals[i] = f"neg({s})", -vals[i]
        text.append(s)
    dst = "v[6:7]" if ty == "f64" else "v6"
    suffix = "" if ty == "f64" else "_e64"
    w.run(asm(f"v_{op}_{ty}{suffix} {dst}, {text[0]}, {text[1]}{' clamp' if clamp else ''}{OMOD[omod]}\n"
              "s_endpgm", arch))
    with np.errstate(all="ignore"):
        want = _out(OPS[op](vals[0], vals[1]).astype(ft), ft, omod, clamp, ieee and arch != "gfx1201", keep_out)
    raw = w.vgpr[6].astype(np.uint64) | (w.vgpr[7].astype(np.uint64) << np.uint64(32) if ty == "f64" else 0)
    got = (raw & np.uint64(np.iinfo(UT[ft]).max)).astype(UT[ft]).view(ft)
    _same(got, want, clamp)


@st.composite
def vop3p_cases(draw):
    return (draw(st.sampled_from(ARCHS)), draw(st.sampled_from(["add", "mul"])), draw(st.sampled_from(["v", "c"])),
            draw(st.sampled_from(sorted(CONSTS))), draw(st.integers(0, 3)), draw(st.integers(0, 3)),
            draw(st.integers(0, 3)), draw(st.integers(0, 3)), draw(st.booleans()),
            *(_lane_values(draw, 64) for _ in range(4)))


@settings(max_examples=40, deadline=None)
@given(vop3p_cases())
def test_vop3p_packed_f16_modifiers(case):
    """Halves picked by op_sel (low result) / op_sel_hi (high result), negated by neg_lo / neg_hi; a float
    inline constant is the f16 value in the low half and 0 in the high half (LLVM, getInlineEncodingV216)."""
    arch, op, src1, const, opsel, opsel_hi, neg_lo, neg_hi, clamp, a_lo, a_hi, b_lo, b_hi = case
    h = np.float16
    w = wave(arch)
    n = w.lanes
    halves = [(a_lo[:n].astype(h), a_hi[:n].astype(h)), (b_lo[:n].astype(h), b_hi[:n].astype(h))]
    if src1 == "c":
        halves[1] = (np.full(n, CONSTS[const], h), np.zeros(n, h))
    for i, (lo, hi) in enumerate(halves):
        w.vgpr[2 + i] = lo.view(np.uint16).astype(np.uint32) | hi.view(np.uint16).astype(np.uint32) << 16
    bits = lambda v: f"[{v & 1},{v >> 1 & 1}]"  # noqa: E731
    s1 = const if src1 == "c" else "v3"
    w.run(asm(f"v_pk_{op}_f16 v6, v2, {s1} op_sel:{bits(opsel)} op_sel_hi:{bits(opsel_hi)} neg_lo:{bits(neg_lo)} "
              f"neg_hi:{bits(neg_hi)}{' clamp' if clamp else ''}\ns_endpgm", arch))
    out = []
    for sel, neg in ((opsel, neg_lo), (opsel_hi, neg_hi)):
        x = [halves[i][sel >> i & 1] * h(-1 if neg >> i & 1 else 1) for i in range(2)]
        with np.errstate(all="ignore"):
            out.append(_out(OPS[op](x[0], x[1]).astype(h), h, 0, clamp, True))
    got = w.vgpr[6]
    _same((got & 0xFFFF).astype(np.uint16).view(h), out[0], clamp)
    _same((got >> 16).astype(np.uint16).view(h), out[1], clamp)


def _fma_ref(a, b, c, ft) -> np.ndarray:
    """a * b + c per lane, rounded once to ft: exactly (Fractions) when finite, in f64 (where the special values
    come out as IEEE says) otherwise."""
    out = []
    for x, y, z in zip(a.astype(np.float64), b.astype(np.float64), c.astype(np.float64), strict=True):
        if not (np.isfinite(x) and np.isfinite(y) and np.isfinite(z)):
            with np.errstate(all="ignore"):
                out.append(ft(x * y + z))
            continue
        exact = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
        if exact:
            out.append(ft(_to(exact, 0, ft)))  # nearest even, overflow to inf
        else:  # -0 only from -0 + -0 (a zero product's sign is its factors'); x * y == -z != 0 gives +0
            minus = (x == 0 or y == 0) and z == 0 and np.signbit(x) != np.signbit(y) and np.signbit(z)
            out.append(ft(-0.0 if minus else 0.0))
    return np.array(out, ft)


@st.composite
def fma_cases(draw):
    arch = draw(st.sampled_from(ARCHS))
    ty = draw(st.sampled_from(["f16", "f32", "f64"]))
    kinds = []
    for _ in range(3):
        lit_ok = ty == "f32" and arch != "gfx942" and "lit" not in kinds
        kinds.append(draw(st.sampled_from(["v", "v", "c"] + (["lit"] if lit_ok else []))))
    opsel = draw(st.integers(0, 15)) if ty == "f16" and arch != "gfx942" else 0
    return (arch, ty, kinds, [draw(st.sampled_from(sorted(CONSTS))) for _ in range(3)],
            draw(st.floats(-1e3, 1e3, width=32)), draw(st.integers(0, 7)), draw(st.integers(0, 7)), opsel,
            draw(st.booleans()), draw(st.integers(0, 3)), draw(st.booleans()), draw(st.booleans()),
            [_lane_values(draw, 64) for _ in range(6)])


@settings(max_examples=50, deadline=None)
@given(fma_cases())
def test_vop3_fma_modifiers(case):
    """v_fma_f16 / f32 / f64 with abs / neg on each of three sources, inline constants, a literal (RDNA), op_sel
    picking the high half of f16 VGPR sources and of the destination (RDNA's VOP3 op_sel), clamp and omod: the
    product and sum rounded once (Fractions), then the output modifiers."""
    arch, ty, kinds, consts, lit, absb, negb, opsel, clamp, omod, ieee, keep_out, lanes = case
    ft = FT[ty]
    w = wave(arch)
    n = w.lanes
    _set_mode(w, arch, ieee, keep_out)
    vals, text = [], []
    for i, kind in enumerate(kinds):
        reg = 2 + 2 * i
        if kind == "v":
            lo, hi = lanes[2 * i][:n].astype(ft), lanes[2 * i + 1][:n].astype(ft)
            if ty == "f16":
                w.vgpr[reg] = lo.view(np.uint16).astype(np.uint32) | hi.view(np.uint16).astype(np.uint32) << 16
                x = hi if opsel >> i & 1 else lo
            else:
                raw = lo.view(UT[ft]).astype(np.uint64)
                w.vgpr[reg] = (raw & np.uint64(0xFFFFFFFF)).astype(np.uint32)
                w.vgpr[reg + 1] = (raw >> np.uint64(32)).astype(np.uint32)
                x = lo
            s = f"v[{reg}:{reg + 1}]" if ty == "f64" else f"v{reg}"
        elif kind == "c":
            x, s = np.full(n, CONSTS[consts[i]], ft), consts[i]
        else:
            x, s = np.full(n, lit, np.float32), f"0x{int(np.float32(lit).view(np.uint32)):08x}"
        if absb >> i & 1 and kind != "lit":
            s, x = f"|{s}|", np.abs(x)
        if negb >> i & 1 and kind != "lit":
            s, x = f"neg({s})", -x
        vals.append(x)
        text.append(s)
    if ty == "f16":  # a constant's half is not selectable: op_sel only on VGPR sources (and the destination)
        opsel &= sum(1 << i for i, k in enumerate(kinds) if k == "v") | 8
    dst = "v[8:9]" if ty == "f64" else "v8"
    sel = f" op_sel:[{opsel & 1},{opsel >> 1 & 1},{opsel >> 2 & 1},{opsel >> 3 & 1}]" if opsel else ""
    w.run(asm(f"v_fma_{ty} {dst}, {', '.join(text)}{sel}{' clamp' if clamp else ''}{OMOD[omod]}\ns_endpgm", arch))
    with np.errstate(all="ignore"):
        want = _out(_fma_ref(*vals, ft), ft, omod, clamp, ieee and arch != "gfx1201", keep_out)
    raw = w.vgpr[8].astype(np.uint64) | (w.vgpr[9].astype(np.uint64) << np.uint64(32) if ty == "f64" else 0)
    if ty == "f16" and opsel & 8:
        raw = raw >> np.uint64(16)
    got = (raw & np.uint64(np.iinfo(UT[ft]).max)).astype(UT[ft]).view(ft)
    _same(got, want, clamp)


@st.composite
def fma_mix_cases(draw):
    return (draw(st.sampled_from(ARCHS)), draw(st.sampled_from(["f32", "lo_f16", "hi_f16"])),
            *(draw(st.integers(0, 7)) for _ in range(4)), draw(st.booleans()),
            [_lane_values(draw, 64) for _ in range(6)])


@settings(max_examples=40, deadline=None)
@given(fma_mix_cases())
def test_fma_mix_modifiers(case):
    """v_fma_mix_f32 / v_fma_mixlo_f16 / v_fma_mixhi_f16: op_sel_hi[i] makes source i an f16 (op_sel[i] picks its
    half) instead of an f32, neg_lo is its neg and neg_hi its abs; the fma rounds once to f32 (Fractions), and
    mixlo / mixhi round that to f16 (LLVM selects them for fptrunc(fma(fpext ...)), the same two roundings) into the
    low / high half, keeping the other."""
    arch, kind, opsel, opsel_hi, neg, absb, clamp, lanes = case
    w = wave(arch)
    n = w.lanes
    vals, text = [], []
    for i in range(3):
        lo, hi = lanes[2 * i][:n].astype(np.float16), lanes[2 * i + 1][:n].astype(np.float16)
        if opsel_hi >> i & 1:
            w.vgpr[2 + i] = lo.view(np.uint16).astype(np.uint32) | hi.view(np.uint16).astype(np.uint32) << 16
            x = (hi if opsel >> i & 1 else lo).astype(np.float64)
        else:
            f = (lanes[2 * i][:n] * 1.1).astype(np.float32)  # f32 values no f16 holds
            w.vgpr[2 + i] = f.view(np.uint32)
            x = f.astype(np.float64)
        s = f"v{2 + i}"
        if absb >> i & 1:
            s, x = f"|{s}|", np.abs(x)
        if neg >> i & 1:
            s, x = f"-{s}", -x
        vals.append(x)
        text.append(s)
    keep = np.arange(n, dtype=np.uint32) * 0x10001 + 0x12340000
    w.vgpr[8] = keep
    bits = lambda v: f"[{v & 1},{v >> 1 & 1},{v >> 2 & 1}]"  # noqa: E731
    name = "v_fma_mix_f32" if kind == "f32" else f"v_fma_mix{kind[:2]}_f16"
    w.run(asm(f"{name} v8, {', '.join(text)} op_sel:{bits(opsel)} op_sel_hi:{bits(opsel_hi)}"
              f"{' clamp' if clamp else ''}\ns_endpgm", arch))
    ft = np.float32 if kind == "f32" else np.float16
    with np.errstate(all="ignore"):  # mixlo / mixhi: the f32 fma, then rounded to f16 (the pcode's f32_to_f16(fma))
        want = _out(_fma_ref(*vals, np.float32).astype(ft), ft, 0, clamp, True)
    got = w.vgpr[8]
    if kind == "f32":
        _same(got.view(np.float32), want, clamp)
        return
    half, other = (got & 0xFFFF, got >> 16) if kind == "lo_f16" else (got >> 16, got & 0xFFFF)
    _same(half.astype(np.uint16).view(np.float16), want, clamp)
    np.testing.assert_array_equal(other, keep >> 16 if kind == "lo_f16" else keep & 0xFFFF)
