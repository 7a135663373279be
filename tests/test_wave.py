"""Free-standing waves (emu.amd.Wave) running snippets assembled by llvm-mc-19; results checked against numpy."""
from __future__ import annotations

import re
import shutil
import subprocess
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

MC = "llvm-mc-19"
pytestmark = pytest.mark.skipif(not shutil.which(MC), reason=f"{MC} is needed to assemble snippets")


def asm(text: str, arch: str, *attrs: str) -> bytes:
    p = subprocess.run([MC, "-triple=amdgcn-amd-amdhsa", f"-mcpu={arch}", "-show-encoding",
                        *(f"-mattr={a}" for a in attrs)], input=text,
                       capture_output=True, text=True, check=True)
    out = bytearray()
    for m in re.finditer(r"encoding: \[([^\]]*)\]", p.stdout):
        out += bytes(int(b, 16) for b in m.group(1).split(","))
    return bytes(out)


def wave(arch: str, **vgprs):
    from emu.amd import Wave
    w = Wave(arch)
    for name, v in vgprs.items():
        w.vgpr[int(name[1:])] = np.asarray(v).view(np.uint32)
    return w


F32 = st.floats(width=32, allow_nan=False, allow_infinity=False)


@settings(max_examples=10, deadline=None)
@given(st.lists(F32, min_size=64, max_size=64), st.lists(F32, min_size=64, max_size=64))
def test_valu_f32_fma_and_add(a, b):
    for arch in ("gfx1100", "gfx942"):
        w = wave(arch)
        n = w.lanes
        x, y = np.array(a[:n], np.float32), np.array(b[:n], np.float32)
        w.vgpr[1], w.vgpr[2] = x.view(np.uint32), y.view(np.uint32)
        w.run(asm("v_add_f32 v3, v1, v2\nv_mul_f32 v4, v1, v2\nv_fma_f32 v5, v1, v2, 1.0\ns_endpgm", arch))
        with np.errstate(over="ignore"):
            np.testing.assert_array_equal(w.vgpr[3].view(np.float32), x + y)
            np.testing.assert_array_equal(w.vgpr[4].view(np.float32), x * y)
            wide = x.astype(np.float64) * y + 1.0  # the product is exact in f64; the sum may not be
            ref = wide.astype(np.float32)
        exact = np.array([Fraction(float(a)) * Fraction(float(b)) + 1 == Fraction(float(c))
                          for a, b, c in zip(x, y, wide, strict=True)])  # f64 exact: a single rounding to f32
        np.testing.assert_array_equal(w.vgpr[5].view(np.float32)[exact], ref[exact])


def test_exec_masks_vector_writes_and_compares():
    w = wave("gfx1100")
    w.vgpr[1] = np.arange(32, dtype=np.uint32)
    w.vgpr[2] = 7
    w.exec = 0x0000FFFF
    w.run(asm("v_cmp_gt_u32 vcc_lo, 10, v1\nv_cndmask_b32 v2, 5, v1, vcc_lo\ns_endpgm", "gfx1100"))
    assert w.vcc == 0x3FF  # lanes 0..9 (inactive lanes read as 0)
    ref = np.where(np.arange(32) < 10, np.arange(32), 5)
    ref[16:] = 7  # lanes EXEC disabled keep their value
    np.testing.assert_array_equal(w.vgpr[2], ref)


def test_salu_carry_and_branch():
    w = wave("gfx1100")
    w.sgpr[0], w.sgpr[1] = 0xFFFFFFFF, 1
    w.run(asm("s_add_u32 s2, s0, s1\ns_cbranch_scc1 1\ns_mov_b32 s4, 1\ns_addc_u32 s3, 0, 0\ns_mov_b32 s5, 2\n"
              "s_endpgm", "gfx1100"))
    assert (w.sgpr[2], w.sgpr[3], w.sgpr[4], w.sgpr[5]) == (0, 1, 0, 2)


