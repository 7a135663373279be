"""fp8 / bf8 on CDNA (issue 13, item 4): gfx942 (CDNA3) has the FNUZ formats (E4M3 bias 8, E5M2 bias 16, no
infinities, no -0, 0x80 the only NaN), gfx950 (CDNA4) the OCP ones (E4M3FN bias 7 with NaN at S.1111.111, E5M2
bias 15 with IEEE infinities and NaNs). References: those definitions, decoded code by code here; conversions
round to the nearest value, ties to the even code."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
from test_wave import asm, wave

pytestmark = pytest.mark.skipif(not shutil.which("llvm-mc-19"), reason="llvm-mc-19 is needed to assemble snippets")

FORMATS = {  # (arch, kind): exponent bits, mantissa bits, bias, special values
    ("gfx942", "fp8"): (4, 3, 8, "fnuz"), ("gfx942", "bf8"): (5, 2, 16, "fnuz"),
    ("gfx950", "fp8"): (4, 3, 7, "fn"), ("gfx950", "bf8"): (5, 2, 15, "ieee"),
}


def decode(code: int, eb: int, mb: int, bias: int, special: str) -> float:
    s, e, m = code >> 7, code >> mb & ((1 << eb) - 1), code & ((1 << mb) - 1)
    if special == "fnuz" and code == 0x80:
        return float("nan")
    if special == "fn" and e == (1 << eb) - 1 and m == (1 << mb) - 1:
        return float("nan")
    if special == "ieee" and e == (1 << eb) - 1:
        return float("nan") if m else (-1) ** s * float("inf")
    v = (m / (1 << mb)) * 2.0 ** (1 - bias) if e == 0 else (1 + m / (1 << mb)) * 2.0 ** (e - bias)
    return -v if s else v


def encode(x: float, fmt) -> int:
    """Nearest code, ties to the even one (x finite and within the format's range)."""
    finite = [(decode(c, *fmt), c) for c in range(256) if np.isfinite(decode(c, *fmt))]
    best = min(abs(v - x) for v, _ in finite)
    signed_zero = fmt[3] != "fnuz"  # FNUZ has one zero
    codes = sorted(c for v, c in finite if abs(v - x) == best
                   and (v != 0 or not signed_zero or np.signbit(v) == np.signbit(x)))
    even = [c for c in codes if c % 2 == 0]
    return (even or codes)[0]


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
@pytest.mark.parametrize("kind", ["fp8", "bf8"])
def test_decode_every_code(arch, kind):
    fmt = FORMATS[arch, kind]
    w = wave(arch)
    w.vgpr[1] = (np.arange(256, dtype=np.uint32).reshape(64, 4) << np.arange(0, 32, 8, dtype=np.uint32)).sum(1)
    w.run(asm("".join(f"v_cvt_f32_{kind}_sdwa v{2 + b}, v1 src0_sel:BYTE_{b}\n" for b in range(4)) + "s_endpgm",
              "gfx942"))
    got = np.stack([w.vgpr[2 + b].view(np.float32) for b in range(4)], 1).reshape(-1)
    want = np.array([decode(c, *fmt) for c in range(256)], np.float32)
    np.testing.assert_array_equal(got, want)  # NaNs compare equal to NaNs
    np.testing.assert_array_equal(np.signbit(got[~np.isnan(got)]), np.signbit(want[~np.isnan(want)]))


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
@pytest.mark.parametrize("kind", ["fp8", "bf8"])
def test_convert_rounds_to_nearest_even(arch, kind):
    fmt = FORMATS[arch, kind]
    top = max(decode(c, *fmt) for c in range(128) if np.isfinite(decode(c, *fmt)))
    rng = np.random.default_rng(5)
    x = (rng.uniform(-1, 1, 64) * top * 2.0 ** -rng.integers(0, 12, 64)).astype(np.float32)
    x[:4] = [0.0, -0.0, top, 1.0]
    w = wave(arch)
    w.vgpr[2], w.vgpr[3] = x.view(np.uint32), (x[::-1]).copy().view(np.uint32)
    w.run(asm(f"v_cvt_pk_{kind}_f32 v1, v2, v3\ns_endpgm", "gfx942"))
    np.testing.assert_array_equal(w.vgpr[1] & 0xFF, [encode(float(v), fmt) for v in x])
    np.testing.assert_array_equal(w.vgpr[1] >> 8 & 0xFF, [encode(float(v), fmt) for v in x[::-1]])
