"""emu.dsp semantics compiler: vendor definitions -> typed IR -> Python, run against a minimal core model.

Expected values follow the Hexagon V65 programmer's reference (stated per case); the qemu-hexagon
differential corpus checks whole programs.
"""
import struct

import numpy as np
import pytest
from dsp_support import vendor_isa

from emu.dsp import syntax
from emu.dsp.coverage import report
from emu.dsp.lower import lower
from emu.dsp.pyback import compile_semantics


@pytest.fixture(scope="module")
def isa():
    return vendor_isa()


class Core:
    """Records what an instruction does to the state outside its operands."""
    def __init__(self, mem=None, pc=0x1000):
        self.mem = dict(mem or {})
        self.regs = {"REG_PC": pc}
        self.usr: dict[str, int] = {}
        self.stores: list = []
        self.branches: list = []
        self.preds = {}
        self.rounding = 0  # USR.FPRND: to nearest

    def read_reg(self, name):
        return self.regs.get(name, 0)

    def write_reg(self, name, value):
        self.regs[name] = value

    def usr_set(self, field, value):
        self.usr[field] = value

    def write_pred(self, n, value):
        self.preds[n] = value & 0xFF

    def new_pred(self, n):
        return self.preds[n]

    def load(self, size, ea):
        return int.from_bytes(bytes(self.mem.get(ea + i, 0) for i in range(size)), "little")

    def store(self, size, ea, value):
        self.stores.append((size, ea, value & ((1 << 8 * size) - 1)))

    def branch(self, target):
        self.branches.append(target)

    fpflags = 0

    def circ_add(self, reg, incr, m, mnum):
        return reg + incr  # the circular wrap is the core model's job; here only the call is checked


def run(isa, tag, *inputs, core=None):
    c = compile_semantics(lower(isa, isa.insns[tag]))
    return c.fn(core or Core(), *inputs)


def f32bits(x: float) -> int:
    """A binary32 as the signed 32-bit register value."""
    return struct.unpack("<i", struct.pack("<f", x))[0]


def test_coverage(isa):
    r = report(isa)
    assert r["total"] == len(isa.insns) and r["parsed"] == r["total"]  # every definition parses
    assert r["scalar"]["compiled"] / r["scalar"]["total"] >= 0.99
    assert r["hvx"]["compiled"] / r["hvx"]["total"] >= 0.97
    assert set(r["failing"]) == {t for t in isa.insns if t in r["failing"]}
    from emu.dsp.fixups import FIXUPS
    assert set(FIXUPS) <= set(isa.insns)  # every fixup names a vendor instruction
    assert all("emu.dsp.fixups" in r["failing"][t] for t, (text, _) in FIXUPS.items() if text is None)


def test_parse_shapes():
    tree = syntax.parse("{ fHIDE(int i;) for (i = 0; i < 4; i++) { if (x) y += 1; else CANCEL; } }")
    assert isinstance(tree.body[0], syntax.Decl) and isinstance(tree.body[1], syntax.For)
    assert syntax.parse("a = b ? c : d;").body[0].x.value == syntax.Cond(syntax.Name("b"), syntax.Name("c"),
                                                                        syntax.Name("d"))
    with pytest.raises(syntax.ParseError):
        syntax.parse("a = (b;")


def test_integer_alu(isa):
    assert run(isa, "A2_add", 0x7FFFFFFF, 1) == (-0x80000000,)  # wraps at 32 bits
    assert run(isa, "A2_sub", 5, 1) == (4,)  # Rd32=sub(Rt32,Rs32): inputs in syntax order, Rd = Rt - Rs
    assert run(isa, "M2_mpyi", -3, 7) == (-21,)
    assert run(isa, "M2_dpmpyss_s0", 0x7FFFFFFF, 0x7FFFFFFF) == (0x3FFFFFFF00000001,)
    assert run(isa, "A2_combinew", 1, 2) == ((1 << 32) | 2,)
    assert run(isa, "S2_asr_r_r", -16, 2) == (-4,)
    assert run(isa, "S2_asr_r_r", -16, -2) == (-64,)  # a negative amount shifts the other way
    assert run(isa, "C2_cmpeq", 3, 3) == (0xFF,) and run(isa, "C2_cmpeq", 3, 4) == (0,)
    assert run(isa, "A4_cround_ri", 0x58, 4) == (6,) and run(isa, "A4_cround_ri", 0x48, 4) == (4,)  # ties to even


def test_saturation_sets_overflow(isa):
    core = Core()
    assert run(isa, "A2_addsat", 0x7FFFFFFF, 1, core=core) == (0x7FFFFFFF,) and core.usr == {"USR_OVF": 1}
    core = Core()
    assert run(isa, "A2_addsat", 1, 2, core=core) == (3,) and core.usr == {}
    assert run(isa, "A2_addsat", -0x80000000, -1) == (-0x80000000,)


def test_conditional_and_branch(isa):
    assert run(isa, "A2_paddt", 1, 2, 3) == (5,)
    assert run(isa, "A2_paddt", 0, 2, 3) is None  # cancelled: nothing commits
    core = Core(pc=0x1000)
    assert run(isa, "J2_jumpt", 0xFF, 0x100, core=core) == () and core.branches == [0x1100]
    core = Core()
    run(isa, "J2_jumpt", 0, 0x100, core=core)
    assert core.branches == []


def test_memory(isa):
    core = Core(mem={0x108 + i: b for i, b in enumerate((0x78, 0x56, 0x34, 0x12))})
    assert run(isa, "L2_loadri_io", 0x100, 8, core=core) == (0x12345678,)
    assert run(isa, "L2_loadrb_io", 0x10B, 0, core=core) == (0x12,)
    run(isa, "S2_storeri_io", 0x200, -4, -1, core=core)
    assert core.stores == [(4, 0x1FC, 0xFFFFFFFF)]
    rd, rx = run(isa, "L2_loadri_pi", 0x108, 4, core=core)  # post-increment
    assert (rd, rx) == (0x12345678, 0x10C)


def test_float(isa):
    assert run(isa, "F2_sfadd", f32bits(1.5), f32bits(2.25)) == (f32bits(3.75),)
    assert run(isa, "F2_sfmpy", f32bits(3.0), f32bits(-0.5)) == (f32bits(-1.5),)
    assert run(isa, "F2_conv_sf2w", f32bits(-2.5)) == (-2,)  # round to nearest even
    assert run(isa, "F2_conv_sf2w_chop", f32bits(-2.75)) == (-2,)


def test_hvx_lanes(isa):
    u = np.arange(128, dtype=np.uint8)
    v = np.full(128, 1, dtype=np.uint8)
    (d,) = run(isa, "V6_vaddb", u, v)
    assert d.view(np.int8)[127] == -128 and d[5] == 6  # 127 + 1 wraps in a signed byte
    (dd,) = run(isa, "V6_vmpybv", np.full(128, 0xFE, np.uint8), np.full(128, 3, np.uint8))
    assert dd.shape == (256,) and (dd.view(np.int16) == -6).all()  # -2 * 3 in every halfword of both vectors
    (q,) = run(isa, "V6_vandvrt", u, 0x01010101)  # vector -> predicate: bit per byte where (byte & 1)
    assert q.shape == (16,) and q[0] == 0b10101010
