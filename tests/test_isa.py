"""The vendor ISA tables as emu.amd.isa presents them."""
import os
import shutil
import subprocess
import sys

import pytest

from emu.amd import isa

LLVM_MC = shutil.which("llvm-mc-19")


@pytest.mark.parametrize("arch", [*isa.ARCHES, *isa.FAMILIES])
def test_every_arch_name_loads(arch):
    t = isa.load(arch)
    assert t.family == isa.family(arch)
    assert len(t.ops) > 1400 and sum(o.pcode is not None for o in t.ops.values()) > 1300


def test_unknown_arch_is_a_clear_error():
    with pytest.raises(isa.UnknownArch, match="gfx9999"):
        isa.load("gfx9999")


@pytest.mark.parametrize("fam", isa.FAMILIES)
def test_encodings_are_consistent(fam):
    t = isa.load(fam)
    for enc in t.encodings.values():
        assert enc.size in (4, 8, 12, 16), enc.name
        assert enc.fixed, f"{enc.name} has no fixed bits to recognise it by"
        bits = sorted((f.lo, f.hi) for f in enc.fields)
        for (_, prev_hi), (lo, _) in zip(bits, bits[1:], strict=False):
            assert lo > prev_hi, f"{enc.name}: overlapping fields"
        assert max(f.hi for f in enc.fields) < enc.size * 8
        if enc.ops is not None:
            assert all((enc.space, v) in t.ops for v in enc.ops)


def test_import_emu_does_not_import_tinygrad():
    isa.load("rdna3")  # cache exists from here on
    code = "import emu, emu.amd.isa as i, sys; i.load('gfx1100'); assert 'tinygrad' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ})


@pytest.mark.skipif(not LLVM_MC, reason="llvm-mc-19 not installed")
@pytest.mark.parametrize("arch,asm,enc,name", [
    ("gfx1100", "v_add_f32_e32 v0, v1, v2", "VOP2", "V_ADD_F32"),
    ("gfx1100", "s_add_u32 s0, s1, s2", "SOP2", "S_ADD_U32"),
    ("gfx1100", "v_fma_f32 v0, v1, v2, v3", "VOP3", "V_FMA_F32"),
    ("gfx1100", "global_load_b32 v0, v[2:3], off", "GLOBAL", "GLOBAL_LOAD_B32"),
    ("gfx1201", "v_mul_f32_e32 v0, v1, v2", "VOP2", "V_MUL_F32"),
    ("gfx1201", "s_mul_i32 s0, s1, s2", "SOP2", "S_MUL_I32"),
    ("gfx942", "v_add_f32_e32 v0, v1, v2", "VOP2", "V_ADD_F32"),
    ("gfx942", "s_add_u32 s0, s1, s2", "SOP2", "S_ADD_U32"),
    ("gfx942", "ds_write_b32 v0, v1", "DS", "DS_WRITE_B32"),
])
def test_opcodes_and_fixed_bits_agree_with_llvm(arch, asm, enc, name):
    out = subprocess.run([LLVM_MC, "-triple=amdgcn-amd-amdhsa", f"-mcpu={arch}", "-show-encoding"],
                         input=asm, capture_output=True, text=True, check=True).stdout
    hexbytes = out.split("encoding: [")[1].split("]")[0]
    word = int.from_bytes(bytes(int(b, 16) for b in hexbytes.split(",")), "little")
    t = isa.load(arch)
    e = t.encodings[enc]
    assert all(f.get(word) == f.value for f in e.fixed)
    assert t.op(e.space, e.field("op").get(word)).name == name


def test_unwritable_cache_still_loads(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("HWEMU_CACHE", str(blocker / "cache"))
    isa.load.cache_clear()
    try:
        assert isa.load("rdna4").family == "rdna4"
    finally:
        isa.load.cache_clear()
