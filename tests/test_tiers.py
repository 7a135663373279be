"""The execution tiers against the reference tier: hypothesis streams of valid instructions (emu.amd.strategies)
run on a free-standing Wave under the lean interpreter (HWEMU_TIER=interp), the LLVM tier (HWEMU_TIER=jit:
every region compiled at its first execution) and the threaded tier (HWEMU_TIER=threaded: every instruction's
handler compiled at its first execution) and under the reference tier, from the same random register state;
SGPRs, VGPRs, EXEC / VCC / SCC / M0 / MODE, LDS, fault kinds and instruction counts must match bit for bit.
The `dev` and `ci` hypothesis profiles draw a modest number per family and tier (fewer for jit, whose every example
compiles native code), the `explore` profile 2,000 (tests/conftest.py)."""
from __future__ import annotations

import collections
import functools
import os

import numpy as np
import pytest
from depth import examples
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from emu.amd import decode, strategies
from emu.amd.exec import interp
from emu.amd.exec import wave as wave_mod
from emu.amd.exec.hwreg import F32_KEEP_IN, F32_KEEP_OUT
from emu.amd.exec.state import MODE
from emu.amd.memory import GPUFault

EXAMPLES = {"interp": examples(60, 2000), "jit": examples(12, 2000), "threaded": examples(30, 2000)}
ARCHES = ("gfx1100", "gfx1201", "gfx942")
BASE = 0x7FFF_F000_0000  # where the snippets run: a high code address, as a loaded code object's (s_getpc reads it)
_FLOATS = np.array([0x0, 0x80000000, 0x3F800000, 0xBF800000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001,
                    0x00000001, 0x807FFFFF, 0x4B000000, 0x3F000000, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000001],
                   np.uint32)


def _run(arch: str, lanes: int | None, tier: str, code: bytes, seed: int, exec_mask: int, mode_bits: int):
    os.environ["HWEMU_TIER"] = tier
    w = wave_mod.Wave(arch, lanes)
    rng = np.random.default_rng(seed)
    v = rng.integers(0, 1 << 32, w.vgpr.shape, dtype=np.uint64).astype(np.uint32)
    special = rng.random(w.vgpr.shape) < 0.3
    w.vgpr[:] = np.where(special, _FLOATS[rng.integers(0, _FLOATS.size, w.vgpr.shape)], v)
    w.sgpr[:106] = rng.integers(0, 1 << 32, 106, dtype=np.uint64).astype(np.uint32)
    w.sgpr[108:124] = rng.integers(0, 1 << 32, 16, dtype=np.uint64).astype(np.uint32)
    w.vcc = int(rng.integers(0, 1 << 62)) & w.full
    w.m0 = int(rng.integers(0, 1 << 16))
    w.scc = seed & 1
    w.mode = w.mode & ~(F32_KEEP_IN | F32_KEEP_OUT | 3) | mode_bits
    w.set_exec(exec_mask & w.full)
    w.lds.mem[:4096] = rng.integers(0, 256, 4096, dtype=np.uint8)
    fault = None
    try:
        w.run(code, pc=BASE, limit=256)
    except GPUFault as e:
        fault = (e.record.kind, e.record.pc)
    return w, fault


def _compare(tier: str, arch: str, lanes: int | None, prog: list[bytes], seed: int, exec_mask: int,
             mode_bits: int) -> None:
    code = b"".join(prog)
    ref, fr = _run(arch, lanes, "ref", code, seed, exec_mask, mode_bits)
    new, fn = _run(arch, lanes, tier, code, seed, exec_mask, mode_bits)
    assert fn == fr, f"faults differ: {tier} {fn}, ref {fr}"
    for k in range(new.sgpr.size):
        assert new.sgpr[k] == ref.sgpr[k], f"sgpr slot {k}: {tier} {new.sgpr[k]:#x}, ref {ref.sgpr[k]:#x}"
    diff = np.argwhere(new.vgpr != ref.vgpr)
    assert not diff.size, f"v{diff[0][0]} lane {diff[0][1]}: {tier} {new.vgpr[tuple(diff[0])]:#x}, " \
                          f"ref {ref.vgpr[tuple(diff[0])]:#x}"
    assert (new.exec, new.vcc, new.scc, new.m0, new.mode) == (ref.exec, ref.vcc, ref.scc, ref.m0, ref.mode)
    assert np.array_equal(new.active, ref.active)
    assert np.array_equal(new.lds.mem, ref.lds.mem)
    assert (new.executed, new.lane_ops, new.pc) == (ref.executed, ref.lane_ops, ref.pc)


