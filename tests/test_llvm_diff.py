"""hwemu's disassembly against LLVM 19, the reference: the OpenCL kernel corpus (llvm-objdump-19), random
dwords and instructions drawn from emu.amd.strategies (llvm-mc-19 --disassemble -show-encoding).

The big run is `python -m tools.llvm_agreement --count 20000` (and `--corpus`); here a CI-sized sample."""
import shutil
from pathlib import Path

import pytest

from tools import llvm_agreement as la

ARCHES = la.ARCHES
pytestmark = pytest.mark.skipif(not la.available(), reason="llvm-mc-19/llvm-objdump-19 missing")
# agreement floors over the seeded samples below (the acceptance run over 20,000 per arch is in tools/)
RANDOM_FLOOR = {"gfx1100": 0.995, "gfx1201": 0.995, "gfx942": 0.99, "gfx90a": 0.995}
STRATEGY_FLOOR = {"gfx1100": 0.99, "gfx1201": 0.99, "gfx942": 0.99, "gfx90a": 0.99}


def _show(diffs, n=8) -> str:
    return "\n".join(f"{d[0].hex() if isinstance(d[0], bytes) else d[:4]}\n  llvm:  {d[-2]}\n  hwemu: {d[-1]}"
                     for d in diffs[:n])


@pytest.mark.skipif(not (shutil.which("clang-19") and shutil.which("ld.lld-19")), reason="clang-19/ld.lld-19 missing")
@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("opt", ["-O0", "-O3"])
def test_kernel_corpus_identical(arch, opt, tmp_path):
    """Every instruction llvm-objdump-19 prints for the corpus (all kernels in one code object) prints the same."""
    sources = sorted(la.CORPUS.glob("*.cl"))
    assert len(sources) >= 6
    merged = tmp_path / "corpus.cl"
    merged.write_text("\n".join(p.read_text() for p in sources))
    total, diffs = la.corpus_diffs((arch,), (opt,), [merged])
    assert total > 500
    assert not diffs, f"{len(diffs)} of {total} differ:\n" + "\n".join(map(str, diffs[:8]))


@pytest.mark.parametrize("arch", ARCHES)
def test_random_dwords(arch):
    n, diffs = la.random_agreement(arch, 3000, seed=7)
    assert n == 3000
    rate = 1 - len(diffs) / n
    assert rate >= RANDOM_FLOOR[arch], f"{arch}: {rate:.4f}\n{_show(diffs)}"


@pytest.mark.skipif(not Path(la.__file__).parent.parent.joinpath("emu/amd/strategies/__init__.py").exists(),
                    reason="emu.amd.strategies not present")
@pytest.mark.parametrize("arch", ARCHES)
def test_strategy_instructions(arch):
    n, diffs = la.strategy_agreement(arch, 8)
    assert n > 200
    rate = 1 - len(diffs) / n
    assert rate >= STRATEGY_FLOOR[arch], f"{arch}: {rate:.4f}\n{_show(diffs)}"


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201"])
def test_every_s_version_immediate(arch):
    """s_version's 65,536 immediates: the target's UC_VERSION name, the flags OR-ed on, hex with reserved bits."""
    code = b"".join(v.to_bytes(2, "little") + b"\x80\xb0" for v in range(1 << 16))
    pairs = la.llvm_mc_disassemble(code, arch)
    assert len(pairs) == 1 << 16
    diffs = la.compare(pairs, arch)
    assert not diffs, _show(diffs)


@pytest.mark.parametrize("arch", ARCHES)
def test_every_waitcnt_immediate(arch):
    """s_waitcnt's 65,536 immediates (SOPP opcode 12 on gfx9, 9 on gfx11 and gfx12): the counters of each layout."""
    op = 0x8C if arch.startswith("gfx9") else 0x89
    code = b"".join(v.to_bytes(2, "little") + bytes((op, 0xBF)) for v in range(1 << 16))
    pairs = la.llvm_mc_disassemble(code, arch)
    assert len(pairs) == 1 << 16 and pairs[0][1].startswith("s_waitcnt")
    diffs = la.compare(pairs, arch)
    assert not diffs, _show(diffs)


def test_salu_f16_literals_gfx1201():
    """A literal of an f16 operand of SOP2 / SOPC prints its low half; SOP1's f16 and the b16 operands all 32 bits."""
    from emu.amd import isa
    code = b""
    for (space, name), e in isa.load("rdna4").by_name.items():
        if space in ("SOP1", "SOP2", "SOPC") and name[-3:] in ("F16", "B16", "I16"):
            word = {"SOP1": 0xBE81_00FF | e.value << 8, "SOP2": 0x8081_02FF | e.value << 23,
                    "SOPC": 0xBF00_02FF | e.value << 16}[space]
            code += word.to_bytes(4, "little") + (0x12345678).to_bytes(4, "little")
    pairs = la.llvm_mc_disassemble(code, "gfx1201")
    assert len(pairs) > 30 and any("0x5678," in t for _, t in pairs)
    diffs = la.compare(pairs, "gfx1201")
    assert not diffs, _show(diffs)


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201"])
def test_vop1_vgpr_only_sources_and_whole_vgpr_fp8(arch):
    """v_swap_b32 / v_swaprel_b32 / v_movrelsd(_2)_b32 with every source code (an SGPR, ttmp or src_lds_direct is
    an invalid VGPR_32 register, not an immediate), and every VOP1 opcode with src0 = v200 (16-bit operands reach
    v0..v127 only, except v_cvt_pk_f32_fp8 / bf8, whose two bytes LLVM reads from any VGPR)."""
    from emu.amd import isa
    words = [w | s for w in (0x7F46CA00, 0x7E668800, 0x7EA2D000, 0x7FF69000) for s in range(256)]
    words += [0x7E14_01C8 | e.value << 9 for (space, _), e in isa.load(isa.family(arch)).by_name.items()
              if space == "VOP1"]
    pairs = la.llvm_mc_disassemble(b"".join(w.to_bytes(4, "little") for w in words), arch)
    assert len(pairs) > 900
    diffs = la.compare(pairs, arch)
    assert not diffs, _show(diffs)