def test_dpp_row_shr():
    w = wave("gfx1100")
    w.vgpr[1] = np.arange(100, 132, dtype=np.uint32)
    w.vgpr[2] = 0
    w.run(asm("v_mov_b32_dpp v2, v1 row_shr:1 row_mask:0xf bank_mask:0xf\ns_endpgm", "gfx1100"))
    src = np.arange(100, 132)
    ref = np.where(np.arange(32) % 16 == 0, 0, np.roll(src, 1))  # first lane of each row: no source, not written
    np.testing.assert_array_equal(w.vgpr[2], ref)


def test_wave64_on_rdna3():
    from emu.amd import Wave
    w = Wave("gfx1100", wave_size=64)
    w.vgpr[0] = np.arange(64, dtype=np.uint32)
    w.run(asm("v_lshlrev_b32 v1, 2, v0\nv_cmp_lt_u32 vcc, 40, v0\ns_endpgm", "gfx1100", "+wavefrontsize64"))
    np.testing.assert_array_equal(w.vgpr[1], np.arange(64) * 4)
    assert w.vcc == ((1 << 64) - 1) ^ ((1 << 41) - 1)


def test_illegal_instruction_faults():
    from emu.amd import GPUFault
    w = wave("gfx1100")
    with pytest.raises(GPUFault) as e:
        w.run(b"\xff\xff\xff\xff")
    assert e.value.record.kind == "illegal-instruction" and e.value.record.pc == 0


def test_packed_f16_opsel_and_constants():
    h = np.float16
    lo, hi = np.arange(32).astype(h), np.full(32, 2.0, h)
    w = wave("gfx1100")
    w.vgpr[0] = lo.view(np.uint16).astype(np.uint32) | hi.view(np.uint16).astype(np.uint32) << 16
    w.vgpr[1] = 0x3C004000  # lo 2.0, hi 1.0
    w.run(asm("v_pk_add_f16 v2, v0, v1\nv_pk_mul_f16 v3, v0, v1 op_sel:[1,0] op_sel_hi:[0,1]\n"
              "v_pk_add_f16 v4, v0, 1.0\ns_endpgm", "gfx1100"))

    def halves(r):
        return w.vgpr[r].astype(np.uint16).view(h), (w.vgpr[r] >> 16).astype(np.uint16).view(h)
    np.testing.assert_array_equal(halves(2), (lo + h(2), hi + h(1)))
    np.testing.assert_array_equal(halves(3), (hi * h(2), lo * h(1)))  # op_sel picks v0.hi for lo, v0.lo for hi
    # a float inline constant of a packed f16 operand is the f16 value in the low half and 0 in the high half
    # (LLVM's AMDGPUBaseInfo getInlineEncodingV216 on the hardware behaviour): op_sel_hi:1 reads that 0
    np.testing.assert_array_equal(halves(4), (lo + h(1), hi))


def test_dpp_quad_perm_and_dpp8():
    w = wave("gfx1100")
    src = np.arange(100, 132, dtype=np.uint32)
    w.vgpr[0] = src
    w.run(asm("v_mov_b32_dpp v5, v0 quad_perm:[3,2,1,0] row_mask:0xf bank_mask:0xf\n"
              "v_mov_b32_dpp v6, v0 dpp8:[7,6,5,4,3,2,1,0]\ns_getpc_b64 s[4:5]\ns_endpgm", "gfx1100"))
    lanes = np.arange(32)
    np.testing.assert_array_equal(w.vgpr[5], src[(lanes & ~3) | (3 - (lanes & 3))])
    np.testing.assert_array_equal(w.vgpr[6], src[(lanes & ~7) | (7 - (lanes & 7))])
    assert (w.sgpr[4], w.sgpr[5]) == (8 + 8 + 4, 0)  # s_getpc: address of the next instruction


