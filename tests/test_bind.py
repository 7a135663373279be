"""The operand binder (emu.amd.exec.bind): what each pcode name is in an instruction as llvm-mc-19 encodes it, the one
description the reference plans, the lean interpreter and the LLVM tier render."""
from __future__ import annotations

import pytest
from test_wave import asm

from emu.amd.decode import decode
from emu.amd.exec.bind import MASK_FMT, Binder, Kind, OperandError
from emu.amd.regs import EXEC, LITERAL, VCC, VGPR0

pytestmark = pytest.mark.llvm


def _one(text: str, arch: str = "gfx1100"):
    (inst,) = decode(asm(text, arch), arch)
    return inst, Binder(arch, 32)


def test_valu_sources_with_modifiers_and_a_vgpr_result():
    inst, b = _one("v_fma_f32 v1, -|v2|, s3, 1.0 clamp")
    bd = b.valu_operands(inst)
    s0, s1, s2 = (bd.inputs[n] for n in ("S0", "S1", "S2"))
    assert (s0.kind, s0.reg, s0.bits, s0.mods.abs, s0.mods.neg, s0.mods.flush) == (Kind.VGPR, 2, 32, True, True, True)
    assert (s1.kind, s1.code) == (Kind.SGPR, 3)
    assert (s2.kind, s2.value) == (Kind.INLINE, 0x3F800000)
    d0 = bd.outputs["D0"]
    assert (d0.kind, d0.reg, d0.mods.clamp, d0.mods.omod) == (Kind.VGPR, 1, True, 0)


def test_compare_writes_a_mask_and_carries_read_vcc():
    inst, b = _one("v_cmp_gt_f32 vcc_lo, v1, v2")
    d0 = b.valu_operands(inst).outputs["D0"]
    assert (d0.kind, d0.code) == (Kind.MASK, VCC)
    inst, b = _one("v_add_co_ci_u32_e64 v8, s11, v9, -1, s10")
    bd = b.valu_operands(inst)
    assert (bd.inputs["VCC"].kind, bd.inputs["VCC"].code) == (Kind.MASK, 10)
    assert (bd.inputs["S1"].kind, bd.inputs["S1"].value) == (Kind.INLINE, 0xFFFFFFFF)
    assert {n: (o.kind, o.code) for n, o in bd.outputs.items() if n != "D0"} == {"VCC": (Kind.MASK, 11)}


def test_cmpx_writes_exec_and_16_bit_halves():
    inst, b = _one("v_cmpx_lt_u32 v1, v2")
    exec_ = b.valu_operands(inst).outputs["EXEC"]
    assert (exec_.kind, exec_.code) == (Kind.MASK, EXEC)
    inst, b = _one("v_fma_f16 v1, v2, v3, v4 op_sel:[1,0,0,1]")
    bd = b.valu_operands(inst)
    assert (bd.inputs["S0"].reg, bd.inputs["S0"].mods.hi, bd.inputs["S1"].mods.hi) == (2, True, False)
    assert (bd.outputs["D0"].reg, bd.outputs["D0"].mods.hi, bd.outputs["D0"].bits) == (1, True, 16)


def test_salu_literal_and_scalar_destination():
    inst, b = _one("s_add_u32 s5, s6, 0x12345678")
    bd = b.salu_operands(inst)
    assert (bd.inputs["S1"].kind, bd.inputs["S1"].code, bd.inputs["S1"].value) == (Kind.LITERAL, LITERAL, 0x12345678)
    assert {n: (o.kind, o.code) for n, o in bd.outputs.items()} == {"D0": (Kind.SGPR, 5), "SCC": (Kind.STATE, None)}


def test_lds_address_with_its_offset_and_data_rows():
    inst, b = _one("ds_store_b32 v1, v2 offset:16")
    bd = b.ds_operands(inst)
    addr = bd.inputs["ADDR"]
    assert addr.kind is Kind.VGPR and addr.code == VGPR0 + 1
    assert addr.mods.offset is None and bd.inputs["OFFSET"].value == 16  # the pcode adds OFFSET itself
    assert (bd.inputs["DATA"].kind, bd.inputs["DATA"].reg) == (Kind.VGPR, 2)


def test_mask_format_and_bad_codes():
    inst, b = _one("v_cmp_eq_u32_e64 s[4:5], v1, v2", "gfx942")
    b = Binder("gfx942", 64)
    d0 = b.valu_operands(inst).outputs["D0"]
    assert (d0.kind, d0.code, d0.bits) == (Kind.MASK, 4, 64) and d0.fmt in (MASK_FMT, "")
    with pytest.raises(OperandError):
        b.scalar_source("S0", 239, 32)  # SRC_POPS_EXITING_WAVE_ID: no source the engine reads
