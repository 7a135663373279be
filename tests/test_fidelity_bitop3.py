"""gfx950's v_bitop3_b32 / v_bitop3_b16: D = the 8-entry truth table BITOP3 over the bits of (S0, S1, S2).

LLVM 22 (the first that knows gfx950) emits v_bitop3_b32 for index arithmetic of tinygrad's kernels; the vendor
text wrote its result to `D` and so wrote nothing (tinygrad's gfx950 test_ops then loaded from garbage addresses).
The table's bits sit in NEG [2:0], ABS [5:3] and OMOD [7:6] of the VOP3 word, as llvm-mc-22 encodes them:
  v_bitop3_b32 v1, v2, v3, v4 bitop3:0x48 -> 01 01 34 d2 02 07 12 0c
  v_bitop3_b16 v1, v2, v3, v4 bitop3:0xe8 -> 01 05 33 d2 02 07 12 1c
  v_bitop3_b16 v1, v2, v3, v4 bitop3:0x48 op_sel:[0,1,0,1] -> 01 51 33 d2 02 07 12 0c
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from emu.amd import Wave
from emu.amd.decode import decode

ENDPGM = bytes.fromhex("000081bf")


def _word(opcode: int, table: int, opsel: int = 0) -> bytes:
    """v_bitop3 v1, v2, v3, v4 with truth table `table` (the layout llvm-mc-22 gives, above)."""
    lo = 1 | (table >> 3 & 7) << 8 | opsel << 11 | opcode << 16 | 0x34 << 26
    hi = (256 + 2) | (256 + 3) << 9 | (256 + 4) << 18 | (table >> 6) << 27 | (table & 7) << 29
    return (lo | hi << 32).to_bytes(8, "little")


def _table(t: int, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    out = np.zeros_like(a)
    for i in range(8):
        if t >> i & 1:
            out |= (a if i & 4 else ~a) & (b if i & 2 else ~b) & (c if i & 1 else ~c)
    return out


def test_the_words_are_llvms():
    assert _word(564, 0x48).hex() == "010134d20207120c"
    assert _word(563, 0xE8).hex() == "010533d20207121c"
    assert _word(563, 0x48, 0b1010).hex() == "015133d20207120c"
    assert str(decode(_word(564, 0x48), "gfx950")[0]) == "v_bitop3_b32 v1, v2, v3, v4 bitop3:0x48"
    assert str(decode(_word(564, 10), "gfx950")[0]) == "v_bitop3_b32 v1, v2, v3, v4 bitop3:10"
    assert str(decode(_word(564, 0), "gfx950")[0]) == "v_bitop3_b32 v1, v2, v3, v4"
    text = "v_bitop3_b16 v1, v2, v3, v4 bitop3:0x48 op_sel:[0,1,0,1]"
    assert str(decode(_word(563, 0x48, 0b1010), "gfx950")[0]) == text


@pytest.mark.parametrize("tier", ["ref", "interp", "jit"])
@pytest.mark.parametrize("opcode, mask", [(564, 0xFFFFFFFF), (563, 0xFFFF)], ids=["b32", "b16"])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table=st.integers(0, 255), seed=st.integers(0, 1 << 30))
def test_bitop3_is_its_truth_table(monkeypatch, tier, opcode, mask, table, seed):
    """b32 over whole registers, b16 over their low halves."""
    monkeypatch.setenv("HWEMU_TIER", tier)
    rng = np.random.default_rng(seed)
    w = Wave("gfx950")
    w.vgpr[1:5] = rng.integers(0, 1 << 32, (4, 64), dtype=np.uint64).astype(np.uint32)
    srcs = [w.vgpr[r] & mask for r in (2, 3, 4)]
    w.run(_word(opcode, table) + ENDPGM)
    np.testing.assert_array_equal(w.vgpr[1] & mask, _table(table, *srcs) & mask)
