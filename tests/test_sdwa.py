"""gfx9 SDWA on 16-bit operations (clang emits them for byte and short arithmetic, e.g. tinygrad's int8 adds):
a source byte or word anywhere in the dword is selected before the op (and before abs/neg), an SGPR source
is allowed, and dst_sel writes the result into its byte or word of the whole destination dword. Words
assembled by llvm-mc-19; expectations from the manual's definition of the selects, in numpy."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(not shutil.which("llvm-mc-19"), reason="needs llvm-mc-19")


def assemble(text: str, tmp_path) -> bytes:
    src, obj, out = tmp_path / "s.s", tmp_path / "s.o", tmp_path / "s.bin"
    src.write_text(text + "\ns_endpgm\n")
    subprocess.run(["llvm-mc-19", "-triple=amdgcn-amd-amdhsa", "-mcpu=gfx942", "-filetype=obj", str(src), "-o",
                    str(obj)], check=True)
    subprocess.run(["llvm-objcopy-19", "-O", "binary", "--only-section=.text", str(obj), str(out)], check=True)
    return out.read_bytes()


def f16(bits: int) -> np.float16:
    return np.array([bits], np.uint16).view(np.float16)[0]


def test_sdwa_16bit_selects(tmp_path):
    from emu.amd import Wave
    code = assemble("""
        v_add_u16_sdwa v5, v1, s7 dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:WORD_1 src1_sel:DWORD
        v_add_u16_sdwa v6, v1, s8 dst_sel:WORD_1 dst_unused:UNUSED_PAD src0_sel:DWORD src1_sel:DWORD
        v_add_u16_sdwa v7, v1, v2 dst_sel:BYTE_2 dst_unused:UNUSED_PRESERVE src0_sel:BYTE_1 src1_sel:BYTE_3
        v_add_f16_sdwa v8, -v3, v3 dst_sel:WORD_1 dst_unused:UNUSED_PAD src0_sel:WORD_0 src1_sel:WORD_1
        v_mul_lo_u16_sdwa v9, sext(v1), v2 dst_sel:WORD_0 dst_unused:UNUSED_SEXT src0_sel:BYTE_3 src1_sel:BYTE_0
    """, tmp_path)
    w = Wave("gfx942")
    a, b, h = 0x44332211, 0xF0E0D0C0, 0x4200_3C00  # h: f16 3.0 (hi word), f16 1.0 (lo word)
    w.vgpr[1][:], w.vgpr[2][:], w.vgpr[3][:], w.vgpr[7][:] = a, b, h, 0x99999999
    w.sgpr[7], w.sgpr[8] = 0x64, 0x6400
    w.run(code)
    assert int(w.vgpr[5][0]) == (0x4433 + 0x64) & 0xFFFF
    assert int(w.vgpr[6][0]) == ((0x2211 + 0x6400) & 0xFFFF) << 16
    assert int(w.vgpr[7][0]) == (0x99999999 & ~0x00FF0000) | ((0x22 + 0xF0) & 0xFF) << 16
    want = np.array([np.float16(-f16(h & 0xFFFF)) + f16(h >> 16)], np.float16).view(np.uint16)[0]
    assert int(w.vgpr[8][0]) == int(want) << 16  # neg applies to the selected word: -1.0 + 3.0
    prod = (0x44 * 0xC0) & 0xFFFF  # the low 16 bits of the product, sign-extended into the dword
    assert int(w.vgpr[9][0]) == (prod | 0xFFFF0000 if prod & 0x8000 else prod)
