"""The hardware registers s_getreg / s_setreg reach (issue 13).

- Allocation and instruction-buffer registers: s_getreg of HW_REG_LDS_ALLOC, GPR_ALLOC, IB_STS and (RDNA3) IB_STS2
  returns what the wave holds, in the layout the Linux amdkfd CWSR trap handlers read to save a wave
  (cwsr_trap_handler_gfx9/gfx10/gfx12.asm) and the headers' SQ_WAVE_GPR_ALLOC / SQ_WAVE_LDS_ALLOC
  (gc_9_4_3, gc_11_0_0, gc_12_0_0_sh_mask.h): LDS_ALLOC.LDS_SIZE [20:12] in 256-byte units (gfx12: 512) of the
  whole 512-byte COMPUTE_PGM_RSRC2.LDS_SIZE granules the workgroup was given; GPR_ALLOC.VGPR_SIZE at [11:6]
  (gfx90a and later: (VGPR_SIZE + 1) * 8 VGPRs and ACC VGPRs together), [19:12] (gfx11, gfx12: (VGPR_SIZE + 1) * 4
  VGPRs), CDNA's SGPR_SIZE [27:24] such that (SGPR_SIZE + 1) * 16 SGPRs are saved; IB_STS2.WAVE64 (bit 11).
  Expectations come from those formulas and the compiler's metadata (.vgpr_count / .sgpr_count /
  .group_segment_fixed_size in the code object's notes), not from hwemu.
- MODE: the bits s_setreg can set are the fields of SQ_WAVE_MODE in those headers (the same bits ROCdbgapi's
  register_read_only_mask leaves writable); the reserved rest reads 0, whatever is written."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from objfile.codeobj import CodeObject
from stack.codegen import opencl

needs_cl = pytest.mark.skipif(not opencl.available(), reason="clang-19 and ld.lld-19 are needed to build kernels")
needs_mc = pytest.mark.skipif(not shutil.which("llvm-mc-19"), reason="llvm-mc-19 is needed to assemble snippets")
GETREG = "__builtin_amdgcn_s_getreg({} | 31 << 11)"  # hwreg(id, 0, 32)
SRC = """kernel void k(global uint *o, global float *x) {{
  local float tile[{n}];
  int i = get_local_id(0);
  tile[i] = x[i];
  barrier(CLK_LOCAL_MEM_FENCE);
  x[i] = tile[63 - i] * 2.0f;
  if (i == 0) {{ o[0] = {lds}; o[1] = {ib}; o[2] = {ib2}; o[3] = {gpr}; }}
  __asm__ volatile("; claims registers" ::: "v45", "s60");  // a register allocation worth measuring
}}"""
GRANULE = {"gfx1100": 256, "gfx942": 256, "gfx1201": 512}


def _kernel(arch: str, n: int) -> bytes:
    ib2 = GETREG.format(28) if arch == "gfx1100" else "0u"
    return opencl.compile_cl(SRC.format(n=n, lds=GETREG.format(6), ib=GETREG.format(7), ib2=ib2,
                                        gpr=GETREG.format(5)), arch, "-O3")


def _run(arch: str, code: bytes) -> np.ndarray:
    from test_kernels import launch, result
    x = np.arange(64, dtype=np.float32)
    gpu, bufs = launch(arch, code, "k", (1,), (64,), np.zeros(4, np.uint32), x)
    np.testing.assert_array_equal(result(gpu, bufs[1], x), x[::-1] * 2)
    return result(gpu, bufs[0], np.zeros(4, np.uint32))


@needs_cl
@pytest.mark.parametrize("arch", ["gfx1100", "gfx942", "gfx1201"])
@pytest.mark.parametrize("n", [64, 300, 1000])
def test_lds_alloc_and_ib_sts(arch, n):
    code = _kernel(arch, n)
    kd = next(iter(CodeObject.parse(code).kernels.values())).descriptor
    assert kd.group_segment_fixed_size == 4 * n
    lds, ib, ib2, _ = _run(arch, code)
    # the SPI grants whole 512-byte RSRC2.LDS_SIZE granules; LDS_SIZE at [20:12] counts the SQ's units; base 0
    assert lds == -(-4 * n // 512) * 512 // GRANULE[arch] << 12
    assert ib == 0  # nothing outstanding: every access retired before s_getreg issues
    assert ib2 == (0 if arch == "gfx1100" and kd.wave32 else 1 << 11 if arch == "gfx1100" else 0)


@needs_cl
@pytest.mark.parametrize("arch", ["gfx1100", "gfx942", "gfx1201"])
def test_gpr_alloc_layout_covers_the_compiler_counts(arch):
    """gpr_alloc(RSRC1) holds at least the registers the compiler says the kernel uses, in the trap handler's
    units, and no more than one allocation granule beyond."""
    from emu.amd.exec.hwreg import gpr_alloc
    code = _kernel(arch, 64)
    k = next(iter(CodeObject.parse(code).kernels.values()))
    kd, meta = k.descriptor, k.metadata
    fam = {"gfx1100": "rdna3", "gfx942": "cdna", "gfx1201": "rdna4"}[arch]
    lanes = 32 if kd.wave32 else 64
    v = gpr_alloc(fam, lanes, kd.rsrc1)
    shift = {"rdna3": 12, "cdna": 6, "rdna4": 12}[fam]
    width = 6 if fam == "cdna" else 8
    vgprs = ((v >> shift & (1 << width) - 1) + 1) * (8 if fam == "cdna" else 4)  # CDNA: VGPRs and ACC VGPRs
    used = meta[".vgpr_count"] + (meta.get(".agpr_count", 0) if fam == "cdna" else 0)
    assert used <= vgprs < used + 8
    if fam == "cdna":
        sgprs = ((v >> 24 & 0xF) + 1) * 16
        assert meta[".sgpr_count"] <= sgprs < meta[".sgpr_count"] + 16 + 8


@needs_cl
def test_gpr_alloc_through_a_dispatch():
    from emu.amd.exec.hwreg import gpr_alloc
    code = _kernel("gfx942", 64)
    kd = next(iter(CodeObject.parse(code).kernels.values())).descriptor
    assert _run("gfx942", code)[3] == gpr_alloc("cdna", 64, kd.rsrc1)


HW_ID_SRC = """kernel __attribute__((reqd_work_group_size(1024, 1, 1))) void k(global uint *o) {
  uint ws = __builtin_amdgcn_wavefrontsize(), i = get_local_id(0);
  uint at = (get_group_id(0) * (get_local_size(0) / ws) + i / ws) * 2;
  if (i %% ws == 0) { o[at] = %s; o[at + 1] = %s; }
}"""


def _field(v: int, lo: int, hi: int) -> int:
    return v >> lo & (1 << hi - lo + 1) - 1


@needs_cl
@pytest.mark.parametrize("arch", ["gfx1100", "gfx942", "gfx1201"])
def test_hw_id_fields_follow_the_placement_model(arch):
    """Each wave of two 1024-item workgroups reads HW_ID (gfx9) / HW_ID1 and HW_ID2 (RDNA) field by field in the
    layouts of Linux's gc_9_4_3 SQ_WAVE_HW_ID and gc_11_0_0 / gc_12_0_0 SQ_WAVE_HW_ID1 / HW_ID2: the wave's index
    i in its workgroup (from get_local_id / wavefrontsize) gives SIMD i % 4 and wave slot i // 4; CU/WGP, SA/SH,
    SE and workgroup slot 0; queue 0, pipe 0, ME 1; VMID amdkfd's first (3 on gfx 9.4.x, else 8)."""
    from test_kernels import launch, result
    cdna = arch == "gfx942"
    regs = (GETREG.format(4), "0u") if cdna else (GETREG.format(23), GETREG.format(24))
    code = opencl.compile_cl(HW_ID_SRC % regs, arch, "-O3")
    ws = 32 if next(iter(CodeObject.parse(code).kernels.values())).descriptor.wave32 else 64
    waves = 1024 // ws
    out = np.zeros(2 * 2 * waves, np.uint32)
    gpu, bufs = launch(arch, code, "k", (2,), (1024,), out)
    got = result(gpu, bufs[0], out).reshape(2, waves, 2)
    for g in range(2):
        for i in range(waves):
            a, b = (int(x) for x in got[g, i])
            if cdna:  # WAVE_ID SIMD_ID PIPE_ID CU_ID SH_ID SE_ID TG_ID VM_ID QUEUE_ID STATE_ID ME_ID
                fields = [_field(a, lo, hi) for lo, hi in ((0, 3), (4, 5), (6, 7), (8, 11), (12, 12), (13, 15),
                                                           (16, 19), (20, 23), (24, 26), (27, 29), (30, 31))]
                assert fields == [i // 4, i % 4, 0, 0, 0, 0, 0, 3, 0, 0, 1], (g, i, hex(a))
            else:  # HW_ID1: WAVE_ID SIMD_ID WGP_ID SA_ID SE_ID DP_RATE, nothing else set
                assert [_field(a, lo, hi) for lo, hi in ((0, 4), (8, 9), (10, 13), (16, 16), (18, 20), (29, 31))] \
                    == [i // 4, i % 4, 0, 0, 0, 0] and a & ~0xE01F3F1F == 0, (g, i, hex(a))
                # HW_ID2: QUEUE_ID PIPE_ID ME_ID STATE_ID WG_ID VM_ID
                assert [_field(b, lo, hi) for lo, hi in ((0, 3), (4, 5), (8, 9), (12, 14), (16, 20), (24, 27))] \
                    == [0, 0, 1, 0, 0, 8] and b & ~0x0F1F733F == 0, (g, i, hex(b))


# SQ_WAVE_MODE__<field>_MASK of the Linux amdgpu headers: gc_9_4_3 (gfx942), gc_11_0_0 (gfx1100), gc_12_0_0
# (gfx1201). ROCdbgapi's register_read_only_mask (architecture.cpp) calls the other bits reserved ("0") for gfx11
# and gfx12; for gfx9 its generic [22:21] agrees, its gfx940_t lists only bit 22.
_FIRST_TEN = {"FP_ROUND": 0xF, "FP_DENORM": 0xF0, "DX10_CLAMP": 0x100, "IEEE": 0x200, "LOD_CLAMPED": 0x400}
MODE_MASKS = {
    "gfx942": {**_FIRST_TEN, "DEBUG_EN": 0x800, "EXCP_EN": 0x1FF000, "FP16_OVFL": 0x800000, "POPS_PACKER0": 0x1000000,
               "POPS_PACKER1": 0x2000000, "DISABLE_PERF": 0x4000000, "GPR_IDX_EN": 0x8000000, "VSKIP": 0x10000000,
               "CSP": 0xE0000000},
    "gfx1100": {**_FIRST_TEN, "TRAP_AFTER_INST_EN": 0x800, "EXCP_EN": 0x1FF000, "WAVE_END": 0x200000,
                "FP16_OVFL": 0x800000, "DISABLE_PERF": 0x8000000},
    "gfx1201": {"FP_ROUND": 0xF, "FP_DENORM": 0xF0, "FP16_OVFL": 0x800000, "SCALAR_PREFETCH_EN": 0x1000000,
                "DISABLE_PERF": 0x8000000},
}
MODE_WRITABLE = {arch: sum(masks.values()) for arch, masks in MODE_MASKS.items()}  # the fields do not overlap


@needs_mc
@pytest.mark.parametrize("arch", sorted(MODE_MASKS))
def test_setreg_all_ones_into_mode_sets_exactly_its_fields(arch):
    from test_wave import asm, wave
    w = wave(arch)
    w.run(asm("s_mov_b32 s9, 0xffffffff\ns_setreg_b32 hwreg(HW_REG_MODE), s9\ns_getreg_b32 s0, hwreg(HW_REG_MODE)\n"
              "s_setreg_imm32_b32 hwreg(HW_REG_MODE), 0\ns_getreg_b32 s1, hwreg(HW_REG_MODE)\n"
              "s_setreg_imm32_b32 hwreg(HW_REG_MODE), 0xffffffff\ns_getreg_b32 s2, hwreg(HW_REG_MODE)\n"
              "s_setreg_imm32_b32 hwreg(HW_REG_MODE, 20, 12), 0xfff\ns_getreg_b32 s3, hwreg(HW_REG_MODE, 16, 16)\n"
              "s_endpgm", arch))
    want = MODE_WRITABLE[arch]
    assert [int(w.sgpr[i]) for i in range(3)] == [want, 0, want]
    assert int(w.sgpr[3]) == want >> 16  # a field read past the reserved bits sees them 0


@needs_mc
@settings(max_examples=40, deadline=None)
@given(st.sampled_from(sorted(MODE_MASKS)), st.integers(0, 2**32 - 1), st.integers(0, 31), st.integers(1, 32),
       st.booleans())
def test_setreg_field_of_mode_changes_only_its_writable_bits(arch, value, offset, size, imm):
    """s_setreg_b32 / s_setreg_imm32_b32 hwreg(HW_REG_MODE, offset, size): the field's bits that are MODE fields
    take the value's low bits, every other bit keeps what it was; s_getreg of the same field reads them back."""
    from test_wave import asm, wave
    reg = f"hwreg(HW_REG_MODE, {offset}, {size})"
    write = f"s_setreg_imm32_b32 {reg}, {value:#x}" if imm else f"s_mov_b32 s9, {value:#x}\ns_setreg_b32 {reg}, s9"
    w = wave(arch)
    w.run(asm(f"s_getreg_b32 s2, hwreg(HW_REG_MODE)\n{write}\ns_getreg_b32 s0, hwreg(HW_REG_MODE)\n"
              f"s_getreg_b32 s1, {reg}\ns_endpgm", arch))
    before = int(w.sgpr[2])
    assert before & ~MODE_WRITABLE[arch] == 0
    mask = ((1 << size) - 1) << offset & 0xFFFFFFFF & MODE_WRITABLE[arch]
    after = before & ~mask | value << offset & mask
    assert int(w.sgpr[0]) == after
    assert int(w.sgpr[1]) == after >> offset & (1 << size) - 1


@needs_mc
@pytest.mark.parametrize("arch", sorted(MODE_MASKS))
def test_mode_written_whole_directs_the_float_arithmetic(arch):
    """A whole-register s_setreg whose value sets every bit but FP_ROUND (round to nearest even), FP_DENORM (flush
    f32 inputs and results) and [31:24] (gfx9: VSKIP, GPR_IDX_EN, CSP change the control flow) flushes a multiply of
    f32 denormals; a field write of FP_DENORM = 0xF then keeps them."""
    from test_wave import asm, wave
    w = wave(arch)
    tiny = np.finfo(np.float32).tiny
    x = (np.linspace(-3, 3, w.lanes) * tiny).astype(np.float32)  # denormals, and some normals
    w.vgpr[1] = x.view(np.uint32)
    w.run(asm("s_mov_b32 s9, 0xffff00\ns_setreg_b32 hwreg(HW_REG_MODE), s9\ns_getreg_b32 s0, hwreg(HW_REG_MODE)\n"
              "v_mul_f32 v2, v1, 1.0\ns_setreg_imm32_b32 hwreg(HW_REG_MODE, 4, 4), 0xf\nv_mul_f32 v3, v1, 1.0\n"
              "s_endpgm", arch))
    assert int(w.sgpr[0]) == 0xFFFF00 & MODE_WRITABLE[arch]
    flushed = np.where(np.abs(x) < tiny, np.copysign(np.float32(0), x), x)
    np.testing.assert_array_equal(w.vgpr[2].view(np.float32), flushed)
    np.testing.assert_array_equal(w.vgpr[3].view(np.float32), x)
