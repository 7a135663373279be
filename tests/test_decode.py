"""emu.amd.decode / emu.amd.asm.disasm: the Inst API, robustness on arbitrary bytes, the CLI.

Expected texts are llvm-mc-19's output for the same bytes (`llvm-mc-19 --disassemble -mcpu=ARCH`); the
differential tests against LLVM itself are in test_llvm_diff.py."""
import io
import shutil
import sys
from contextlib import redirect_stderr, redirect_stdout

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emu.amd import Inst, decode, isa
from emu.amd.asm.disasm import main as disasm_main
from emu.amd.decode import Decoder, decoder

# (arch, hex bytes, llvm-mc-19 text)
LLVM_TEXTS = [
    ("gfx1100", "01050006", "v_add_f32_e32 v0, v1, v2"),
    ("gfx1100", "ff0080be78563412", "s_mov_b32 s0, 0x12345678"),
    ("gfx1100", "000012d581e10100", "v_max_i32_e64 v0, v129, 0.5"),
    ("gfx1100", "000052dc02007c05", "global_load_b32 v5, v[2:3], off"),
    ("gfx1100", "070089bf", "s_waitcnt vmcnt(0) lgkmcnt(0)"),
    ("gfx1100", "0000b0bf", "s_endpgm"),
    ("gfx1100", "010110ca80000001", "v_dual_mov_b32 v1, v1 :: v_dual_mov_b32 v0, 0"),
    ("gfx942", "0080c4d301050204", "v_mfma_f32_32x32x2_f32 a[0:15], v1, v2, a[0:15]"),
    ("gfx942", "00007f01", "v_cndmask_b32_e32 v191, s0, v128, vcc"),
    ("gfx1201", "010000f4040000f8", "s_load_b32 s0, s[2:3], 0x4"),
    ("gfx1201", "7c0005ee0100000002000000", "global_load_b32 v1, v[2:3], off"),
]


@pytest.mark.parametrize("arch,code,text", LLVM_TEXTS)
def test_text_as_llvm_prints_it(arch, code, text):
    (inst,) = decode(bytes.fromhex(code), arch)
    assert str(inst) == text
    assert inst.size == len(code) // 2 and inst.raw == bytes.fromhex(code)


def test_inst_api():
    a, b = decode(bytes.fromhex("000012d581e10100" "ff0080be78563412"), "gfx1100", pc=0x100)
    assert (a.pc, a.size, a.enc, a.base, a.op.name, a.name) == (0x100, 8, "VOP3", "VOP3", "V_MAX_I32", "v_max_i32_e64")
    assert a.operands["vdst"].kind == "vgpr" and a.operands["vdst"].index == 0
    assert (a.operands["src0"].kind, a.operands["src0"].index) == ("vgpr", 129)
    src1 = a.operands["src1"]
    assert (src1.kind, src1.value) == ("inline", 0x3F000000)  # 0.5 as the 32 bits the operand reads
    assert (b.pc, b.size, b.enc, b.literal) == (0x108, 8, "SOP1_LIT", 0x12345678)
    assert (b.operands["ssrc0"].kind, b.operands["ssrc0"].value) == ("literal", 0x12345678)
    assert b.fields["sdst"] == 0 and b.fields["op"] == b.op.value


def test_register_tuples_and_specials():
    (load,) = decode(bytes.fromhex("000052dc02007c05"), "gfx1100")
    assert (load.operands["addr"].kind, load.operands["addr"].index, load.operands["addr"].count) == ("vgpr", 2, 2)
    assert load.operands["saddr"].kind == "special" and load.operands["saddr"].name == "null"
    (mfma,) = decode(bytes.fromhex("0080c4d301050204"), "gfx942")
    assert (mfma.operands["vdst"].kind, mfma.operands["vdst"].count) == ("agpr", 16)


def test_invalid_and_truncated():
    # a literal-carrying SOP1 cut before its literal, then a lone trailing byte
    insts = decode(bytes.fromhex("ff0080be" "12"), "gfx1100")
    assert [(i.enc, i.size, i.op) for i in insts] == [("INVALID", 4, None), ("INVALID", 1, None)]
    assert all(str(i) == "<unknown>" and not i.valid for i in insts)
    # an opcode the SOPP table does not hold
    (bad,) = decode((0xBF800000 | 0x7F << 16).to_bytes(4, "little"), "gfx1100")
    assert bad.op is None and str(bad) == "<unknown>"


