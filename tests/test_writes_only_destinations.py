"""Instructions write only what they name (issue 23, item 4): after one random ALU instruction of any encoding, on
every tier, the registers that changed are among the destinations its LLVM-syntax disassembly names, widths
included (s3 is one SGPR, s[2:3] two), plus the state its definition writes implicitly (SCC, VCC, EXEC, M0, ...).
The class this caught: a destination read wider than written in the vendor pcode (`D0.i32 = tmp; SCC = D0.u64 !=
0` of S_BCNT1_I32_B64) was written back at the read's width, so `s_bcnt1_i32_b64 s3, s[16:17]` zeroed s4."""
from __future__ import annotations

import re

import numpy as np
import pytest
from depth import examples
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from emu.amd import GPUFault, Wave, isa, strategies
from emu.amd.decode import decode
from emu.amd.exec.state import ACC, EXEC, VCC
from emu.pcode import compile_op
from emu.pcode.typed import Unsupported

EXAMPLES = examples(25, 150)
ENDPGM = {"rdna3": "0000b0bf", "rdna4": "0000b0bf", "cdna": "000081bf"}
ALU = ("SOP1", "SOP2", "SOPK", "SOPC", "VOP1", "VOP2", "VOP3", "VOP3P", "VOP3SD", "VOPC", "VOPD", "VINTERP")
DST_FIELDS = ("vdst", "sdst")
NAMED = {"vcc_lo": (VCC,), "vcc_hi": (VCC + 1,), "vcc": (VCC, VCC + 1), "exec_lo": (EXEC,), "exec_hi": (EXEC + 1,),
         "exec": (EXEC, EXEC + 1), "flat_scratch_lo": (102,), "flat_scratch_hi": (103,), "flat_scratch": (102, 103),
         "xnack_mask_lo": (104,), "xnack_mask_hi": (105,), "xnack_mask": (104, 105)}
IMPLICIT = {"VCC": (VCC, VCC + 1), "EXEC": (EXEC, EXEC + 1)}
REG = re.compile(r"^(s|v|a|ttmp)(?:(\d+)|\[(\d+):(\d+)\])(?:\.[lh])?$")  # v1.l: a 16-bit half of v1


def _registers(token: str, m0: int) -> set[tuple[str, int]]:
    """The (file, index) pairs an operand token names: ('s', slot) for scalar slots, ('v', row) for VGPR rows."""
    token = token.strip()
    if token == "m0":
        return {("s", m0)}
    if token in NAMED:
        return {("s", i) for i in NAMED[token]}
    m = REG.match(token)
    if m is None:
        return set()
    kind, one, lo, hi = m.groups()
    lo, hi = (int(one), int(one)) if one is not None else (int(lo), int(hi))
    base, file = {"s": (0, "s"), "ttmp": (108, "s"), "v": (0, "v"), "a": (ACC, "v")}[kind]
    return {(file, base + i) for i in range(lo, hi + 1)}


def _destinations(inst, arch: str, m0: int) -> set[tuple[str, int]]:
    """What the disassembly names as destinations (the leading operands, one per destination field of the encoding;
    VOPD: of each half), plus what the definition writes implicitly."""
    out = set()
    ndst = 1 if inst.base == "VOPD" else sum(f in inst.fields for f in DST_FIELDS)
    if inst.op.name.startswith("V_SWAP"):  # v_swap_b32 v1, v2 (and v_swaprel): LLVM's definition has both as results
        ndst = 2
    for half in str(inst).split("::"):
        ops = half.split(None, 1)[1].split(",") if " " in half.strip() else []
        for tok in ops[:ndst]:
            out |= _registers(tok, m0)
    writes = _writes(arch, inst)
    for name in writes:
        out |= {("s", i) for i in IMPLICIT.get(name, ())}
        if name == "M0":
            out.add(("s", m0))
    if inst.base == "VOPC" and "sdst" not in inst.fields:  # the e32 form writes VCC (LLVM prints it first)
        out |= {("s", VCC), ("s", VCC + 1)}
    return out


def _encodings(arch: str) -> list[str]:
    return [e for e in strategies.encodings(arch) if e.split("_")[0] in ALU]