@pytest.mark.parametrize("arch, text", [
    ("gfx1201", "global_atomic_cmpswap_b64 v[18:19], v1, v[4:7], s[0:1] th:TH_ATOMIC_RETURN\n"
                "flat_atomic_cmpswap_b64 v[2:3], v[0:1], v[4:7] th:TH_ATOMIC_RETURN\n"
                "global_atomic_cmpswap_b32 v2, v1, v[4:5], s[0:1] th:TH_ATOMIC_RETURN"),
    ("gfx1100", "global_atomic_cmpswap_b64 v[2:3], v1, v[4:7], s[0:1] glc\nflat_atomic_cmpswap_b64 v[2:3], v[0:1], "
                "v[4:7] glc\nglobal_atomic_cmpswap_b32 v2, v1, v[4:5], s[0:1] glc"),
    ("gfx942", "global_atomic_cmpswap_x2 v[2:3], v1, v[4:7], s[0:1] sc0\nflat_atomic_cmpswap_x2 v[2:3], v[0:1], v[4:7] "
               "sc0\nglobal_atomic_cmpswap v2, v1, v[4:5], s[0:1] sc0")])
def test_compare_swap_returns_one_value(arch, text):
    """A returning compare-swap's destination is one value (a pair for _b64 / _x2) wherever the vendor table types
    it, where the RDNA3 GLOBAL table gives it the data pair's width."""
    import re
    import subprocess
    out = subprocess.run([la.LLVM_MC, "-triple=amdgcn-amd-amdhsa", f"-mcpu={arch}", "-show-encoding"], input=text,
                         capture_output=True, text=True, check=True).stdout
    code = b"".join(bytes(int(b, 16) for b in m.split(",")) for m in re.findall(r"encoding: \[([^\]]+)\]", out))
    pairs = la.llvm_mc_disassemble(code, arch)
    assert len(pairs) == 3
    diffs = la.compare(pairs, arch)
    assert not diffs, _show(diffs)


@pytest.mark.parametrize("field, lo", [("rsrc", 41), ("samp", 55)])
def test_image_resource_in_the_vgpr_range_gfx1201(field, lo):
    """A VSAMPLE resource (8 registers) or sampler (4) given VGPR codes 256..511: an invalid register class while the
    tuple ends by v255, past it a small negative immediate (image_sample v[0:3], [v0, v1], s[0:7], s[0:3])."""
    base = int.from_bytes(bytes.fromhex("01c0c6e7" "00000000" "00010000"), "little")
    code = b"".join((base & ~(511 << lo) | v << lo).to_bytes(12, "little") for v in range(256, 512))
    pairs = la.llvm_mc_disassemble(code, "gfx1201")
    assert len(pairs) > 240  # llvm-mc-19 rejects a few of the words
    diffs = la.compare(pairs, "gfx1201")
    assert not diffs, _show(diffs)


def _variants(arch: str, text: str, lo: int, width: int) -> list[tuple[bytes, str]]:
    """llvm-mc-19's text of every value of the bits [lo, lo + width) of the second dword of `text`'s encoding."""
    import re
    import subprocess
    out = subprocess.run([la.LLVM_MC, "-triple=amdgcn-amd-amdhsa", f"-mcpu={arch}", "-show-encoding"], input=text,
                         capture_output=True, text=True, check=True).stdout
    base = bytes(int(b, 16) for b in re.findall(r"encoding: \[([^\]]+)\]", out)[0].split(","))
    word = int.from_bytes(base[4:8], "little") & ~(((1 << width) - 1) << lo)
    return la.llvm_mc_disassemble(b"".join(base[:4] + (word | v << lo).to_bytes(4, "little") + base[8:]
                                           for v in range(1 << width)), arch)


@pytest.mark.parametrize("arch", ARCHES)
def test_every_dpp16_control(arch):
    """All 512 DPP16 controls: the names of each family (gfx90a+'s row_newbcast for row_share's codes), and LLVM's
    comments for the reserved ones and for GFX9 controls on GFX10+ (row_xmask before GFX10)."""
    pairs = _variants(arch, "v_add_f32_dpp v1, v2, v3 quad_perm:[0,1,2,3] row_mask:0xf bank_mask:0xf", 8, 9)
    assert len(pairs) == 512
    diffs = la.compare(pairs, arch)
    assert not diffs, _show(diffs)


@pytest.mark.parametrize("arch", ARCHES)
def test_cndmask_dpp_source_modifiers(arch):
    """v_cndmask_b32's DPP16 form takes neg / abs of both sources (its sources are untyped bits; the engine applies
    them); LLVM 19 closes a gfx12 src1 abs after the VCC operand."""
    vcc = "vcc" if arch.startswith("gfx9") else "vcc_lo"
    pairs = _variants(arch, f"v_cndmask_b32_dpp v1, v2, v3, {vcc} quad_perm:[0,1,2,3] row_mask:0xf bank_mask:0xf",
                      20, 4)
    assert len(pairs) == 16
    diffs = la.compare(pairs, arch)
    assert not diffs, _show(diffs)