@pytest.fixture(autouse=True)
def _restore_tier():
    old = os.environ.get("HWEMU_TIER")
    yield
    if old is None:
        os.environ.pop("HWEMU_TIER", None)
    else:
        os.environ["HWEMU_TIER"] = old


_EXTRA = dict(seed=st.integers(0, 1 << 30),
              exec_mask=st.sampled_from([(1 << 64) - 1, (1 << 64) - 1, 0x5555_5555_5555_5555, 0, 1]),
              mode_bits=st.sampled_from([F32_KEEP_IN | F32_KEEP_OUT] * 3 + [0, 1, 2, 3, F32_KEEP_OUT]))
_CLOCK_READS = ("S_MEMTIME", "S_MEMREALTIME", "S_SENDMSG_RTN", "S_GETREG")  # differ from run to run
_CASES = [("gfx1100", None), ("gfx1100", 64), ("gfx1201", None), ("gfx942", None)]


@pytest.fixture
def native_declines(monkeypatch):
    """What the native tiers declined from here on (HWEMU_STATS counts it): their lines of takes.report()."""
    from emu.amd.exec import takes
    monkeypatch.setenv("HWEMU_STATS", "1")
    monkeypatch.setattr(takes, "_declined", collections.defaultdict(lambda: collections.defaultdict(set)))
    return lambda: [line for line in takes.report().splitlines() if line.startswith(("  native", "  threaded"))]


@pytest.fixture
def fused(monkeypatch):
    """The lean interpreter runs a straight-line block as one generated function from its first run on (its
    _fused code: the carry chains passed in arrays, the rows loaded once), not after interp.WARM runs."""
    monkeypatch.setattr(interp, "WARM", 1)


def _streams(tier: str, *fixtures: str):
    @pytest.mark.usefixtures(*fixtures or ("_restore_tier",))
    @pytest.mark.parametrize("arch,lanes", _CASES)
    @settings(max_examples=EXAMPLES[tier], deadline=None, suppress_health_check=list(HealthCheck))
    @given(data=st.data(), **_EXTRA)
    def test(arch, lanes, data, seed, exec_mask, mode_bits):
        prog = data.draw(strategies.programs(arch, 8), "program")
        assume(not any(i.valid and i.op.name.startswith(_CLOCK_READS) for i in decode(b"".join(prog), arch)))
        _compare(tier, arch, lanes, prog, seed, exec_mask, mode_bits)
    return test


test_interp_streams_match_reference = _streams("interp")
test_interp_fused_streams_match_reference = _streams("interp", "fused")
test_jit_streams_match_reference = _streams("jit")
test_threaded_streams_match_reference = _streams("threaded")