@pytest.mark.parametrize("tier", ["ref", "interp", "threaded", "jit"])
@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201", "gfx942"])
@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data(), seed=st.integers(0, 1 << 30))
def test_one_instruction_writes_only_its_destinations(monkeypatch, tier, arch, data, seed):
    monkeypatch.setenv("HWEMU_TIER", tier)
    enc = data.draw(st.sampled_from(_encodings(arch)), "encoding")
    code = data.draw(strategies.instructions(arch, enc), "instruction")
    inst = decode(code, arch)[0]
    if not inst.valid or inst.op is None:
        event("undecoded")
        return
    w = Wave(arch)
    rng = np.random.default_rng(seed)
    w.sgpr[:106] = rng.integers(0, 1 << 32, 106, dtype=np.uint64).astype(np.uint32)
    w.vgpr[:] = rng.integers(0, 1 << 32, w.vgpr.shape, dtype=np.uint64).astype(np.uint32)
    w.m0 = 0  # relative moves (s_movrels, v_movrel*) then write the register they name
    m0 = int(np.flatnonzero(_m0_probe(arch))[0])
    before_s, before_v, before_scc = w.sgpr[:128].copy(), w.vgpr.copy(), w.scc
    try:
        w.run(code + bytes.fromhex(ENDPGM[isa.family(arch)]))
    except GPUFault as e:
        assert e.record.kind != "emulator-error", f"{inst}: {e.record.detail}"
        event(f"fault: {e.record.kind}")
        return
    event("ran")
    changed = {("s", int(i)) for i in np.flatnonzero(w.sgpr[:128] != before_s)}
    changed |= {("v", int(i)) for i in np.flatnonzero((w.vgpr != before_v).any(axis=1))}
    allowed = _destinations(inst, arch, m0)
    assert changed <= allowed, f"{inst} ({inst.op.enc} {inst.op.name}) wrote {sorted(changed - allowed)}"
    if w.scc != before_scc:
        assert "SCC" in _writes(arch, inst), f"{inst} wrote SCC"


def _writes(arch: str, inst) -> frozenset[str]:
    """The state names the instruction's definition writes (VOPD: both halves')."""
    if inst.base == "VOPD":
        return frozenset()  # the dual ops write their named VGPRs only
    try:
        return compile_op(arch, inst.base, inst.op.name).writes
    except Unsupported:  # e.g. gfx12's s_barrier_signal (IsM0): the engine runs it as a no-op, writing nothing
        return frozenset()


def _m0_probe(arch: str) -> np.ndarray:
    w = Wave(arch)
    w.sgpr[:] = 0
    w.m0 = 1
    return w.sgpr


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201", "gfx942"])
def test_no_definition_writes_more_registers_than_its_destination(arch):
    """Every opcode at once, at the root of the class: the registers a definition's D0 fills (its width as written,
    in 32-bit registers) are no more than the operand table's destination holds."""
    t = isa.load(isa.family(arch))
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
    w.run(bytes.fromhex(word + ENDPGM[isa.family(arch)]))
    assert (int(w.sgpr[3]), int(w.sgpr[4]), w.scc) == (5, 0xAAAAAAAA, 1)


LOAD_BASE = (1 << 16) + (2 << 20)  # where every aligned register pair points: 2 MiB into 8 MiB mapped at 64 KiB


@pytest.mark.parametrize("tier", ["ref", "interp", "jit"])
@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201", "gfx942"])
@pytest.mark.parametrize("kind", ["SMEM", "GLOBAL", "DS"])
@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data(), seed=st.integers(0, 1 << 30))
def test_one_load_writes_only_its_destination(monkeypatch, tier, arch, kind, data, seed):
    """The same for scalar, global and LDS loads: 8 MiB of random words mapped at 64 KiB, every aligned SGPR pair and
    every even/odd VGPR row pair pointing 2 MiB into them (an odd register, a pair's high half, is 0; each V#'s
    NUM_RECORDS the largest), so that immediate, SGPR and VGPR offsets land; LDS random too, a DS load's address
    rows 256; the registers that changed are the destination tuple LLVM's disassembly names first."""
    monkeypatch.setenv("HWEMU_TIER", tier)
    enc = "VGLOBAL" if kind == "GLOBAL" and arch == "gfx1201" else kind
    inst_bytes = data.draw(strategies.instructions(arch, enc), "instruction")
    inst = decode(inst_bytes, arch)[0]
    if not inst.valid or inst.op is None or "LOAD" not in inst.op.name or "_LDS" in inst.op.name:
        event("not a load into registers")
        return
    w = Wave(arch)
    w.vm.map(1 << 16, np.random.default_rng(seed).integers(0, 1 << 32, 2 << 20, dtype=np.uint64).astype(np.uint32))
    w.sgpr[0:104:2], w.sgpr[1:104:2] = LOAD_BASE, 0
    w.sgpr[2:104:4] = 0xFFFFFFFF  # word 2 of each 4-aligned quad: a buffer resource's NUM_RECORDS
    w.vgpr[0::2], w.vgpr[1::2] = 256 if kind == "DS" else LOAD_BASE, 0
    w.lds.mem[:] = np.random.default_rng(seed + 1).integers(0, 256, len(w.lds.mem), dtype=np.uint8)
    before_s, before_v = w.sgpr[:128].copy(), w.vgpr.copy()
    try:
        w.run(inst_bytes + bytes.fromhex(ENDPGM[isa.family(arch)]))
    except GPUFault as e:
        assert e.record.kind != "emulator-error", f"{inst}: {e.record.detail}"
        event(f"fault: {e.record.kind}")  # an offset past the buffer, a VGPR pair starting at an odd row
        return
    event("ran")
    changed = {("s", int(i)) for i in np.flatnonzero(w.sgpr[:128] != before_s)}
    changed |= {("v", int(i)) for i in np.flatnonzero((w.vgpr != before_v).any(axis=1))}
    allowed = _registers(str(inst).split(None, 1)[1].split(",")[0].split()[0], -1)  # (an only operand: modifiers)
    assert changed <= allowed, f"{inst} ({inst.op.name}) wrote {sorted(changed - allowed)}"