def test_sdwa_selects_on_cdna():
    w = wave("gfx942")
    w.vgpr[0] = np.arange(64, dtype=np.uint32) * 0x10203 + 0x00800000
    w.vgpr[1] = 0x1FF
    w.vgpr[2] = 0xAABBCCDD
    w.run(asm("v_add_u32_sdwa v2, v0, v1 dst_sel:BYTE_1 dst_unused:UNUSED_PRESERVE src0_sel:WORD_1 src1_sel:BYTE_0\n"
              "v_mov_b32_sdwa v3, sext(v0) dst_sel:WORD_0 dst_unused:UNUSED_SEXT src0_sel:BYTE_2\ns_endpgm",
              "gfx942"))
    v0 = np.arange(64, dtype=np.uint32) * 0x10203 + 0x00800000
    s = ((v0 >> 16) + 0xFF) & 0xFF
    np.testing.assert_array_equal(w.vgpr[2], (0xAABBCCDD & ~0xFF00) | s << 8)
    b2 = ((v0 >> 16) & 0xFF).astype(np.uint8).view(np.int8).astype(np.int32)  # sign-extended byte, then the word
    np.testing.assert_array_equal(w.vgpr[3], b2.astype(np.uint32))


@pytest.mark.parametrize("arch,load,store", [("gfx942", "buffer_load_dword", "buffer_store_dword"),
                                             ("gfx1100", "buffer_load_b32", "buffer_store_b32")])
def test_buffer_range_checking(arch, load, store):
    w = wave(arch)
    va = w.vm.alloc(4096)
    w.vm.write(va, np.arange(1024, dtype=np.uint32))
    w.sgpr[0:4] = [va & 0xFFFFFFFF, va >> 32, 64, 0]  # raw buffer of 64 bytes
    w.vgpr[0] = np.arange(w.lanes) * 4
    w.vgpr[2] = 1000 + np.arange(w.lanes)
    w.run(asm(f"{load} v1, v0, s[0:3], 0 offen offset:4\n{store} v2, v0, s[0:3], 0 offen\ns_endpgm", arch))
    lanes = np.arange(w.lanes)
    np.testing.assert_array_equal(w.vgpr[1], np.where(lanes < 15, lanes + 1, 0))  # out of range reads 0
    mem = np.frombuffer(w.vm.read(va, 4096), np.uint32)
    np.testing.assert_array_equal(mem[:16], 1000 + np.arange(16))
    np.testing.assert_array_equal(mem[16:], np.arange(16, 1024))  # out-of-range stores are dropped