_CARRIES = {  # carry chains (the lean interpreter computes their sums in 32 bits, the carries by comparisons)
    ("gfx1100", None): "v_add_co_u32 v2, vcc_lo, v0, v1\nv_add_co_ci_u32_e32 v3, vcc_lo, v4, v5, vcc_lo\n"
                       "v_add_co_u32 v17, vcc_lo, s4, v18\ns_delay_alu instid0(VALU_DEP_1)\n"
                       "v_add_co_ci_u32_e32 v19, vcc_lo, s5, v20, vcc_lo\n"
                       "v_add_co_ci_u32_e32 v21, vcc_lo, 0, v22, vcc_lo\n"
                       "v_add_co_u32 v23, vcc_lo, v24, 7 clamp\nv_add_co_ci_u32_e32 v25, vcc_lo, v26, v27, vcc_lo\n"
                       "v_add_co_u32 v6, s10, s3, v7\nv_add_co_ci_u32_e64 v8, s11, v9, -1, s10\n"
                       "v_add_co_ci_u32_e64 v9, null, s2, v11, s11\nv_add_co_u32 v12, s12, 0x80000000, v13 clamp\n"
                       "v_add_co_ci_u32_e64 v14, s13, v15, v16, s12 clamp\ns_endpgm",
    ("gfx942", None): "v_add_co_u32 v2, vcc, v0, v1\nv_addc_co_u32 v3, vcc, v4, v5, vcc\n"
                      "v_add_co_u32 v6, s[10:11], s3, v7\nv_addc_co_u32 v8, s[12:13], v9, -1, s[10:11]\n"
                      "v_addc_co_u32 v14, s[14:15], v15, v16, s[12:13] clamp\ns_endpgm",
}


@pytest.mark.llvm
@pytest.mark.parametrize("arch,lanes", list(_CARRIES))
@pytest.mark.parametrize("fuse", [False, True])
@settings(max_examples=EXAMPLES["interp"], deadline=None, suppress_health_check=list(HealthCheck))
@given(**_EXTRA)
def test_carry_chains_match_reference(request, arch, lanes, fuse, seed, exec_mask, mode_bits):
    if fuse:  # the chains through VCC pass their lanes in arrays (interp._carries)
        request.getfixturevalue("fused")
    _compare("interp", arch, lanes, [_carry_code(arch, lanes)], seed, exec_mask, mode_bits)


@functools.cache
def _carry_code(arch: str, lanes: int | None) -> bytes:
    """The chains assembled once (llvm-mc-19), not per example."""
    from test_wave import asm
    return asm(_CARRIES[arch, lanes], arch)


@pytest.mark.parametrize("tier", ["interp", "threaded", "jit"])
def test_branch_past_the_snippet_faults_at_its_target(tier):
    # s_cbranch_vccnz 1 (llvm-mc-19), taken with seed 0's VCC: the target, BASE + 8, cannot be fetched. The jit tier's
    # fault report reads the PCs its branch ring recorded, the target among them; reading that must not replace
    # the fault (it did: a fault without a PC)
    _compare(tier, "gfx1100", None, [bytes.fromhex("0100a4bf")], 0, (1 << 64) - 1, F32_KEEP_IN | F32_KEEP_OUT)
    assert _run("gfx1100", None, tier, bytes.fromhex("0100a4bf"), 0, (1 << 64) - 1, 48)[1] == \
        ("illegal-instruction", BASE + 8)


def test_mode_slot_is_the_guarded_one():
    assert MODE == 256  # interp's guard reads MODE from this slot of the SGPR file


@pytest.mark.llvm
@pytest.mark.parametrize("tier", ["interp", "threaded", "jit"])
def test_getpc_reads_the_code_address(tier):
    # the threaded tier's handlers are built at PC 0 and return relative PCs; s_getpc must still read the real one
    from test_wave import asm
    code = asm("s_getpc_b64 s[4:5]\ns_add_u32 s4, s4, 8\ns_endpgm", "gfx1100")
    _compare(tier, "gfx1100", None, [code], 0, (1 << 64) - 1, F32_KEEP_IN | F32_KEEP_OUT)
    w, _ = _run("gfx1100", None, tier, code, 0, (1 << 64) - 1, F32_KEEP_IN | F32_KEEP_OUT)
    assert int(w.sgpr[4]) | int(w.sgpr[5]) << 32 == BASE + 12


