"""stack's host-side logic without a device: the DEV grammar, scratch sizing, context-save sizing, user SGPRs and
the PM4 dispatch sequence (decoded back from the packets)."""
from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from objfile.codeobj import CodeProperties, KernargPreload, KernelDescriptor, Rsrc1, Rsrc2, Rsrc3Gfx11
from stack import parse_dev
from stack.device import DevSpec
from stack.hcq import pm4
from stack.hcq import program as hp
from stack.hcq.kfd import Node, parse_properties
from stack.hcq.queue import cwsr_sizes
from stack.hcq.scratch import private_segment_buffer, scratch_layout


# -- DEV grammar -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,spec", [
    ("MOCKKFD+AMD", DevSpec("MOCKKFD", None, "AMD", "", None)),
    ("AMD", DevSpec("MOCKKFD", None, "AMD", "", None)),
    ("MOCKKFD+AMD:LLVM:gfx1201", DevSpec("MOCKKFD", None, "AMD", "LLVM", "gfx1201")),
    ("MOCKKFD:0,1+AMD", DevSpec("MOCKKFD", (0, 1), "AMD", "", None)),
    ("MOCKKFD:0-2,5+AMD", DevSpec("MOCKKFD", (0, 1, 2, 5), "AMD", "", None)),
    ("MOCKKFD+AMD::gfx942", DevSpec("MOCKKFD", None, "AMD", "", "gfx942")),
    ("MOCKKFD+AMD:gfx1100", DevSpec("MOCKKFD", None, "AMD", "", "gfx1100")),
    ("MOCKKFD+amd:llvm", DevSpec("MOCKKFD", None, "AMD", "LLVM", None)),
    ("MOCK+AMD", DevSpec("MOCKKFD", None, "AMD", "", None)),
    ("KFD+AMD", DevSpec("KFD", None, "AMD", "", None)),
    ("CPU:LLVM;MOCKKFD:1+AMD::gfx90a", DevSpec("MOCKKFD", (1,), "AMD", "", "gfx90a")),
])
def test_dev_grammar(text, spec):
    assert parse_dev(text) == spec


@pytest.mark.parametrize("text,message", [
    ("", "device ''"), ("MOCKKFD+", "device ''"), ("+AMD", "interface ''"), ("MOCKKFD+NV", "device 'NV'"),
    ("MOCKPCI+AMD", "not supported"), ("FOO+AMD", "unknown interface 'FOO'"), ("MOCKKFD:+AMD", "GPU index ''"),
    ("MOCKKFD:a+AMD", "GPU index 'a'"), ("MOCKKFD:2-1+AMD", "backwards"), ("MOCKKFD:1,1+AMD", "repeat"),
    ("MOCKKFD+AMD:LLVM:gfx1100:x", "too many"), ("MOCKKFD+AMD:CUDA", "renderer 'CUDA'"),
    ("MOCKKFD+AMD::sm_90", "arch 'sm_90'"), ("A+B+AMD", "more than one '+'"), ("CPU;NV", "no AMD target"),
    ("MOCKKFD:999+AMD", "beyond"),
])
def test_dev_grammar_errors(text, message):
    with pytest.raises(ValueError, match=f"DEV .*{re.escape(message)}"):
        parse_dev(text)


@given(st.text(alphabet=st.sampled_from(list("MOCKFDAMPUV+:;,-0123456789gfxLV ") + ["\x00", "é", "١"]), max_size=30)
       | st.text(max_size=30))
def test_dev_grammar_only_value_errors(text):
    try:
        spec = parse_dev(text)
    except ValueError:
        return
    assert spec.device == "AMD" and spec.iface in ("KFD", "MOCKKFD")


def test_dev_grammar_type_error():
    with pytest.raises(TypeError, match="DEV must be a string"):
        parse_dev(1100)


# -- scratch and context-save sizing ---------------------------------------------------------------------------------
MOCK_GFX1100 = "gfx_target_version 110000\nsimd_count 192\nsimd_per_cu 2\narray_count 12\nsimd_arrays_per_engine 2\n" \
               "lds_size_in_kb 64\nmax_slots_scratch_cu 32\nnum_xcc 1\n"


def test_scratch_layout_tinygrad_example():
    """TINYGRAD_CLIENT.md §4.4: gfx1100 with 96 CUs, 6 SEs, 32 slots, 128 bytes per lane: 24 MiB, 0x20200."""
    node = Node(1, 1, parse_properties(MOCK_GFX1100, "properties"))
    assert (node.cu_count, node.se_count) == (96, 6)
    lay = scratch_layout(128, 11, 96, 6, 32)
    assert (lay.size, lay.waves, lay.wavesize, lay.tmpring_size) == (24 << 20, 512, 32, 0x20200)


