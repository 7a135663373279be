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