@pytest.mark.llvm
@pytest.mark.parametrize("tier", ["threaded", "jit"])
@pytest.mark.parametrize("exec_mask", [(1 << 64) - 1, 0x5555_5550, 1 << 31, 0])
@pytest.mark.parametrize("arch,lanes", [("gfx1100", None), ("gfx1100", 64), ("gfx942", None)])
def test_lane_reads_and_writes_match_reference(tier, exec_mask, arch, lanes, native_declines):
    # the native tiers gather VGPR[lane][reg] for v_readfirstlane / v_readlane (EXEC 0: lane 0, as the pcode says)
    # and scatter v_writelane's one write, which lands whatever EXEC holds; the lane select's high bits are ignored
    from test_wave import asm
    gfx9 = arch == "gfx942"  # one SGPR per instruction there (the constant bus)
    text = (f"v_writelane_b32 v5, s3, 7\nv_writelane_b32 v6, {'s2' if gfx9 else 's4'}, s2\n"
            "v_writelane_b32 v9, -1, m0\nv_writelane_b32 v9, s8, 31\nv_readfirstlane_b32 s4, v3\n"
            "v_readlane_b32 s5, v7, s2\nv_readlane_b32 s6, v9, 31\nv_readlane_b32 s7, v6, s2\n"
            f"{'v_add_u32' if gfx9 else 'v_add_nc_u32'} v1, s4, v2\ns_endpgm")
    for seed in (7, 8):
        _compare(tier, arch, lanes, [asm(text, arch)], seed, exec_mask, F32_KEEP_IN | F32_KEEP_OUT)
    assert not native_declines()


@pytest.mark.llvm
@pytest.mark.parametrize("tier", ["threaded", "jit"])
@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_swaps_match_reference(tier, arch, native_declines):
    # v_swap_b32 writes both of its VGPRs (tinygrad's assembly renderer uses it), the native tiers included
    from test_wave import asm
    add = "v_add_u32" if arch == "gfx942" else "v_add_nc_u32"
    code = asm(f"v_swap_b32 v1, v2\nv_swap_b32 v3, v3\nv_swap_b32 v4, v1\n{add} v5, v1, v4\ns_endpgm", arch)
    for exec_mask in ((1 << 64) - 1, 0x5555_5550, 0):
        _compare(tier, arch, None, [code], 9, exec_mask, F32_KEEP_IN | F32_KEEP_OUT)
    assert not native_declines()


def _natively(tier: str, arch: str, text: str, runs: list[tuple[int, int]], mode_bits: int) -> None:
    """`text` then s_endpgm on `tier` against the reference, once per (seed, EXEC) of `runs`."""
    from test_wave import asm
    code = asm(text + "\ns_endpgm", arch)
    for seed, exec_mask in runs:
        _compare(tier, arch, None, [code], seed, exec_mask, mode_bits)


@pytest.mark.llvm
def test_a_handler_llvm_rejects_leaves_the_others_native(monkeypatch, tmp_path):
    """A kernel's missing handlers compile as one LLVM module; where LLVM rejects it (one handler's code), each is
    compiled on its own: the rejected kind runs interpreted, said once, and the others keep their handlers."""
    from emu.amd.exec import jit, threaded
    for name, empty in (("_handlers", {}), ("_asked", set()), ("_made", [])):
        monkeypatch.setattr(threaded, name, empty)
    monkeypatch.setattr(jit, "sources", lambda: f"rejects {tmp_path}")  # no handler of this process or disk fits
    monkeypatch.setenv("HWEMU_CACHE", str(tmp_path))  # what it compiles stays out of the user's cache
    build = threaded.Handler.build

    def rejected(self, name: str):
        return "not LLVM IR" if self.kind.inst.op.name == "V_MUL_F32" else build(self, name)
    monkeypatch.setattr(threaded.Handler, "build", rejected)
    with pytest.warns(RuntimeWarning, match="native code was not compiled"):
        _natively("threaded", "gfx1100", "v_add_f32 v1, v2, v3\nv_mul_f32 v4, v5, v6\nv_sub_f32 v7, v8, v9",
                  [(5, (1 << 32) - 1)], F32_KEEP_IN | F32_KEEP_OUT)
    made = {full[-1][2]: addr for full, addr in threaded._handlers.items()}
    assert made["V_MUL_F32"] is None and made["V_ADD_F32"] and made["V_SUB_F32"]


