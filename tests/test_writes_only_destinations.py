"""Instructions write only what they name (issue 23, item 4): after one random instruction of any encoding, on
every tier, the registers that changed are among the destinations its LLVM-syntax disassembly names, widths
included (s3 is one SGPR, s[2:3] two), plus the state its definition writes implicitly (SCC, VCC, EXEC, M0, ...);
emu.amd.writes holds the check, `python -m tools.writes_campaign` runs it on every opcode (a slice of it here).
The class this caught first: a destination read wider than written in the vendor pcode (`D0.i32 = tmp; SCC = D0.u64
!= 0` of S_BCNT1_I32_B64) was written back at the read's width, so `s_bcnt1_i32_b64 s3, s[16:17]` zeroed s4."""
from __future__ import annotations

import numpy as np
import pytest
from depth import examples
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from emu.amd import Wave, isa, strategies, writes
from emu.amd.exec.state import ACC
from emu.amd.writes import MEMORY, endpgm
from emu.pcode import compile_op
from tools import llvm_agreement, writes_campaign

EXAMPLES = examples(25, 150)
ALU = ("SOP1", "SOP2", "SOPK", "SOPC", "VOP1", "VOP2", "VOP3", "VOP3P", "VOP3SD", "VOPC", "VOPD", "VINTERP")


def _encodings(arch: str, bases: tuple[str, ...]) -> list[str]:
    return [e for e in strategies.encodings(arch) if e.split("_")[0] in bases]


def _outcome(tier: str, arch: str, code: bytes, seed: int, monkeypatch) -> None:
    monkeypatch.setenv("HWEMU_TIER", tier)
    o = writes.check(code, arch, seed)
    if o.status != "ran":
        assert not o.detail.startswith("emulator-error"), f"{o.inst}: {o.detail}"
        event(o.status if o.status == "invalid" else f"fault: {o.detail}")
        return
    event("ran")
    assert not o.extra, f"{o.inst} ({o.inst.op.enc} {o.inst.op.name}) wrote {sorted(o.extra)}"
    assert not o.scc, f"{o.inst} wrote SCC"


@pytest.mark.parametrize("tier", ["ref", "interp", "threaded", "jit"])
@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201", "gfx942"])
@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data(), seed=st.integers(0, 1 << 30))
def test_one_instruction_writes_only_its_destinations(monkeypatch, tier, arch, data, seed):
    enc = data.draw(st.sampled_from(_encodings(arch, ALU)), "encoding")
    _outcome(tier, arch, data.draw(strategies.instructions(arch, enc), "instruction"), seed, monkeypatch)


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201", "gfx942", "gfx90a"])
def test_no_definition_writes_more_registers_than_its_destination(arch):
    """Every opcode at once, at the root of the class: the registers a definition's D0 fills (its width as written,
    in 32-bit registers) are no more than the operand table's destination holds."""
    t = isa.load(arch)
    wider = []
    for (space, name), e in t.by_name.items():
        dst = e.operands.get("vdst") or e.operands.get("sdst")
        if dst is None or not dst.bits or not e.pcode:
            continue
        try:
            sem = compile_op(arch, space, name)
        except Exception:  # no compiled semantics: the instruction faults, writing nothing
            continue
        if "D0" in sem.writes and "D0" not in sem.masks and -(-sem.widths["D0"] // 32) > -(-dst.bits // 32):
            wider.append(f"{space} {name}: D0 {sem.widths['D0']} bits, destination {dst.bits}")
    assert not wider, wider


@pytest.mark.parametrize("tier", ["ref", "interp", "jit"])
@pytest.mark.parametrize("arch, word", [("gfx942", "100d83be"), ("gfx1100", "101983be")])
def test_s_bcnt1_i32_b64_writes_one_sgpr(monkeypatch, tier, arch, word):
    """s_bcnt1_i32_b64 s3, s[16:17] (llvm-mc-19 -show-encoding): s3 = 5, SCC = 1, s4 untouched."""
    monkeypatch.setenv("HWEMU_TIER", tier)
    w = Wave(arch)
    w.sgpr[3:5] = 0xAAAAAAAA
    w.sgpr[16:18] = (0xF, 1)
    w.run(bytes.fromhex(word) + endpgm(arch))
    assert (int(w.sgpr[3]), int(w.sgpr[4]), w.scc) == (5, 0xAAAAAAAA, 1)


@pytest.mark.parametrize("tier", ["ref", "interp", "jit"])
@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201", "gfx942"])
@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data(), seed=st.integers(0, 1 << 30))
def test_one_memory_instruction_writes_only_its_destination(monkeypatch, tier, arch, data, seed):
    """The same for scalar and vector memory, LDS and images: the wave's random memory and the registers pointing into
    it (emu.amd.writes.prepare) let immediate, SGPR and VGPR offsets land; a load or a returning atomic writes the
    tuple its disassembly names first, anything else no register."""
    enc = data.draw(st.sampled_from(_encodings(arch, MEMORY)), "encoding")
    _outcome(tier, arch, data.draw(strategies.instructions(arch, enc), "instruction"), seed, monkeypatch)