@given(st.integers(0, 1 << 16), st.sampled_from([9, 10, 11, 12]), st.integers(1, 128), st.integers(1, 8),
       st.integers(1, 40), st.integers(1, 8))
def test_scratch_layout_properties(private, gfx, cus, ses, slots, xccs):
    ses = min(ses, cus)  # every shader engine has CUs
    lay = scratch_layout(private, gfx, cus, ses, slots, xccs)
    granule = pm4.SCRATCH_WAVESIZE_GRANULE[gfx]
    assert lay.lane_bytes >= private and lay.lane_bytes % (granule // 64) == 0
    assert lay.wavesize * granule == 64 * lay.lane_bytes  # a wave's slot holds 64 lanes exactly
    assert pm4.TMPRING_SIZE_WAVES.get(lay.tmpring_size) == lay.waves
    assert pm4.TMPRING_SIZE_WAVESIZE[gfx].get(lay.tmpring_size) == lay.wavesize
    if private:  # the slots the CP may use fit the buffer, on every shader engine
        assert 0 < lay.waves * lay.wavesize * granule * (1 if gfx == 9 else ses) <= lay.size
    else:
        assert lay.size == lay.waves == lay.tmpring_size == 0


def test_scratch_layout_rejects():
    with pytest.raises(ValueError, match="negative"):
        scratch_layout(-1, 11, 1, 1, 1)
    with pytest.raises(ValueError, match="more than COMPUTE_TMPRING_SIZE"):
        scratch_layout(1 << 17, 11, 1, 1, 1)  # 15-bit WAVESIZE of 256-byte units: 128 KiB per lane at most


def test_cwsr_sizes_tinygrad_example():
    """TINYGRAD_CLIENT.md §3.4: the mock gfx1100's ctl_stack_size 40960, context save 46047232, +debug 46145536."""
    ctl, ctx, debug = cwsr_sizes(Node(1, 1, parse_properties(MOCK_GFX1100, "properties")))
    assert (ctl, ctx, ctx + debug) == (40960, 46047232, 46145536)


def test_private_segment_buffer():
    assert private_segment_buffer(11, 0x12_3456_7800) == (0x34567800, 0x12 | 1 << 31, 0xFFFFFFFF, 0x20C14000)
    assert private_segment_buffer(9, 0x1000)[3] != private_segment_buffer(11, 0x1000)[3]


# -- user SGPRs and the dispatch sequence ----------------------------------------------------------------------------
def descriptor(props: int, rsrc2: int = 0, rsrc3: int | None = 0, group: int = 0, arch: str = "gfx1100"):
    return KernelDescriptor(group, 0, 0, 0, Rsrc1.decode(0x40AF0000), Rsrc2.decode(rsrc2),
                            Rsrc3Gfx11.decode(rsrc3) if rsrc3 is not None else None, CodeProperties.decode(props),
                            KernargPreload.decode(0), arch)


VSHARP = (0xA0, 0xA1, 0xA2, 0xA3)


def sgprs(props: int) -> list[int]:
    return hp.user_sgprs(descriptor(props), kernarg=0x11_0000_0040, dispatch_ptr=0x22_0000_0080,
                         queue_ptr=0x33_0000_0100, dispatch_id=0x44_0000_0005, scratch_vsharp=VSHARP,
                         flat_scratch=0x55_0000_0000, private_bytes=0x60)


def test_user_sgprs_amdgpuusage_order():
    """AMDGPUUsage "Initial Kernel Execution State": V#, dispatch ptr, queue ptr, kernarg ptr, dispatch id, flat
    scratch init, private segment size."""
    assert sgprs(0x7F) == [*VSHARP, 0x80, 0x22, 0x100, 0x33, 0x40, 0x11, 5, 0x44, 0, 0x55, 0x60]
    assert sgprs(0x8) == [0x40, 0x11]  # kernarg pointer only (the usual LLVM kernel, 0x408 with wave32)
    assert sgprs(0x2 | 0x8) == [0x80, 0x22, 0x40, 0x11]
    assert sgprs(0x1 | 0x10) == [*VSHARP, 5, 0x44]
    assert sgprs(0) == []


def registers_written(packets: list[list[int]]) -> dict[int, int]:
    """Replay SET_SH_REG packets into a register file."""
    regs = {}
    for p in packets:
        assert pm4.HEADER_TYPE.get(p[0]) == 3 and pm4.body_dwords(p[0]) == len(p) - 1
        if pm4.HEADER_OPCODE.get(p[0]) == pm4.PACKET3_SET_SH_REG:
            for i, v in enumerate(p[2:]):
                regs[pm4.PACKET3_SET_SH_REG_START + p[1] + i] = v
    return regs


@pytest.mark.parametrize("gfx", [9, 11, 12])
def test_dispatch_sequence(gfx):
    """TINYGRAD_CLIENT.md §4.2: the registers one launch programs, then DISPATCH_DIRECT and a CS partial flush."""
    kd = descriptor(0x408, rsrc2=0x9E | 5 << 15, rsrc3=0x3)
    regs = hp.Registers(pgm=0x7F12_3456_7800, rsrc1=kd.rsrc1.value, rsrc2=kd.rsrc2.value, rsrc3=0x3, wave32=True)
    packets = hp.dispatch(gfx, regs, [0x40, 0x11], 0x20200, 0x66_0000_0000, (3, 2, 1), (32, 2, 1))
    ops = [pm4.HEADER_OPCODE.get(p[0]) for p in packets]
    assert ops[0] == pm4.PACKET3_ACQUIRE_MEM and ops[-2:] == [pm4.PACKET3_DISPATCH_DIRECT, pm4.PACKET3_EVENT_WRITE]
    r = registers_written(packets)
    assert (r[pm4.COMPUTE_PGM_LO], r[pm4.COMPUTE_PGM_HI]) == (0x12345678, 0x7F)
    assert r[pm4.compute_pgm_rsrc3(gfx)] == 0x3 and pm4.COMPUTE_PGM_RSRC3 + pm4.COMPUTE_PGM_RSRC3_GFX9 - \
        pm4.compute_pgm_rsrc3(gfx) not in r
    assert (r[pm4.COMPUTE_TMPRING_SIZE], r[pm4.COMPUTE_DISPATCH_SCRATCH_BASE_LO],
            r[pm4.COMPUTE_DISPATCH_SCRATCH_BASE_HI]) == (0x20200, 0x66000000, 0)
    assert [r[pm4.COMPUTE_NUM_THREAD_X + i] for i in range(3)] == [32, 2, 1]
    assert [r[pm4.COMPUTE_START_X + i] for i in range(3)] == [0, 0, 0]
    assert [r[pm4.COMPUTE_USER_DATA_0 + i] for i in range(2)] == [0x40, 0x11]
    assert packets[-2][1:] == [3, 2, 1, 0x8005 if gfx >= 10 else 0x5]
    assert packets[-1][1] == pm4.CS_PARTIAL_FLUSH | pm4.EVENT_INDEX_CS_PARTIAL_FLUSH << 8


def test_kernel_registers_priv_and_lds():
    from objfile.codeobj import Kernel
    kd = descriptor(0x408, rsrc2=0x9E | 3 << 15, group=1000)
    kernel = Kernel("k", "k.kd", 0x1000, kd, 0x1100, b"", (), 0, 0, 32, 0, 0, 0, 1000, 0, 256, False, {})
    r11, r9 = hp.kernel_registers(kernel, 0x10000, 11), hp.kernel_registers(kernel, 0x10000, 9)
    assert r11.pgm == 0x11100 and r11.rsrc1 == 0x40AF0000 | 1 << 20 and r9.rsrc1 == 0x40AF0000
    assert pm4.PGM_RSRC2_LDS_SIZE.get(r11.rsrc2) == 2 and r11.rsrc2 & 0x7FFF == 0x9E  # ceil(1000 / 512)
    with pytest.raises(ValueError, match="256-byte aligned"):
        hp.kernel_registers(kernel, 0x10040, 11)


@pytest.mark.parametrize("bad,exc", [((0,), ValueError), ((1, 2, 3, 4), ValueError), ("2", TypeError),
                                     ((1.5,), TypeError), ((1 << 32,), ValueError), (None, TypeError)])
def test_shape_rejects(bad, exc):
    with pytest.raises(exc, match="global_size"):
        hp.shape(bad, "global_size")


@pytest.mark.parametrize("version,arch", [(110000, "gfx1100"), (120001, "gfx1201"), (90402, "gfx942"),
                                          (90010, "gfx90a"), (110501, "gfx1151"), (90000, "gfx900")])
def test_node_arch_from_gfx_target_version(version, arch):
    assert Node(1, 1, {"gfx_target_version": version}).arch == arch


def test_properties_errors():
    with pytest.raises(ValueError, match="nodes/1/properties: line 'simd_count many'"):
        parse_properties("simd_count 4\nsimd_count many\n", "nodes/1/properties")
