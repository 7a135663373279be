"""v_pk_mov_b32 (gfx90a+): D.lo = S0's op_sel[0] half, D.hi = S1's op_sel[1] half, both halves written.

The vendor text writes `D0.u32[63 : 32]`; the destination was taken as 32 bits wide from the `.u32`, so the high
register was never written. LLVM 22 moves float pairs with it on gfx950 (tinygrad's Tensor.roll, its convolutions'
backward passes). Words from llvm-mc-19 -mcpu=gfx942 for `v_pk_mov_b32 v[4:5], v[0:1], v[2:3] op_sel:[a,b]`."""
import numpy as np
import pytest

from emu.amd import Wave

WORDS = {(0, 0): "0440b3d300050218", (1, 0): "0448b3d300050218", (0, 1): "0450b3d300050218",
         (1, 1): "0458b3d300050218"}


@pytest.mark.parametrize("tier", ["ref", "interp", "jit"])
@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
@pytest.mark.parametrize("sel", WORDS)
def test_pk_mov_b32_writes_both_halves(monkeypatch, tier, arch, sel):
    monkeypatch.setenv("HWEMU_TIER", tier)
    w = Wave(arch)
    rng = np.random.default_rng(sum(sel))
    w.vgpr[0:6] = rng.integers(0, 1 << 32, (6, 64), dtype=np.uint64).astype(np.uint32)
    src = w.vgpr[0:4].copy()
    w.run(bytes.fromhex(WORDS[sel] + "000081bf"))
    np.testing.assert_array_equal(w.vgpr[4], src[sel[0]])
    np.testing.assert_array_equal(w.vgpr[5], src[2 + sel[1]])