_PACKED = {  # VOP3P packed math: halves picked by op_sel / op_sel_hi, negated by neg_lo / neg_hi; SGPR and constants;
    # CDNA's moves to, from and between the ACC VGPRs (LLVM keeps spilled VGPRs there)
    "gfx942": "v_pk_fma_f32 v[0:1], v[2:3], v[4:5], v[6:7]\nv_pk_mul_f32 v[8:9], v[2:3], v[4:5] op_sel:[1,0] "
              "op_sel_hi:[0,1]\nv_pk_add_f32 v[10:11], v[2:3], v[4:5] neg_lo:[1,0] neg_hi:[0,1]\n"
              "v_pk_mov_b32 v[12:13], v[2:3], v[4:5] op_sel:[1,0]\nv_pk_add_f32 v[14:15], s[0:1], v[4:5]\n"
              "v_pk_mul_f32 v[16:17], 1.0, v[4:5]\nv_pk_fma_f32 v[18:19], v[2:3], s[2:3], v[6:7] op_sel_hi:[0,0,1]\n"
              "v_accvgpr_write_b32 a1, v2\nv_accvgpr_mov_b32 a4, a1\nv_accvgpr_write_b32 a5, 7\n"
              "v_accvgpr_write_b32 a255, s3\nv_accvgpr_read_b32 v20, a4\nv_accvgpr_read_b32 v21, a255",
    "gfx1100": "v_pk_add_f16 v1, v2, v3 op_sel:[1,0] op_sel_hi:[0,1] neg_lo:[1,0]\nv_pk_mul_lo_u16 v4, v5, v6\n"
               "v_pk_fma_f16 v7, v8, v9, v10 neg_hi:[0,1,1]\nv_pk_add_u16 v11, v12, 1\n"
               "v_pk_max_f16 v13, s4, v14 op_sel_hi:[0,1]\nv_pk_mul_f16 v15, 2.0, v16",
}


@pytest.mark.llvm
@pytest.mark.parametrize("tier", ["threaded", "jit"])
@pytest.mark.parametrize("arch", list(_PACKED))
@pytest.mark.parametrize("mode_bits", [F32_KEEP_IN | F32_KEEP_OUT, F32_KEEP_IN | F32_KEEP_OUT | 3])
def test_packed_math_matches_reference(tier, arch, mode_bits, native_declines):
    # CDNA's packed f32 (LLVM's float2 code for gfx90a+) and RDNA's packed 16-bit ops, halves selected per source
    _natively(tier, arch, _PACKED[arch], [(10, (1 << 64) - 1), (11, 0x5555_5550), (12, 0)], mode_bits)
    assert not native_declines()


def _opsel(code: bytes, bits: int) -> bytes:
    """A VOP3 instruction with OPSEL [14:11] set (LLVM 19 spells no op_sel for gfx11's 16-bit VOP3 forms)."""
    return (int.from_bytes(code[:4], "little") | bits << 11).to_bytes(4, "little") + code[4:]


