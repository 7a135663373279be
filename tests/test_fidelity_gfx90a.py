"""gfx90a's own instructions (emu.pcode.added): the opcodes the CDNA4 vendor tables do not list, on every tier.

Words from llvm-mc-19 -mcpu=gfx90a. The MAD family (v_mad_f32, v_mac_f32 e32 / e64, v_madmk_f32, v_madak_f32,
v_mad_legacy_f32) rounds the product before the add and has no f32 denormals (sources, product and result read and
written as zero of their sign, whatever MODE.FP_DENORM says): expected values by numpy's float32 operations, each
one correctly rounded, with the flushing written out. The MFMAs gfx90a has that CDNA3 / CDNA4 renumbered or dropped
(the i8 32x32x8 / 16x16x16, the bf16 ones with two elements per source, the _1k bf16 ones at their gfx90a numbers)
against numpy matmuls of small integers (every product and sum exact), their operands placed by the lane layout of
AMD's matrix instruction calculator. And a chip runs only its own opcodes: another generation's is <unknown> and
faults as an illegal instruction."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_pcode import _mfma_place
from test_wave import asm

from emu.amd import Wave
from emu.amd.decode import decode
from emu.amd.memory import GPUFault
from tools.llvm_agreement import llvm_mc_disassemble

pytestmark = pytest.mark.skipif(not shutil.which("llvm-mc-19"), reason="llvm-mc-19 is needed to assemble snippets")
TIERS = ("ref", "interp", "threaded", "jit")
ENDPGM = "s_endpgm"
TINY = np.float32(2.0 ** -126)  # the smallest normal f32
F32 = st.floats(width=32, allow_nan=False, allow_infinity=False, min_value=-2.0 ** 60, max_value=2.0 ** 60)


def _flush(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float32)
    return np.where(np.abs(x) < TINY, np.copysign(np.float32(0), x), x).astype(np.float32)


def mad(a, b, c, legacy: bool = False) -> np.ndarray:
    """The MAD: flushed sources, the product rounded to f32 and flushed, the sum rounded and flushed."""
    a, b, c = _flush(a), _flush(b), _flush(c)
    with np.errstate(all="ignore"):
        p = _flush(a * b)
        if legacy:
            p = np.where((a == 0) | (b == 0), np.float32(0), p).astype(np.float32)
        return _flush(p + c)


def run(text: str, tier: str, monkeypatch, **regs: np.ndarray) -> Wave:
    monkeypatch.setenv("HWEMU_TIER", tier)
    w = Wave("gfx90a")
    for name, v in regs.items():
        w.vgpr[int(name[1:])] = np.asarray(v, np.float32).view(np.uint32)
    w.run(asm(text + "\n" + ENDPGM, "gfx90a"))
    return w


def f32(w: Wave, r: int) -> np.ndarray:
    return w.vgpr[r].view(np.float32).copy()


def same(got: np.ndarray, want: np.ndarray) -> None:
    """Bit-equal (-0 is not +0), NaNs of any payload equal."""
    g, e = np.asarray(got, np.float32), np.asarray(want, np.float32)
    nan = np.isnan(g) & np.isnan(e)
    np.testing.assert_array_equal(np.where(nan, 0, g.view(np.uint32)), np.where(nan, 0, e.view(np.uint32)))


TEXTS = ["v_mac_f32_e32 v1, v2, v3", "v_mac_f32_e64 v1, -v2, |v3| clamp", "v_mad_f32 v1, v2, -v3, v4 mul:2",
         "v_mad_legacy_f32 v1, |v2|, v3, v4", "v_madmk_f32 v1, v2, 0x3f800001, v3", "v_madak_f32 v1, v2, v3, 0x1",
         "v_mac_f32_dpp v1, v2, v3 quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf", "buffer_wbinvl1",
         "buffer_wbinvl1_vol", "buffer_invl2", "buffer_store_lds_dword s[4:7], s2 offset:8 lds glc",
         "v_mfma_i32_32x32x8i8 a[0:15], v0, v1, a[0:15]", "v_mfma_i32_16x16x16i8 v[4:7], v0, v1, v[4:7]",
         "v_mfma_f32_32x32x2bf16 a[0:31], v0, v1, a[0:31] cbsz:1 abid:1 blgp:2",
         "v_mfma_f32_16x16x2bf16 a[0:15], v0, v1, a[0:15]", "v_mfma_f32_4x4x2bf16 a[0:3], v0, v1, a[0:3]",
         "v_mfma_f32_32x32x4bf16 a[0:15], v0, v1, a[0:15]", "v_mfma_f32_16x16x8bf16 a[0:3], v0, v1, a[0:3]",
         "v_mfma_f32_32x32x4bf16_1k a[0:31], v[0:1], v[2:3], a[0:31]",
         "v_mfma_f32_16x16x16bf16_1k v[4:7], v[0:1], v[2:3], v[4:7]",
         "v_mfma_f64_4x4x4f64 v[4:5], v[0:1], v[2:3], v[4:5] blgp:3",
         "v_mfma_f32_32x32x8f16 a[0:15], v[0:1], v[2:3], a[0:15]",
         "global_load_dword v1, v2, s[4:5] glc slc scc", "scratch_load_dword v1, v2, off offset:4",
         "scratch_load_dword off, s3 lds", "s_getreg_b32 s1, hwreg(HW_REG_TRAPSTS)", "s_getreg_b32 s1, hwreg(20)"]


def test_the_words_print_as_llvm_prints_them():
    """Each word assembled by llvm-mc-19, disassembled by it and by hwemu: the same text."""
    code = asm("\n".join(TEXTS), "gfx90a")
    pairs = llvm_mc_disassemble(code, "gfx90a")
    assert len(pairs) == len(TEXTS)
    for raw, text in pairs:
        inst = decode(raw, "gfx90a")[0]
        assert inst.size == len(raw) and str(inst) == text


@pytest.mark.parametrize("tier", TIERS)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a=st.lists(F32, min_size=64, max_size=64), b=st.lists(F32, min_size=64, max_size=64),
       c=st.lists(F32, min_size=64, max_size=64))
def test_mad_rounds_the_product(monkeypatch, tier, a, b, c):
    """Two roundings, not one: on random operands (lanes 0..3 chosen so that the fused result differs)."""
    a, b, c = (np.array(x, np.float32) for x in (a, b, c))
    a[:4] = [1 + 2.0 ** -12, 3.0, 1 / 3, 0.1]
    b[:4] = [1 - 2.0 ** -12, 1 / 3, 3.0, 10.0]
    c[:4] = [-1.0, -1.0, -1.0, -1.0]
    w = run("v_mad_f32 v10, v2, v3, v4\nv_mac_f32 v5, v2, v3\nv_mac_f32_e64 v6, v2, v3\n"
            "v_mad_legacy_f32 v11, v2, v3, v4", tier, monkeypatch, v2=a, v3=b, v4=c, v5=c, v6=c)
    for r in (10, 5, 6):
        same(f32(w, r), mad(a, b, c))
    same(f32(w, 11), mad(a, b, c, legacy=True))
    fused = (a[:4].astype(np.float64) * b[:4] + c[:4]).astype(np.float32)
    assert (f32(w, 10)[:4] != fused).any()


@pytest.mark.parametrize("tier", TIERS)
def test_mad_flushes_denormals_whatever_the_mode(monkeypatch, tier):
    """The wave keeps f32 denormals (MODE.FP_DENORM = 0xF): v_mad_f32 still reads and writes them as zero; v_fma_f32
    beside it keeps them."""
    d = np.float32(2.0 ** -130)
    a = np.array([d, -d, 1.0, 2.0 ** -70, 2.0 ** -70, 1.5, -1.0, 0.0] * 8, np.float32)
    b = np.array([2.0 ** 40, 2.0 ** 40, d, 2.0 ** -60, 2.0 ** -60, 2.0 ** -127, 1.0, 1.0] * 8, np.float32)
    c = np.array([0.0, -0.0, 0.0, 0.0, 2.0 ** -126, 0.0, 1.0 + 2.0 ** -23, -0.0] * 8, np.float32)
    w = run("v_mad_f32 v10, v2, v3, v4\nv_fma_f32 v11, v2, v3, v4\nv_madak_f32 v12, v2, v3, 0x0\n"
            "v_madmk_f32 v13, v2, 0x3f800000, v4", tier, monkeypatch, v2=a, v3=b, v4=c)
    same(f32(w, 10), mad(a, b, c))
    same(f32(w, 12), mad(a, b, np.zeros(64, np.float32)))
    same(f32(w, 13), mad(a, np.ones(64, np.float32), c))
    mad_, fma_ = f32(w, 10), f32(w, 11)
    assert mad_[0] == 0 and not np.signbit(mad_[0]) and fma_[0] == 2.0 ** -90  # a denormal source: 2**-130 * 2**40
    assert mad_[1] == 0 and np.signbit(mad_[1]) and fma_[1] == -2.0 ** -90  # read as zero of its sign
    assert mad_[2] == 0 and fma_[2] == d  # a denormal result (1 * 2**-130)
    assert mad_[3] == 0 and fma_[3] == d  # a denormal product, 2**-70 * 2**-60
    assert mad_[4] == 2.0 ** -126 and fma_[4] == np.float32(2.0 ** -126 + 2.0 ** -130)


@pytest.mark.parametrize("tier", TIERS)
def test_mad_legacy_multiplies_zero_by_anything_to_zero(monkeypatch, tier):
    a = np.array([0.0, -0.0, np.inf, np.nan, 0.0, 2.0, 2.0 ** -130, 3.0] * 8, np.float32)
    b = np.array([np.inf, np.nan, 0.0, -0.0, 5.0, 3.0, np.inf, np.inf] * 8, np.float32)
    c = np.array([1.5, -2.0, 0.25, 7.0, -0.0, 1.0, 4.0, 1.0] * 8, np.float32)
    w = run("v_mad_legacy_f32 v10, v2, v3, v4\nv_mad_f32 v11, v2, v3, v4", tier, monkeypatch, v2=a, v3=b, v4=c)
    same(f32(w, 10), mad(a, b, c, legacy=True))
    same(f32(w, 10)[:8], np.array([1.5, -2.0, 0.25, 7.0, 0.0, 7.0, 4.0, np.inf], np.float32))
    assert np.isnan(f32(w, 11)[:4]).all()


@pytest.mark.parametrize("tier", TIERS)
def test_cache_writebacks_change_nothing(monkeypatch, tier):
    w = run("v_mov_b32 v1, 1.0\nbuffer_wbinvl1_vol\nbuffer_wbinvl1\nbuffer_invl2\nv_add_f32 v1, v1, v1", tier,
            monkeypatch)
    assert (f32(w, 1) == 2.0).all()


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("chip", ["gfx90a", "gfx942"])
def test_moves_through_the_acc_vgprs(monkeypatch, tier, chip):
    """v_accvgpr_mov_b32 (the tables give it no pcode; LLVM copies between ACC VGPRs with it) moves a value, as
    v_accvgpr_write / _read do between the two files."""
    monkeypatch.setenv("HWEMU_TIER", tier)
    w = Wave(chip)
    w.vgpr[2] = np.arange(w.vgpr.shape[1], dtype=np.uint32) * 0x01010101 + 7
    w.run(asm("v_accvgpr_write_b32 a1, v2\nv_accvgpr_mov_b32 a4, a1\nv_accvgpr_mov_b32 a5, a4\n"
              f"v_accvgpr_read_b32 v20, a5\n{ENDPGM}", chip))
    assert (w.vgpr[20] == w.vgpr[2]).all()


# --- matrix ops -------------------------------------------------------------------------------------------------
# name: (M, N, K, blocks, element bits) of gfx90a's MFMAs the CDNA3/4 tables list elsewhere or not at all
MFMAS = {"v_mfma_i32_32x32x8i8": (32, 32, 8, 1, 8), "v_mfma_i32_16x16x16i8": (16, 16, 16, 1, 8),
         "v_mfma_f32_32x32x2bf16": (32, 32, 2, 2, 16), "v_mfma_f32_16x16x2bf16": (16, 16, 2, 4, 16),
         "v_mfma_f32_4x4x2bf16": (4, 4, 2, 16, 16), "v_mfma_f32_32x32x4bf16": (32, 32, 4, 1, 16),
         "v_mfma_f32_16x16x8bf16": (16, 16, 8, 1, 16), "v_mfma_f32_32x32x4bf16_1k": (32, 32, 4, 2, 16),
         "v_mfma_f32_16x16x4bf16_1k": (16, 16, 4, 4, 16), "v_mfma_f32_4x4x4bf16_1k": (4, 4, 4, 16, 16),
         "v_mfma_f32_32x32x8bf16_1k": (32, 32, 8, 1, 16), "v_mfma_f32_16x16x16bf16_1k": (16, 16, 16, 1, 16)}


def _operand(m: np.ndarray, rows: int, K: int, blocks: int, bits: int) -> np.ndarray:
    """A (blocks x rows x K; B transposed alike) in registers x lanes: element [b][i][k] in lane i + rows * g,
    item t, g = b and t = k for several blocks, g = k // T and t = k % T for one (T = K * rows / 64 items)."""
    per = K if blocks > 1 else K * rows // 64
    regs = max(1, per * bits // 32)
    out = np.zeros((regs, 64), np.uint32)
    for b in range(blocks):
        for i in range(rows):
            for k in range(K):
                g, t = (b, k) if blocks > 1 else (k // per, k % per)
                v = int(m[b, i, k]) & ((1 << bits) - 1)
                out[t * bits // 32, i + rows * g] |= np.uint32(v << (t * bits % 32))
    return out


def _bf16(x: np.ndarray) -> np.ndarray:
    return (np.asarray(x, np.float32).view(np.uint32) >> 16).astype(np.int64)  # small integers: exact


def _result(regs: np.ndarray, M: int, N: int, blocks: int) -> np.ndarray:
    """D (blocks x M x N) from registers x lanes, placed as test_pcode's _mfma_place documents (K does not move D)."""
    d = np.zeros((blocks, M, N), regs.dtype)
    for (b, i, j), (lane, r) in _mfma_place(M, N, 64, blocks)[2].items():
        d[b, i, j] = regs[r, lane]
    return d


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("name", MFMAS)
def test_mfma_matches_numpy(monkeypatch, tier, name):
    M, N, K, B, bits = MFMAS[name]
    rng = np.random.default_rng(len(name))
    a = rng.integers(-8, 9, (B, M, K))
    b = rng.integers(-8, 9, (B, K, N))
    regs = M * N * B // 64
    isint = "i8" in name
    c = rng.integers(-64, 65, (B, M, N)).astype(np.int32 if isint else np.float32)
    enc = (lambda x: x) if isint else (lambda x: _bf16(x.astype(np.float32)))
    ra, rb = _operand(enc(a), M, K, B, bits), _operand(enc(b.transpose(0, 2, 1)), N, K, B, bits)
    w = Wave("gfx90a")
    monkeypatch.setenv("HWEMU_TIER", tier)
    w.vgpr[0:len(ra)], w.vgpr[2:2 + len(rb)] = ra, rb
    cregs = np.zeros(regs * 64, np.uint32)  # C in D's layout: where _result finds each element
    cregs[_result(np.arange(regs * 64).reshape(regs, 64), M, N, B).reshape(-1)] = c.reshape(-1).view(np.uint32)
    w.vgpr[64:64 + regs] = cregs.reshape(regs, 64)
    src = f"v[0:{len(ra) - 1}]" if len(ra) > 1 else "v0"
    srcb = f"v[2:{1 + len(rb)}]" if len(rb) > 1 else "v2"
    w.run(asm(f"{name} v[64:{63 + regs}], {src}, {srcb}, v[64:{63 + regs}]\n{ENDPGM}", "gfx90a"))
    got = _result(w.vgpr[64:64 + regs].view(np.int32 if isint else np.float32), M, N, B)
    want = np.einsum("bik,bkj->bij", a, b) + c
    np.testing.assert_array_equal(got, want.astype(got.dtype))


# --- one instruction set per chip ------------------------------------------------------------------------------
OTHERS = [("gfx90a", "v_mov_b64_e32 v[0:1], v[2:3]", "gfx942"),  # CDNA3's
          ("gfx90a", "v_lshl_add_u64 v[0:1], v[2:3], 1, v[4:5]", "gfx942"),
          ("gfx90a", "v_mfma_f32_16x16x32_fp8_fp8 v[0:3], v[4:5], v[6:7], v[0:3]", "gfx942"),
          ("gfx942", "v_mac_f32_e32 v1, v2, v3", "gfx90a"),  # gfx90a's
          ("gfx942", "v_mad_f32 v1, v2, v3, v4", "gfx90a")]


@pytest.mark.parametrize("chip, text, home", OTHERS)
def test_another_generations_opcode_is_unknown_and_faults(chip, text, home):
    code = asm(text, home)
    assert str(decode(code, home)[0]) == text
    assert not decode(code, chip)[0].valid
    w = Wave(chip)
    with pytest.raises(GPUFault) as e:
        w.run(code + asm(ENDPGM, chip))
    assert e.value.record.kind == "illegal-instruction"


def test_gfx942_has_no_gfx950_opcodes():
    """v_prng_b32, v_cvt_f32_bf16, v_dot2c_f32_bf16 (gfx950; llvm-mc-19 knows no gfx950: the words are ours)."""
    words = [0x7E02B102, 0x7E02B702, 0x2C020702]  # VOP1 0x58, 0x5b: v1, v2; VOP2 0x16: v1, v2, v3
    for word in words:
        code = word.to_bytes(4, "little")
        assert decode(code, "gfx950")[0].valid and not decode(code, "gfx942")[0].valid


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("chip", ["gfx90a", "gfx942"])
def test_flat_offset_msb_is_printed_and_ignored(monkeypatch, tier, chip):
    """gfx9's FLAT encoding has a 13-bit OFFSET; llvm-mc-19 prints all 13 bits, the FLAT segment reads 12 (LLVM's
    backend: "MSB is ignored and forced to zero"): a load with offset field 0x1008 reads the address + 8."""
    code = bytearray(asm("flat_load_dword v1, v[2:3] offset:8", chip))
    code[1] |= 0x10  # OFFSET bit 12
    assert llvm_mc_disassemble(bytes(code), chip)[0][1] == "flat_load_dword v1, v[2:3] offset:4104"
    assert str(decode(bytes(code), chip)[0]) == "flat_load_dword v1, v[2:3] offset:4104"
    monkeypatch.setenv("HWEMU_TIER", tier)
    w = Wave(chip)
    w.vm.map(1 << 16, np.arange(4096, dtype=np.uint32))
    w.vgpr[2], w.vgpr[3] = 1 << 16, 0
    w.run(bytes(code) + asm("s_waitcnt vmcnt(0) lgkmcnt(0)\ns_endpgm", chip))
    assert (w.vgpr[1] == 2).all()