@pytest.mark.skipif(not llvm_agreement.available(), reason="llvm-mc-19/llvm-objdump-19 missing")
@pytest.mark.parametrize("tier", writes_campaign.TIERS)
@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201", "gfx942", "gfx90a"])
def test_campaign_slice(monkeypatch, arch, tier):
    """A fixed slice of the every-opcode campaign (python -m tools.writes_campaign): every 60th opcode of the vendor
    table, one draw in each encoding that carries it, disassembled by llvm-mc-19, on each tier."""
    monkeypatch.setenv("HWEMU_TIER", tier)  # the campaign sets it; monkeypatch puts it back
    rep = writes_campaign.run(arch, tier, draws_each=1, every=60)
    assert not rep.violations, rep.violations
    assert rep.covered >= 0.7 * rep.opcodes, writes_campaign.show(rep, 10)


@pytest.mark.parametrize("tier", ["ref", "interp", "jit"])
def test_buffer_data_in_acc_vgprs(monkeypatch, tier):
    """gfx942 MUBUF with the acc bit: data and result are ACC VGPRs (llvm-mc-19 -show-encoding below). The class the
    campaign found: the buffer path dropped the acc bit, so buffer_load_dword a5 wrote v5 and stores sent v6."""
    monkeypatch.setenv("HWEMU_TIER", tier)
    w = Wave("gfx942")
    mem = np.arange(1024, dtype=np.uint32) + 100
    w.vm.map(1 << 16, mem)
    w.sgpr[0:4] = (1 << 16, 0, 256, 0)
    w.vgpr[5:8], w.vgpr[ACC + 5:ACC + 8] = 11, 22
    code = ("000050e0 00058080"  # buffer_load_dword a5, off, s[0:3], 0
            "040070e0 00068080"  # buffer_store_dword a6, off, s[0:3], 0 offset:4
            "004008e1 00078080")  # buffer_atomic_add a7, off, s[0:3], 0 sc0
    w.run(bytes.fromhex(code) + endpgm("gfx942"))
    assert (w.vgpr[ACC + 5] == 100).all() and (w.vgpr[5] == 11).all()
    assert mem[1] == 22  # a6's value, stored from every lane
    assert (w.vgpr[ACC + 7] >= 100).all() and (w.vgpr[7] == 11).all()  # the old values, returned into a7
    assert mem[0] == 100 + 64 * 22


@pytest.mark.parametrize("tier", ["ref", "interp", "threaded", "jit"])
@pytest.mark.parametrize("text", ["v_add_co_ci_u32_e32 v2, vcc_lo, s0, v2, vcc_lo",
                                  "v_sub_co_ci_u32_e32 v2, vcc_lo, v3, v2, vcc_lo",
                                  "v_subrev_co_ci_u32_e32 v2, vcc_lo, 7, v2, vcc_lo"])
def test_wave32_carry_out_writes_vcc_lo_alone(monkeypatch, tier, text):
    """A VOP2 carry-out in wave32 is VCC_LO: VCC_HI is an SGPR there, which LLVM allocates (tinygrad's
    test_padded_conv3d kept a flag in it across such a chain)."""
    from test_wave import asm
    monkeypatch.setenv("HWEMU_TIER", tier)
    o = writes.check(asm(text, "gfx1100"), "gfx1100", 7)
    assert o.status == "ran" and not o.extra, (o.status, sorted(o.extra))


@pytest.mark.skipif(not llvm_agreement.available(), reason="llvm-mc-19/llvm-objdump-19 missing")
@pytest.mark.parametrize("arch", ["gfx1100", "gfx1151", "gfx1201", "gfx90a", "gfx942"])
def test_endpgm_is_llvms(arch):
    """The program end every check appends is s_endpgm as llvm-mc-19 disassembles it for the chip."""
    assert llvm_agreement.llvm_mc_disassemble(endpgm(arch), arch)[0][1].split()[0] == "s_endpgm"