@functools.cache
def _halves_code(arch: str) -> bytes:
    """16-bit VALU operands: RDNA's VGPR halves as VOP1 / VOP2 / VOPC codes past v127 (LLVM's real-true16 syntax)
    and as VOP3 op_sel bits (sources and destination; an SGPR's and a constant's high half too), a 16-bit result
    keeping the other half; CDNA's 16-bit results clearing the high half."""
    from test_wave import asm
    if arch == "gfx942":
        return asm("v_add_f16 v1, v2, v3\nv_mul_f16_e64 v4, -v5, |v6|\nv_fma_f16 v17, v18, v19, 1.0\n"
                   "v_cvt_f32_f16_e64 v9, v10\nv_cvt_f16_f32 v7, v8\nv_cmp_lt_f16_e64 vcc, v13, v14\n"
                   "v_add_u16 v30, v31, v32\nv_max_i16_e64 v33, v34, s5\nv_cvt_f16_u16 v23, v24\ns_endpgm", arch)
    vop3 = [("v_mul_f16_e64 v4, -v5, |v6|", 0b1001), ("v_fma_f16 v17, v18, v19, 1.0", 0b1100),
            ("v_cvt_f32_f16_e64 v9, v10", 0b0001), ("v_cvt_f16_f32_e64 v7, v8", 0b1000),
            ("v_add_f16_e64 v22, s3, v5", 0b1011), ("v_cmp_lt_f16_e64 vcc_lo, v13, v14", 0b0011),
            ("v_add_nc_u16 v30, v31, v32", 0b1110), ("v_max_i16 v33, v34, s5", 0b0010),
            ("v_fmac_f16_e64 v35, v36, v37", 0b1001)]  # v_fmac's D0 is its accumulator: read from its half
    return asm("v_add_f16 v1.l, v2.h, v3.l\nv_add_f16 v1.h, v2.l, v3.h\nv_mov_b16 v20.h, v21.l\n"
               "v_add_f16 v1.l, 0.5, v3.h\nv_mov_b16 v130.h, v131.l", arch, "+real-true16") + \
        b"".join(_opsel(asm(text, arch), k) for text, k in vop3) + asm("s_endpgm", arch)


@pytest.mark.llvm
@pytest.mark.parametrize("tier", ["threaded", "jit"])
@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201", "gfx942"])
@pytest.mark.parametrize("mode_bits", [F32_KEEP_IN | F32_KEEP_OUT, F32_KEEP_IN | F32_KEEP_OUT | 3])
def test_vgpr_halves_match_reference(tier, arch, mode_bits, native_declines):
    # tinygrad's half and int16 kernels: their 16-bit VALU ops run natively, halves and all
    for seed, exec_mask in [(15, (1 << 64) - 1), (16, 0x5555_5550), (17, 0)]:
        _compare(tier, arch, None, [_halves_code(arch)], seed, exec_mask, mode_bits)
    assert not native_declines()


@pytest.mark.llvm
@pytest.mark.parametrize("tier", ["threaded", "jit"])
@pytest.mark.parametrize("arch", ["gfx1100", "gfx942"])
def test_sopk_immediates_match_reference(tier, arch, native_declines):
    # SOPK's SIMM16 is an operand the handler reads from its entry: one kind for every immediate
    from test_wave import asm

    from emu.amd.exec.kinds import kind_of
    text = "s_movk_i32 s1, 0x8001\ns_mulk_i32 s2, -7\ns_addk_i32 s3, 0x7fff\ns_cmpk_lt_u32 s4, 0xfffe\n" \
           "s_cmpk_lt_i32 s5, 0x8000\ns_cmovk_i32 s6, 5\ns_mulk_i32 s2, 1234"
    insts = decode(asm(text, arch), arch)
    assert kind_of(insts[1])[0] is kind_of(insts[6])[0]
    _natively(tier, arch, text, [(18, (1 << 64) - 1), (19, 1)], F32_KEEP_IN | F32_KEEP_OUT)
    assert not native_declines()


