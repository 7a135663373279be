"""Loader and launch (issue 13, items 1 and 4): hand-assembled code objects (llvm-mc-19 + ld.lld-19) with a
minimal metadata block (no .args, no amdhsa.target) load by their ELF e_flags and run with raw kernel
arguments; a gfx950 code object (assembled as gfx942, EF_AMDGPU_MACH patched to 0x4f as AMDGPUUsage numbers it)
reads its kernarg pointer."""
from __future__ import annotations

import re
import shutil
import struct
import subprocess

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(not (shutil.which("llvm-mc-19") and shutil.which("ld.lld-19")),
                                reason="llvm-mc-19 and ld.lld-19 are needed to build code objects")

CODE = {  # out[lane] = 42 + lane, through the pointer in the kernarg segment
    "gfx1100": """s_load_b64 s[2:3], s[0:1], 0
  v_add_nc_u32 v1, 42, v0
  v_lshlrev_b32 v2, 2, v0
  s_waitcnt lgkmcnt(0)
  global_store_b32 v2, v1, s[2:3]""",
    "gfx942": """s_load_dwordx2 s[2:3], s[0:1], 0x0
  v_add_u32 v1, 42, v0
  v_lshlrev_b32 v2, 2, v0
  s_waitcnt lgkmcnt(0)
  global_store_dword v2, v1, s[2:3]""",
}
DESCRIPTOR = {"gfx1100": ".amdhsa_wavefront_size32 1", "gfx942": ".amdhsa_accum_offset 4"}


def hand_assembled(arch: str, tmp_path, code: str | None = None, kernarg_bytes: int = 8) -> bytes:
    wave = 32 if arch == "gfx1100" else 64
    src = f"""
.text
.globl k
.p2align 8
.type k,@function
k:
  {code or CODE[arch]}
  s_endpgm
.rodata
.p2align 6
.amdhsa_kernel k
  .amdhsa_user_sgpr_kernarg_segment_ptr 1
  .amdhsa_next_free_vgpr 8
  .amdhsa_next_free_sgpr 8
  {DESCRIPTOR[arch]}
.end_amdhsa_kernel
.amdgpu_metadata
---
amdhsa.version: [1, 2]
amdhsa.kernels:
  - .name: k
    .symbol: k.kd
    .kernarg_segment_size: {kernarg_bytes}
    .kernarg_segment_align: 8
    .group_segment_fixed_size: 0
    .private_segment_fixed_size: 0
    .wavefront_size: {wave}
    .sgpr_count: 8
    .vgpr_count: 8
    .max_flat_workgroup_size: 256
...
.end_amdgpu_metadata
"""
    (tmp_path / "k.s").write_text(src)
    subprocess.run(["llvm-mc-19", "-triple=amdgcn-amd-amdhsa", f"-mcpu={arch}", "-filetype=obj",
                    str(tmp_path / "k.s"), "-o", str(tmp_path / "k.o")], check=True, capture_output=True)
    subprocess.run(["ld.lld-19", "-shared", str(tmp_path / "k.o"), "-o", str(tmp_path / "k.hsaco")], check=True,
                   capture_output=True)
    return (tmp_path / "k.hsaco").read_bytes()


@pytest.mark.parametrize("arch,run_as", [("gfx1100", "gfx1100"), ("gfx942", "gfx942"), ("gfx942", "gfx950")])
def test_hand_assembled_kernel_with_raw_kernargs(arch, run_as, tmp_path):
    from emu.amd import GPU
    from objfile.codeobj import CodeObject
    data = hand_assembled(arch, tmp_path)
    if run_as == "gfx950":
        flags = int.from_bytes(data[48:52], "little")
        data = data[:48] + (flags & ~0xFF | 0x4F).to_bytes(4, "little") + data[52:]
    co = CodeObject.parse(data)
    assert co.arch == run_as and "amdhsa.target" not in co.metadata
    gpu = GPU(run_as)
    out = gpu.alloc(256)
    gpu.launch(gpu.load(data), "k", grid=(1,), block=(64,), kernargs=struct.pack("<Q", out.addr))
    np.testing.assert_array_equal(np.frombuffer(gpu.read(out), np.uint32)[:64], 42 + np.arange(64))


ECHO_KERNARGS = """s_load_b64 s[2:3], s[0:1], 0
  s_load_b128 s[4:7], s[0:1], 8
  v_mov_b32 v5, 0
  s_waitcnt lgkmcnt(0)
  v_mov_b32 v0, s2
  v_mov_b32 v1, s3
  v_mov_b32 v2, s4
  v_mov_b32 v3, s5
  global_store_b128 v5, v[0:3], s[2:3]
  v_mov_b32 v0, s6
  v_mov_b32 v1, s7
  global_store_b64 v5, v[0:1], s[2:3] offset:16"""  # the 24 kernarg bytes, pointer first, to that pointer


def test_cli_kernargs_file(tmp_path, capsys):
    """python -m emu.amd.run --kernargs FILE: the file's bytes are the explicit kernarg segment. The kernel stores
    its 24 kernarg bytes to the pointer they start with (the --arg buffer whose address the CLI prints), so the
    buffer written to --out holds exactly the file's bytes."""
    from emu.amd.run import main
    (tmp_path / "k.hsaco").write_bytes(hand_assembled("gfx1100", tmp_path, ECHO_KERNARGS, 24))
    args = [str(tmp_path / "k.hsaco"), "--kernel", "k", "--block", "32", "--out", str(tmp_path),
            "--arg", "buf:out:u8:24", "--kernargs", str(tmp_path / "ka.bin")]
    (tmp_path / "ka.bin").write_bytes(bytes(24))  # a null pointer: the kernel faults, after the address is printed
    assert main(args) == 1
    addr = int(re.search(r"arg 0: buffer at (0x[0-9a-f]+)", capsys.readouterr().out).group(1), 16)
    payload = struct.pack("<Q", addr) + bytes(range(0xA0, 0xB0))
    (tmp_path / "ka.bin").write_bytes(payload)
    assert main(args) == 0
    assert np.load(tmp_path / "arg0.npy").tobytes() == payload
    assert main(args[:-2] + ["--kernargs", str(tmp_path / "missing.bin")]) == 2
    assert main(args + ["--arg", "u32:1"]) == 2  # scalars go in the raw bytes


def test_raw_kernargs_must_match_declared_arguments():
    from stack.codegen import opencl
    if not opencl.available():
        pytest.skip("clang-19 and ld.lld-19 are needed to build kernels")
    from emu.amd import GPU
    gpu = GPU("gfx1100")
    prog = gpu.load(opencl.compile_cl("kernel void k(global int *p, int n) { p[0] = n; }", "gfx1100"))
    out = gpu.alloc(4)
    with pytest.raises(ValueError, match="raw kernargs are 8 bytes"):
        gpu.launch(prog, "k", kernargs=struct.pack("<Q", out.addr))  # n is missing
    with pytest.raises(ValueError, match="not both"):
        gpu.launch(prog, "k", args=[out, np.int32(1)], kernargs=struct.pack("<Qi", out.addr, 1))
    gpu.launch(prog, "k", kernargs=struct.pack("<Qi", out.addr, 7))
    assert np.frombuffer(gpu.read(out), np.int32)[0] == 7
