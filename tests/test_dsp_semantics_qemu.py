"""Instruction-level differential tests of the compiled vendor semantics and the packet executor against
qemu-hexagon: every register-to-register form (scalar and HVX) with random operands, and packets that
exercise memory addressing modes, new values, .cur/.tmp vector loads, predicated stores, hardware loops and
compare-jumps (tools/dsp_qemu_insn_diff; the full run takes --per-form 2 and more)."""
import functools
import shutil

import pytest
from dsp_support import vendor_isa

from emu.dsp.decode import Decoder
from tools import dsp_qemu_insn_diff as qd

pytestmark = pytest.mark.skipif(
    not (shutil.which("qemu-hexagon") and shutil.which("llvm-mc-19") and shutil.which("ld.lld-19")),
    reason="qemu-hexagon (qemu-user), llvm-mc-19 and ld.lld-19 needed (./dev installs them)")
PARTS = 4  # the forms' cases run as four programs (tests xdist can spread), every fourth case in each


@functools.cache
def _form_cases() -> tuple:
    """(the ISA, the testable forms, a case per form): the same cases for every part."""
    isa = vendor_isa()
    decoder = Decoder(isa)
    forms = qd.forms(decoder)
    return isa, forms, qd.cases_for(decoder, forms, 1, seed=20261130)


@pytest.mark.parametrize("part", range(PARTS))
def test_forms_agree_with_qemu(part):
    isa, forms, cases = _form_cases()
    assert len(forms) > 1200
    cases = cases[part::PARTS]
    theirs, mine = qd.run_both(cases, isa)
    assert len(theirs) == len(mine) == len(cases) * (qd.SLOT + qd.VSLOT)
    diffs = qd.differences(cases, theirs, mine)
    assert diffs == []


