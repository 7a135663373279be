"""The allocation and instruction-buffer hardware registers (issue 13): s_getreg of HW_REG_LDS_ALLOC, GPR_ALLOC,
IB_STS and (RDNA3) IB_STS2 returns what the wave holds, in the layout the Linux amdkfd CWSR trap handlers read to
save a wave (cwsr_trap_handler_gfx9/gfx10/gfx12.asm): LDS_ALLOC.LDS_SIZE [20:12] in 256-byte units (gfx12: 512)
of the whole 512-byte COMPUTE_PGM_RSRC2.LDS_SIZE granules the workgroup was given; GPR_ALLOC.VGPR_SIZE at [13:8]
(gfx9), [15:8] (gfx10/11), [19:12] (gfx12) such that (VGPR_SIZE + 1) * 4 VGPRs are saved (CDNA: as many ACC VGPRs
again), gfx9's SGPR_SIZE [27:24] such that (SGPR_SIZE + 1) * 16 SGPRs are; IB_STS2.WAVE64 (bit 11). Expectations
come from those formulas and the compiler's metadata (.vgpr_count / .sgpr_count / .group_segment_fixed_size in the
code object's notes), not from hwemu."""
from __future__ import annotations

import numpy as np
import pytest

from stack.codegen import opencl
from stack.hcq.codeobj import CodeObject

pytestmark = pytest.mark.skipif(not opencl.available(), reason="clang-19 and ld.lld-19 are needed to build kernels")
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
    shift = {"rdna3": 8, "cdna": 8, "rdna4": 12}[fam]
    width = 6 if fam == "cdna" else 8
    vgprs = ((v >> shift & (1 << width) - 1) + 1) * (8 if fam == "cdna" else 4)  # CDNA: VGPRs and ACC VGPRs
    used = meta[".vgpr_count"] + (meta.get(".agpr_count", 0) if fam == "cdna" else 0)
    assert used <= vgprs < used + 8
    if fam == "cdna":
        sgprs = ((v >> 24 & 0xF) + 1) * 16
        assert meta[".sgpr_count"] <= sgprs < meta[".sgpr_count"] + 16 + 8


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
