"""SMEM loads into VCC (s_load_b32 vcc_lo / s_load_b64 vcc): LLVM emits them (e.g. tinygrad's reductions), and
the loaded dwords must reach VCC, which the engine keeps beside the SGPR file. Words assembled by llvm-mc-19."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest


@pytest.mark.skipif(not shutil.which("llvm-mc-19"), reason="needs llvm-mc-19")
@pytest.mark.parametrize("arch,b32,b64", [("gfx1100", "s_load_b32", "s_load_b64"),
                                          ("gfx942", "s_load_dword", "s_load_dwordx2")])
def test_smem_load_into_vcc(arch, b32, b64, tmp_path):
    from emu.amd import Wave
    src, obj, out = tmp_path / "v.s", tmp_path / "v.o", tmp_path / "v.bin"
    src.write_text(f"{b32} vcc_lo, s[0:1], 0x10\n{b64} vcc, s[0:1], 0x0\ns_endpgm\n")
    subprocess.run(["llvm-mc-19", "-triple=amdgcn-amd-amdhsa", f"-mcpu={arch}", "-filetype=obj", str(src), "-o",
                    str(obj)], check=True)
    subprocess.run(["llvm-objcopy-19", "-O", "binary", "--only-section=.text", str(obj), str(out)], check=True)
    code = out.read_bytes()
    w = Wave(arch, 64)
    buf = w.vm.alloc(4096)
    w.vm.write(buf, np.arange(100, 116, dtype=np.uint32))
    w.sgpr[0], w.sgpr[1] = buf & 0xFFFFFFFF, buf >> 32
    w.vcc = 0xAAAA_AAAA_0000_0000
    w.run(code[:8] + code[-4:])  # the b32 load, then s_endpgm
    assert w.vcc == 0xAAAA_AAAA_0000_0000 | 104  # dword 4 into VCC_LO, VCC_HI untouched
    w.run(code[8:])
    assert w.vcc == 101 << 32 | 100