# packets around the executor's packet semantics (the harness randomises r0-r31, v0-v31, q0-q3, P3:0)
PACKETS = [
    "{ r1 = ##vdata+256 }\n{ v0.tmp = vmem(r1+#0); v2.b = vadd(v0.b,v3.b) }",
    "{ r1 = ##vdata+384 }\n{ v4.cur = vmem(r1+#1); v5.h = vsub(v4.h,v6.h) }",
    "{ r1 = ##vdata+3 }\n{ v7 = vmemu(r1+#0) }",
    "{ r1 = ##vdata+512 }\n{ if (q1) vmem(r1+#0) = v9 }\n{ v10 = vmem(r1+#0) }",
    "{ r1 = ##vdata+640 }\n{ v11.w = vadd(v12.w,v13.w); vmem(r1+#0) = v11.new }\n{ v14 = vmem(r1+#0) }",
    "{ r1 = ##vdata+64 }\n{ r2 = memw(r1++#4) }",
    "{ r1 = ##vdata+72 }\n{ r2 = memub(r1+#3); r3 = memh(r1+#2) }",
    "{ r1 = ##vdata+80 }\n{ r4 = add(r5,r6); memw(r1+#4) = r4.new }\n{ r7 = memw(r1+#4) }",
    "{ r1 = ##vdata+88 }\n{ memd(r1+#8) = r3:2 }\n{ r9:8 = memd(r1+#8) }",
    "{ r1 = ##vdata+96 }\n{ p0 = cmp.gt(r2,r3); if (p0.new) memw(r1+#0) = r4 }\n{ r5 = memw(r1+#0) }",
    "{ r1 = ##vdata+104 }\n{ r2 = memw(r3=##vdata+12) }",
    "{ r2 = ##vdata }\n{ cs0 = r2; r3 = #32 }\n{ m0 = r3; r1 = ##vdata+24 }\n{ r4 = memw(r1++#8:circ(m0)) }",
    "{ r5 = #0 }\n{ loop0(1f,#3) }\n1: { r5 = add(r5,#1); r6 = add(r6,r5) }:endloop0",
    "{ r5 = #0; r7 = #0 }\n{ loop1(2f,#2) }\n2: { loop0(3f,#3) }\n3: { r5 = add(r5,#1) }:endloop0\n"
    "{ r7 = add(r7,#1) }:endloop1",
    "{ p0 = cmp.eq(r2,r2); if (p0.new) jump:t 1f }\n{ r7 = #1 }\n1: { r8 = #2 }",
    "{ p1 = cmp.gtu(r2,#5); if (!p1.new) jump:nt 1f }\n{ r7 = #1 }\n1: { r8 = #2 }",
    "{ if (cmp.eq(r2.new,#3)) jump:t 1f; r2 = #3 }\n{ r9 = #1 }\n1: { r10 = #2 }",
    "{ r2 = add(r3,r4); if (p0) r5 = r2 }",
    "{ p0 = cmp.eq(r1,r1); if (p0.new) r5 = add(r6,r7); if (!p0.new) r8 = add(r6,r7) }",
    "{ r0 = add(r1,#1); r1 = add(r0,#1) }",
    "{ r1 = ##vdata+128 }\n{ r2 = memw(r1+#0); memw(r1+#0) = r3 }\n{ r4 = memw(r1+#0) }",
    # { memd(r2+#0) = r1:0; r1:0 = memd(r2+#0) } in that order (as words: the assembler would put the load
    # first), as clang-19 emits it: the load sees the store
    "{ r2 = ##vdata+136 }\n\t.word 0xa1c24000, 0x91c2c000",
    "{ r1 = ##vdata+144 }\n{ memd(r1+#0) = r3:2; r5:4 = memd(r1+#0) }",  # assembled load first: the old value
    "{ r1 = usr }\n{ r2 = add(r3,r4):sat; r5 = add(r6,r7):sat }\n{ r8 = usr }",
    "{ r1 = ##vdata+640 }\n{ v20 = vmem(r1+#0):nt }\n{ v21 = vmem(r1+#-1) }",
    "{ r29 = ##vdata+4000 }\n{ allocframe(#16) }\n{ r2 = memw(r29+#4); r3 = r30 }\n{ deallocframe }",
    "{ r1 = ##vdata+1024 }\n{ v0.tmp = vmem(r1+#0); vhist }",
    "{ r1 = ##vdata+1152 }\n{ v1.tmp = vmem(r1+#0); vhist(q2) }",
    "{ r1 = ##vdata+1280 }\n{ v2.tmp = vmem(r1+#0); vwhist256:sat }",
    "{ r1 = ##vdata+1408 }\n{ v3.tmp = vmem(r1+#0); vwhist128(q1,#1) }",
    "{ r1 = ##vdata+1536 }\n{ vmem(r1+#0):scatter_release }\n{ v6 = vmem(r1+#0) }",
    "{ r5 = #0; r6 = #0 }\n{ p3 = sp1loop0(1f,#4) }\n1: { r5 = add(r5,#1); if (p3) r6 = add(r6,r5) }:endloop0",
    "{ r5 = #0; r6 = #0 }\n{ p3 = sp2loop0(1f,#5) }\n1: { r5 = add(r5,#2); if (p3) r6 = add(r6,r5) }:endloop0",
    "{ r5 = #0; r9 = #3 }\n{ loop0(1f,r9) }\n1: { r5 = add(r5,r9) }:endloop0\n{ r10 = lc0 }\n{ r11 = sa0 }",
    # bit-reversed addressing: r1's low half is the bit-reversed offset of vdata+8
    "{ r2 = ##vdata+8 }\n{ r3 = brev(r2) }\n{ r3 = lsr(r3,#16); r4 = and(r2,##-65536) }\n"
    "{ r1 = or(r4,r3); r5 = #4 }\n{ m1 = r5 }\n{ r6 = memw(r1++m1:brev) }",
]


def test_packets_agree_with_qemu():
    cases = qd.packet_cases(PACKETS, seed=1)
    theirs, mine = qd.run_both(cases, vendor_isa())
    assert len(theirs) == len(cases) * (qd.SLOT + qd.VSLOT)
    assert qd.differences(cases, theirs, mine) == []


# HVX gathers and scatters on a region of the program's memory (VTCM modelled as mapped memory): offsets masked
# into the region [vdata+2048, vdata+2048+1023]; Q forms use the harness's random q0-q3; scatter-adds draw
# offsets from a small range so that elements collide and accumulate
_REGION = ("{{ r1 = ##vdata+2048; r2 = #1023 }}\n{{ m0 = r2; r3 = ##{mask} }}\n{{ v2 = vsplat(r3) }}\n"
           "{{ v1 = vand(v1,v2); v0 = vand(v0,v2) }}\n")
