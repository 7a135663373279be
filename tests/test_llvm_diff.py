"""hwemu's disassembly against LLVM 19, the reference: the OpenCL kernel corpus (llvm-objdump-19), random
dwords and instructions drawn from emu.amd.strategies (llvm-mc-19 --disassemble -show-encoding).

The big run is `python -m tools.llvm_agreement --count 20000` (and `--corpus`); here a CI-sized sample."""
import shutil
from pathlib import Path

import pytest

from tools import llvm_agreement as la

ARCHES = ("gfx1100", "gfx1201", "gfx942")
pytestmark = pytest.mark.skipif(not la.available(), reason="llvm-mc-19/llvm-objdump-19 missing")
# agreement floors over the seeded samples below (the acceptance run over 20,000 per arch is in tools/)
RANDOM_FLOOR = {"gfx1100": 0.995, "gfx1201": 0.995, "gfx942": 0.99}
STRATEGY_FLOOR = {"gfx1100": 0.99, "gfx1201": 0.99, "gfx942": 0.99}


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


@pytest.mark.skipif(not Path(la.__file__).parent.parent.joinpath("emu/amd/strategies.py").exists(),
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