def test_wmma_rdna3():
    """v_wmma_f32_16x16x16_f16 (wave32): lane l holds row l%16 of A and column l%16 of B; VGPR r of C/D holds
    row 2r + l//16, column l%16."""
    rng = np.random.default_rng(0)
    a, b = (rng.integers(-4, 5, (16, 16)).astype(np.float16) for _ in range(2))
    c = rng.integers(-4, 5, (16, 16)).astype(np.float32)
    w = wave("gfx1100")
    ln = np.arange(32)
    ra, rb = a[ln % 16], b[:, ln % 16].T

    def pack(m, k):
        return m[:, 2 * k].view(np.uint16).astype(np.uint32) | m[:, 2 * k + 1].view(np.uint16).astype(np.uint32) << 16
    for r in range(8):
        w.vgpr[8 + r], w.vgpr[16 + r] = pack(ra, r), pack(rb, r)
        w.vgpr[24 + r] = c[2 * r + ln // 16, ln % 16].view(np.uint32)
    w.run(asm("v_wmma_f32_16x16x16_f16 v[0:7], v[8:15], v[16:23], v[24:31]\ns_endpgm", "gfx1100"))
    d = np.zeros((16, 16), np.float32)
    for r in range(8):
        d[2 * r + ln // 16, ln % 16] = w.vgpr[r].view(np.float32)
    np.testing.assert_array_equal(d, a.astype(np.float32) @ b.astype(np.float32) + c)  # small integers: exact


@pytest.mark.parametrize("dst,src2", [("v[0:3]", "v[6:9]"), ("a[0:3]", "a[6:9]")])
def test_mfma_cdna(dst, src2):
    """v_mfma_f32_16x16x4_f32 (wave64): lane l holds A[l%16][l//16] and B[l//16][l%16]; VGPR r of C/D holds
    row 4*(l//16) + r, column l%16; C/D in VGPRs or ACC VGPRs."""
    rng = np.random.default_rng(1)
    a, b = rng.integers(-4, 5, (16, 4)).astype(np.float32), rng.integers(-4, 5, (4, 16)).astype(np.float32)
    c = rng.integers(-4, 5, (16, 16)).astype(np.float32)
    w = wave("gfx942")
    ln = np.arange(64)
    w.vgpr[4], w.vgpr[5] = a[ln % 16, ln // 16].view(np.uint32), b[ln // 16, ln % 16].view(np.uint32)
    regs = w.agpr if dst[0] == "a" else w.vgpr
    for r in range(4):
        regs[6 + r] = c[4 * (ln // 16) + r, ln % 16].view(np.uint32)
    w.run(asm(f"v_mfma_f32_16x16x4_f32 {dst}, v4, v5, {src2}\ns_endpgm", "gfx942"))
    d = np.zeros((16, 16), np.float32)
    for r in range(4):
        d[4 * (ln // 16) + r, ln % 16] = regs[r].view(np.float32)
    np.testing.assert_array_equal(d, a @ b + c)


def test_lds_permutes_and_swizzle():
    w = wave("gfx1100")
    src = np.arange(100, 132, dtype=np.uint32)
    w.vgpr[0], w.vgpr[1] = src, (31 - np.arange(32)) * 4
    w.run(asm("ds_bpermute_b32 v2, v1, v0\nds_permute_b32 v3, v1, v0\nds_swizzle_b32 v4, v0 offset:swizzle(SWAP,1)\n"
              "ds_swizzle_b32 v5, v0 offset:swizzle(QUAD_PERM,3,2,1,0)\ns_endpgm", "gfx1100"))
    ln = np.arange(32)
    np.testing.assert_array_equal(w.vgpr[2], src[31 - ln])  # pull from lane addr/4
    np.testing.assert_array_equal(w.vgpr[3], src[31 - ln])  # push to lane addr/4
    np.testing.assert_array_equal(w.vgpr[4], src[ln ^ 1])
    np.testing.assert_array_equal(w.vgpr[5], src[(ln & ~3) | (3 - (ln & 3))])


def test_wmma_rdna4():
    """gfx12 layout: lane l holds row l%16 of A / column l%16 of B for k = 8*(l//16) .. +7 (4 VGPRs);
    VGPR r of C/D holds row r + 8*(l//16), column l%16."""
    rng = np.random.default_rng(2)
    a, b = (rng.integers(-4, 5, (16, 16)).astype(np.float16) for _ in range(2))
    c = rng.integers(-4, 5, (16, 16)).astype(np.float32)
    w = wave("gfx1201")
    ln = np.arange(32)

    def pack(x, y):
        return x.view(np.uint16).astype(np.uint32) | y.view(np.uint16).astype(np.uint32) << 16
    for r in range(4):
        k = 8 * (ln // 16) + 2 * r
        w.vgpr[8 + r], w.vgpr[12 + r] = pack(a[ln % 16, k], a[ln % 16, k + 1]), pack(b[k, ln % 16], b[k + 1, ln % 16])
    for r in range(8):
        w.vgpr[16 + r] = c[r + 8 * (ln // 16), ln % 16].view(np.uint32)
    w.run(asm("v_wmma_f32_16x16x16_f16 v[0:7], v[8:11], v[12:15], v[16:23]\ns_endpgm", "gfx1201"))
    d = np.zeros((16, 16), np.float32)
    for r in range(8):
        d[r + 8 * (ln // 16), ln % 16] = w.vgpr[r].view(np.float32)
    np.testing.assert_array_equal(d, a.astype(np.float32) @ b.astype(np.float32) + c)


def test_watchdog_stops_runaway_wave():
    from emu.amd import GPUFault
    w = wave("gfx1100")
    with pytest.raises(GPUFault) as e:
        w.run(asm("s_branch -1\ns_endpgm", "gfx1100"), limit=1000)
    assert e.value.record.kind == "watchdog" and e.value.record.pc == 0


def test_vccz_sees_all_64_lanes():
    w = wave("gfx942")
    w.vgpr[0] = np.arange(64, dtype=np.uint32)
    w.run(asm("v_cmp_eq_u32 vcc, 40, v0\ns_cbranch_vccz 1\ns_mov_b32 s7, 1\ns_endpgm", "gfx942"))
    assert w.vcc == 1 << 40 and w.sgpr[7] == 1  # VCC is not zero: no branch


def test_cdna_vgpr_indexing_mode():
    """s_set_gpr_idx_on offsets the selected VGPR operands by M0[7:0] until s_set_gpr_idx_off."""
    w = wave("gfx942")
    w.vgpr[0], w.vgpr[3] = 5, 77
    w.run(asm("s_mov_b32 s1, 3\ns_set_gpr_idx_on s1, gpr_idx(SRC0,DST)\nv_mov_b32 v1, v0\ns_set_gpr_idx_off\n"
              "v_mov_b32 v2, v0\ns_endpgm", "gfx942"))
    assert (w.vgpr[4] == 77).all() and (w.vgpr[1] == 0).all()  # v[0+3] -> v[1+3]
    assert (w.vgpr[2] == 5).all()  # indexing off again


U32 = st.integers(0, 2**32 - 1)


@settings(max_examples=8, deadline=None)
@given(st.lists(U32, min_size=64, max_size=64), st.lists(U32, min_size=64, max_size=64),
       st.integers(0, 2**64 - 1), U32, U32)
@example(list(range(64)), list(range(64)), 1 << 63, 0, 0)  # only lane 63 active
def test_integer_ops_against_numpy(a, b, exec_mask, s0, s1):
    """Integer VALU/SALU results under a random EXEC mask, against numpy uint32/uint64 arithmetic."""
    for arch, lanes in (("gfx1100", 32), ("gfx942", 64)):
        w = wave(arch)
        x, y = np.array(a[:lanes], np.uint32), np.array(b[:lanes], np.uint32)
        w.vgpr[1], w.vgpr[2], w.vgpr[5] = x, y, 0xDEADBEEF
        w.sgpr[0], w.sgpr[1] = s0, s1
        w.exec = exec_mask & ((1 << lanes) - 1)
        add = "v_add_nc_u32 v3, v1, v2" if arch == "gfx1100" else "v_add_u32 v3, v1, v2"
        w.run(asm(f"{add}\nv_mul_lo_u32 v4, v1, v2\nv_lshlrev_b32 v5, v2, v1\ns_add_u32 s2, s0, s1\n"
                  "s_addc_u32 s3, 0, 0\ns_endpgm", arch))
        on = np.array([(w.exec >> i) & 1 for i in range(lanes)], bool)
        np.testing.assert_array_equal(w.vgpr[3][on], (x + y)[on])
        np.testing.assert_array_equal(w.vgpr[4][on], (x.astype(np.uint64) * y).astype(np.uint32)[on])
        np.testing.assert_array_equal(w.vgpr[5][on], (x << (y & 31))[on])
        assert (w.vgpr[3][~on] == 0).all() and (w.vgpr[5][~on] == 0xDEADBEEF).all()  # disabled lanes unchanged
        assert (int(w.sgpr[2]), int(w.sgpr[3])) == ((s0 + s1) & 0xFFFFFFFF, (s0 + s1) >> 32)


@pytest.mark.parametrize("tier", ["ref", "interp", "threaded", "jit"])
def test_writelane_ignores_exec(tier, monkeypatch):
    """V_WRITELANE_B32 writes its lane whatever EXEC holds (the ISA guides; LLVM spills SGPRs to VGPR lanes with it
    inside branches no lane may take); V_READLANE_B32 reads one lane likewise."""
    monkeypatch.setenv("HWEMU_TIER", tier)
    w = wave("gfx1100")
    w.vgpr[1] = np.arange(32, dtype=np.uint32)
    w.sgpr[0], w.sgpr[1] = 77, 9
    w.exec = 0
    w.run(asm("v_writelane_b32 v1, s0, 3\nv_writelane_b32 v1, 5, s1\nv_readlane_b32 s2, v1, 3\ns_endpgm", "gfx1100"))
    want = np.arange(32, dtype=np.uint32)
    want[3], want[9] = 77, 5
    np.testing.assert_array_equal(w.vgpr[1], want)
    assert w.sgpr[2] == 77