_GATHER = "{{ r4 = ##vdata+4096 }}\n{{ {}; vmem(r4+#0) = vtmp.new }}\n{{ v10 = vmem(r4+#0) }}"
_SCATTER = "{{ {} }}\n" + "".join(f"{{{{ v{20 + k} = vmem(r1+#{k}) }}}}\n" for k in range(8))
GATHER_SCATTER = [_REGION.format(mask=mask) + form.format(insn) for mask, form, insn in [
    (0x3FC, _GATHER, "vtmp.w = vgather(r1,m0,v1.w).w"),
    (0x03FE03FE, _GATHER, "vtmp.h = vgather(r1,m0,v1.h).h"),
    (0x3FE, _GATHER, "vtmp.h = vgather(r1,m0,v1:0.w).h"),
    (0x3FC, _GATHER, "if (q1) vtmp.w = vgather(r1,m0,v1.w).w"),
    (0x03FE03FE, _GATHER, "if (q2) vtmp.h = vgather(r1,m0,v1.h).h"),
    (0x3FE, _GATHER, "if (q3) vtmp.h = vgather(r1,m0,v1:0.w).h"),
    (0x3FC, _SCATTER, "vscatter(r1,m0,v1.w).w = v3"),
    (0x00FE00FE, _SCATTER, "vscatter(r1,m0,v1.h).h = v3"),
    (0x3FE, _SCATTER, "vscatter(r1,m0,v1:0.w).h = v3"),
    (0x3FC, _SCATTER, "if (q1) vscatter(r1,m0,v1.w).w = v3"),
    (0x03FE03FE, _SCATTER, "if (q2) vscatter(r1,m0,v1.h).h = v3"),
    (0x3FE, _SCATTER, "if (q0) vscatter(r1,m0,v1:0.w).h = v3"),
    (0x7C, _SCATTER, "vscatter(r1,m0,v1.w).w += v3"),
    (0x003E003E, _SCATTER, "vscatter(r1,m0,v1.h).h += v3"),
    (0x3E, _SCATTER, "vscatter(r1,m0,v1:0.w).h += v3"),
    (0x7C, _SCATTER, "vscatter(r1,m0,v1.w).w = v3"),  # colliding elements: the last one wins
]]


def test_gather_scatter_agree_with_qemu():
    cases = qd.packet_cases(GATHER_SCATTER * 2, seed=5)
    theirs, mine = qd.run_both(cases, vendor_isa())
    assert len(theirs) == len(cases) * (qd.SLOT + qd.VSLOT)
    assert qd.differences(cases, theirs, mine) == []


def test_sffma_sc_subnormal_addend_agrees_with_qemu():
    """Rx += sfmpy(Rs,Rt,Pu):scale with a subnormal Rx and a positive scale (the addend is only a sticky bit),
    products of zero, one and just above one, in the four rounding modes."""
    cases = []
    for rx in (0x1, 0x80000001, 0x00400000, 0x80400000, 0x3F800000):
        for rs in (0x3F800000, 0xBF800000, 0x3F800001, 0x0, 0x000000CB):
            for scale in (1, 101, -3):
                for mode in range(4):
                    regs = [0] * 32
                    regs[2], regs[3], regs[4] = rx, rs, 0x3F800000
                    cases.append(("F2_sffma_sc", ("{ r2 += sfmpy(r3,r4,p0):scale }", regs, scale & 0xFF,
                                                  mode << qd.USR_FPRND)))
    theirs, mine = qd.run_both(cases, vendor_isa())
    assert len(theirs) == len(cases) * (qd.SLOT + qd.VSLOT)
    assert qd.differences(cases, theirs, mine) == []


def test_cabac_decbin_agrees_with_qemu():
    """S2_cabacdecbin (its CABAC tables come from emu.dsp.tables) in each of the 64 states, both MPS values."""
    import random
    rng = random.Random(4)
    cases = []
    for state in range(64):
        regs = [rng.getrandbits(32) for _ in range(32)]
        regs[2] = regs[2] & 0x1F  # bit position
        regs[3] = state | rng.getrandbits(1) << 8  # state, MPS value
        regs[0] = rng.getrandbits(32) | 0x80000000 >> rng.randrange(4)  # range
        cases.append(("S2_cabacdecbin", ("{ r5:4 = decbin(r1:0,r3:2) }", regs, rng.getrandbits(32), 0)))
    theirs, mine = qd.run_both(cases, vendor_isa())
    assert len(theirs) == len(cases) * (qd.SLOT + qd.VSLOT)
    assert qd.differences(cases, theirs, mine) == []