def test_family_names_and_unknown_arch():
    assert str(decode(bytes.fromhex("01050006"), "rdna3")[0]) == "v_add_f32_e32 v0, v1, v2"
    with pytest.raises(isa.UnknownArch):
        decode(b"\0\0\0\0", "gfx9999")


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201", "gfx942"])
@settings(max_examples=150, deadline=None)
@given(code=st.binary(max_size=64), pc=st.integers(0, 1 << 40))
def test_decode_never_raises(arch, code, pc):
    insts = decode(code, arch, pc)
    assert b"".join(i.raw for i in insts) == code
    assert [i.pc for i in insts] == [pc + sum(j.size for j in insts[:k]) for k in range(len(insts))]
    for i in insts:
        assert isinstance(i, Inst) and isinstance(str(i), str)
        assert (i.op is None) == (i.enc == "INVALID")


def _facts(i: Inst) -> tuple:
    return (i.pc, i.size, i.raw, i.enc, i.base, i.op, i.name, i.fields, i.operands, i.family, i.literal, str(i))


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201", "gfx942"])
@settings(max_examples=150, deadline=None)
@given(code=st.binary(min_size=4, max_size=48), tails=st.lists(st.binary(max_size=12), min_size=2, max_size=3),
       pc=st.integers(0, 1 << 40))
def test_decode_memo_is_the_decoding(arch, code, tails, pc):
    """A word decoded before (at another pc, before other bytes, with another literal or cut short) decodes as a
    decoder that never saw it decodes it."""
    remembering = decoder(arch)
    for tail in tails:
        stream = code + tail
        for off in range(0, len(code), 4):
            fresh = Decoder(isa.name(arch))
            assert _facts(remembering.decode_one(stream, off, pc + off)) == \
                _facts(fresh.decode_one(stream, off, pc + off)) == _facts(fresh._decode(stream, off, pc + off)[0])


def _cli(*args):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = disasm_main(list(args))
    return rc, out.getvalue(), err.getvalue()


def test_cli_hex():
    rc, out, err = _cli("--arch", "gfx1100", "--hex", "01 05 00 06 0x00,0x00,0xb0,0xbf")
    assert rc == 0 and not err
    assert out.splitlines() == ["  00000000: 01 05 00 06                          v_add_f32_e32 v0, v1, v2",
                                "  00000004: 00 00 b0 bf                          s_endpgm"]


@pytest.mark.parametrize("args,message", [
    (("--arch", "gfx9999", "--hex", "00"), "unknown arch"),
    (("--arch", "gfx1100", "--hex", "zz"), "not a list of hex bytes"),
    (("--arch", "gfx1100", "/nonexistent/kernel.hsaco"), "cannot read"),
    (("--arch", "gfx1100"), "give a code object"),
])
def test_cli_errors(args, message):
    rc, out, err = _cli(*args)
    assert rc == 2 and not out
    assert len(err.splitlines()) == 1 and message in err


def test_cli_not_elf(tmp_path):
    p = tmp_path / "k.bin"
    p.write_bytes(b"\x01\x05\x00\x06")
    rc, out, err = _cli("--arch", "gfx1100", str(p))
    assert rc == 2 and "not an ELF" in err and len(err.splitlines()) == 1
    p.write_bytes(b"\x7fELF" + b"\xff" * 12)  # an ELF header cut short
    rc, out, err = _cli("--arch", "gfx1100", str(p))
    assert rc == 2 and len(err.splitlines()) == 1


@pytest.mark.skipif(not (shutil.which("clang-19") and shutil.which("ld.lld-19")), reason="clang-19/ld.lld-19 missing")
def test_cli_code_object(tmp_path):
    from stack.codegen.opencl import compile_cl
    p = tmp_path / "k.hsaco"
    p.write_bytes(compile_cl("__kernel void k(__global int *o) { o[get_global_id(0)] = 7; }", "gfx1100"))
    rc, out, err = _cli("--arch", "gfx1100", str(p))
    assert rc == 0 and not err
    assert "<k>:" in out and "s_endpgm" in out and "global_store_b32" in out


def test_module_entry_point():
    import subprocess
    r = subprocess.run([sys.executable, "-m", "emu.amd.asm.disasm", "--arch", "gfx942", "--hex", "00 00 7f 01"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "v_cndmask_b32_e32 v191, s0, v128, vcc" in r.stdout