_SLOTS = ("v_add_f32 v1, s2, v3\nv_add_f32 v4, 1.0, v3\nv_add_f32 v5, vcc_lo, v3\nv_add_f32 v6, -4, v3\n"
          "v_add_f32 v7, m0, v3\nv_add_f32 v8, 0.15915494, v3\nv_add_f32_e64 v9, -|exec_hi|, v3\n"
          "v_add_f32_e64 v10, -|0.5|, v3\ns_add_u32 s10, 1.0, s1\ns_add_u32 s11, s5, s1\ns_add_u32 s12, exec_lo, s1\n"
          "v_add_f16 v11, 1.0, v2\nv_add_f16 v12, s2, v2\nv_add_f64 v[14:15], 1.0, v[16:17]\n"
          "v_add_f32 v13, null, v3\nv_add_f32 v18, 64, v3\nv_dual_mov_b32 v20, 1.0 :: v_dual_mov_b32 v21, s4\n"
          "v_dual_mov_b32 v22, -2 :: v_dual_mov_b32 v23, vcc_lo")


@pytest.mark.llvm
@pytest.mark.parametrize("tier", ["threaded", "jit"])
@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201", "gfx942"])
def test_scalar_sources_share_a_kind(tier, arch, native_declines):
    # an SGPR, VCC / EXEC half, M0 or an f32 / integer inline constant as a 32-bit source: one kind, the slot read at
    # the code; f16 and f64 constants and NULL keep theirs
    from test_wave import asm

    from emu.amd.exec.kinds import kind_of
    text = _SLOTS.replace("null", "0" if arch == "gfx942" else "null")  # (CDNA has no NULL nor VOPD)
    text = text.rsplit("\nv_dual", 2)[0] if arch == "gfx942" else text
    kinds = [kind_of(i)[0] for i in decode(asm(text, arch), arch)]
    if arch != "gfx942":
        assert kinds[16].halves[0] is kinds[17].halves[0] and kinds[16].halves[1] is kinds[17].halves[1]
    assert len({id(k) for k in kinds[:6] + kinds[15:16]}) == 1 and kinds[6] is kinds[7]
    assert kinds[8] is kinds[9] is kinds[10]
    assert len({id(k) for k in kinds[11:15]} | {id(kinds[0])}) == (4 if arch == "gfx942" else 5)
    _natively(tier, arch, text, [(23, (1 << 64) - 1), (24, 0x5555_5550), (25, 0)], F32_KEEP_IN | F32_KEEP_OUT)
    _natively(tier, arch, text, [(26, (1 << 64) - 1)], 0)
    assert not native_declines()


_VOPD = ("v_dual_add_f32 v1, v2, v3 :: v_dual_mul_f32 v4, 0x40400000, v5\n"  # the literal in opY alone
         "v_dual_fmac_f32 v6, v7, v8 :: v_dual_mov_b32 v9, v6\n"  # opY reads what opX writes: one kind
         "v_dual_mul_f32 v10, v11, v12 :: v_dual_add_f32 v13, v14, v15\n"
         "v_dual_fmaak_f32 v16, v17, v18, 0x3f800000 :: v_dual_mov_b32 v19, s3\n"
         "v_dual_mul_f32 v20, v11, v12 :: v_dual_sub_f32 v21, v14, v15\n"  # opX's kind is the third line's
         "v_dual_cndmask_b32 v22, v23, v24 :: v_dual_fmac_f32 v25, v26, v27\n"
         "v_dual_add_f32 v30, v31, v28 :: v_dual_sub_f32 v33, v30, v29")  # opY reads opX's VGPR: one kind


@pytest.mark.llvm
@pytest.mark.parametrize("tier", ["threaded", "jit"])
@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201"])
def test_vopd_pairs_match_reference(tier, arch, native_declines):
    # a VOPD pair whose opY reads no VGPR of opX's is two kinds, one per half: they recur across pairs
    from test_wave import asm

    from emu.amd.exec.kinds import kind_of
    insts = decode(asm(_VOPD, arch), arch)
    kinds = [kind_of(i)[0] for i in insts]
    assert [k.halves is not None for k in kinds] == [True, False, True, True, True, True, False]
    assert kinds[2].halves[0] is kinds[4].halves[0] and kinds[2].halves[1] is not kinds[4].halves[1]
    _natively(tier, arch, _VOPD, [(20, (1 << 64) - 1), (21, 0x5555_5550), (22, 0)],
              F32_KEEP_IN | F32_KEEP_OUT)
    assert not native_declines()


_DPP16 = {  # lane selections of both generations, row / bank masks, bound_ctrl, fetch-inactive, VOPC and VOP3 forms
    "gfx1100": "v_mov_b32_dpp v1, v2 quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf\n"
               "v_add_f32_dpp v3, v4, v5 row_shr:1 bound_ctrl:1\nv_add_nc_u32_dpp v6, v7, v8 row_ror:3 row_mask:0x5 "
               "bank_mask:0xa\nv_mov_b32_dpp v9, v10 row_share:2 fi:1\nv_sub_f32_dpp v11, -v12, |v13| row_mirror\n"
               "v_cmp_lt_f32_dpp v1, v2 row_shl:2\nv_add_f32_e64_dpp v14, v4, v5 row_xmask:1",
    "gfx942": "v_mov_b32_dpp v1, v2 row_shr:1 bound_ctrl:0\nv_add_f32_dpp v3, v4, v5 row_bcast:15 row_mask:0xa\n"
              "v_add_u32_dpp v6, v7, v8 wave_shr:1\nv_mov_b32_dpp v9, v10 row_bcast:31\n"
              "v_max_f32_dpp v11, -v12, v13 quad_perm:[3,2,1,0]",
}


@pytest.mark.llvm
@pytest.mark.parametrize("tier", ["threaded", "jit"])
@pytest.mark.parametrize("arch", list(_DPP16))
@pytest.mark.parametrize("exec_mask", [(1 << 64) - 1, 0x5555_5550_F0F0_0FF0, 1 << 17])
def test_dpp16_matches_reference(tier, arch, exec_mask, native_declines):
    # DPP16's lane selection in the native tiers (LLVM's wave reductions and scans): a source lane that is inactive
    # or outside the row reads 0, and row_mask / bank_mask / bound_ctrl decide which lanes are written
    _natively(tier, arch, _DPP16[arch], [(13, exec_mask), (14, exec_mask)], F32_KEEP_IN | F32_KEEP_OUT)
    assert not native_declines()


@pytest.mark.llvm
@pytest.mark.parametrize("tier", ["threaded", "jit"])
@pytest.mark.parametrize("arch,text", [
    ("gfx1100", "v_wmma_f32_16x16x16_f16 v[0:7], v[8:15], v[16:23], v[0:7]"),
    ("gfx1100", "v_wmma_f32_16x16x16_bf16 v[24:31], v[8:15], v[16:23], v[32:39]"),
    ("gfx1100", "v_wmma_f16_16x16x16_f16 v[0:7], v[8:15], v[16:23], v[0:7] op_sel:[0,0,1]"),
    ("gfx1100", "v_wmma_i32_16x16x16_iu8 v[0:7], v[8:11], v[16:19], v[0:7] neg_lo:[1,0,0]"),
    ("gfx1201", "v_wmma_f32_16x16x16_f16 v[0:7], v[8:11], v[16:19], v[0:7]"),
    ("gfx1201", "v_wmma_f32_16x16x16_fp8_bf8 v[0:7], v[8:9], v[16:17], v[24:31]"),
])
@pytest.mark.parametrize("exec_mask", [(1 << 32) - 1, 0x0F0F_F0F0])
def test_matrix_ops_match_reference(tier, arch, text, exec_mask):
    # the native tiers run WMMA's pcode with the register file read and written lane by lane
    from test_wave import asm
    code = asm(f"{text}\nv_add_nc_u32 v40, v1, v2\ns_endpgm", arch)
    for seed in (3, 4):
        _compare(tier, arch, None, [code], seed, exec_mask, F32_KEEP_IN | F32_KEEP_OUT)
