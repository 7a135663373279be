"""The host runtime's encoders (stack/) against the hardware definitions emu decodes with (emu.amd.hw, from the
vendor headers): two definitions of every field, so a wrong one on either side fails here."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emu.amd.hw import aql as hsa
from emu.amd.hw import kd as ekd
from emu.amd.hw import pm4 as epm4
from emu.amd.hw import sdma as esdma
from objfile import codeobj as scodeobj
from stack.hcq import pm4 as spm4
from stack.hcq import program as sprogram
from stack.hcq import sdma as ssdma

U32, U64 = st.integers(0, (1 << 32) - 1), st.integers(0, (1 << 64) - 1)
GFX = st.sampled_from([9, 11, 12])
SDMA = st.sampled_from([4, 5, 6, 7])


# -- PM4 ---------------------------------------------------------------------------------------------------------------
def test_pm4_constants_agree():
    """Every name both sides define has one value: opcodes, register addresses, fields, selects."""
    shared = [n for n in dir(spm4) if n.isupper() and hasattr(epm4, n)]
    assert len(shared) > 40
    assert {n: getattr(spm4, n) for n in shared} == {n: getattr(epm4, n) for n in shared}


@pytest.mark.parametrize("gfx", [9, 11, 12])
def test_pm4_registers_agree_per_gfx(gfx):
    for name in ("COMPUTE_PGM_LO", "COMPUTE_PGM_RSRC1", "COMPUTE_PGM_RSRC2", "COMPUTE_TMPRING_SIZE",
                 "COMPUTE_USER_DATA_0", "COMPUTE_START_X", "COMPUTE_NUM_THREAD_X", "COMPUTE_RESOURCE_LIMITS",
                 "COMPUTE_DISPATCH_SCRATCH_BASE_LO", "COMPUTE_RESTART_X"):
        assert epm4.reg(name, gfx) == getattr(spm4, name), name
    assert epm4.reg("COMPUTE_PGM_RSRC3", gfx) == spm4.compute_pgm_rsrc3(gfx)
    assert epm4.TMPRING_SIZE_WAVESIZE[gfx] == spm4.TMPRING_SIZE_WAVESIZE[gfx]


def test_pm4_opcodes_agree_in_both_vendor_headers():
    """gfx9's and gfx10+'s headers number the packets the compute CP runs alike (the CP decodes with one table)."""
    from emu.amd import hw
    soc15 = hw.tables()["pm4"][9]["consts"]
    assert all(soc15["PACKET3_" + n] == v for v, n in epm4.NAMES.items())


@settings(max_examples=60, deadline=None)
@given(gfx=GFX, addr=U64, value=U64, data_sel=st.sampled_from([0, 1, 2, 3]), int_sel=st.sampled_from([0, 1, 2]),
       ctxid=U32)
def test_release_mem_decodes(gfx, addr, value, data_sel, int_sel, ctxid):
    pkt = spm4.release_mem(gfx, addr, value, data_sel, int_sel, ctxid)
    h, body = pkt[0], pkt[1:]
    assert epm4.HEADER_TYPE.get(h) == epm4.PACKET_TYPE3 and epm4.HEADER_OPCODE.get(h) == epm4.PACKET3_RELEASE_MEM
    assert epm4.body_dwords(h) == len(body)
    assert epm4.RELEASE_MEM_DATA_SEL.get(body[1]) == data_sel and epm4.RELEASE_MEM_INT_SEL.get(body[1]) == int_sel
    assert body[2] | body[3] << 32 == addr and body[4] | body[5] << 32 == value


@settings(max_examples=60, deadline=None)
@given(addr=U64.map(lambda a: a & ~3), n=st.integers(0, (1 << 20) - 1))
def test_indirect_buffer_decodes(addr, n):
    h, lo, hi, ctl = spm4.indirect_buffer(addr, n)
    assert epm4.HEADER_OPCODE.get(h) == epm4.PACKET3_INDIRECT_BUFFER
    assert lo | hi << 32 == addr and epm4.INDIRECT_BUFFER_IB_SIZE.get(ctl) == n
    assert epm4.INDIRECT_BUFFER_VALID.get(ctl) == 1 and epm4.INDIRECT_BUFFER_CHAIN.get(ctl) == 0


@settings(max_examples=60, deadline=None)
@given(addr=U64, ref=U32, func=st.integers(0, 6), mask=U32)
def test_wait_reg_mem_decodes(addr, ref, func, mask):
    h, ctl, lo, hi, r, m, _ = spm4.wait_reg_mem(addr, ref, func, mask)
    assert epm4.HEADER_OPCODE.get(h) == epm4.PACKET3_WAIT_REG_MEM
    assert epm4.WAIT_REG_MEM_FUNCTION.get(ctl) == func
    assert epm4.WAIT_REG_MEM_MEM_SPACE.get(ctl) == epm4.WAIT_REG_MEM_MEM_SPACE_MEMORY
    assert (lo | hi << 32, r, m) == (addr, ref, mask)


@settings(max_examples=40, deadline=None)
@given(addr=U64, values=st.lists(U32, min_size=1, max_size=8))
def test_write_data_decodes(addr, values):
    h, ctl, lo, hi, *data = spm4.write_data(addr, *values)
    assert epm4.HEADER_OPCODE.get(h) == epm4.PACKET3_WRITE_DATA
    assert epm4.WRITE_DATA_DST_SEL.get(ctl) == epm4.WRITE_DATA_DST_SEL_MEMORY
    assert epm4.WRITE_DATA_ADDR_INCR.get(ctl) == 0 and (lo | hi << 32, data) == (addr, values)


@settings(max_examples=40, deadline=None)
@given(gfx=GFX, wave32=st.booleans(), groups=st.tuples(U32, U32, U32))
def test_dispatch_direct_decodes(gfx, wave32, groups):
    h, *body = spm4.dispatch_direct(groups, spm4.dispatch_initiator(gfx, wave32))
    assert epm4.HEADER_OPCODE.get(h) == epm4.PACKET3_DISPATCH_DIRECT and tuple(body[:3]) == groups
    assert epm4.DISPATCH_INITIATOR_COMPUTE_SHADER_EN.get(body[3]) == 1
    assert epm4.DISPATCH_INITIATOR_CS_W32_EN.get(body[3]) == (wave32 and gfx >= 10)


@settings(max_examples=40, deadline=None)
@given(base=st.sampled_from([spm4.COMPUTE_PGM_LO, spm4.COMPUTE_USER_DATA_0, spm4.COMPUTE_TMPRING_SIZE]),
       values=st.lists(U32, min_size=1, max_size=4))
def test_set_sh_reg_decodes(base, values):
    h, off, *data = spm4.set_regs(base, *values)
    assert epm4.HEADER_OPCODE.get(h) == epm4.PACKET3_SET_SH_REG
    assert epm4.PACKET3_SET_SH_REG_START + off == base and data == values


# -- SDMA --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", [4, 5, 6, 7])
def test_sdma_layouts_agree(version):
    """Every field stack encodes lies where the vendor's header of that SDMA version puts it (the byte count's width
    is the version's: stack masks it with count_bits)."""
    p = esdma.packets(version)
    for name, fields in ssdma.PACKETS.items():
        for f, field in fields.items():
            if f == "mtype" and version < 5:
                continue  # FENCE's mtype is v5+ (stack sets it only there)
            mine = p[name][f]
            if f == "count" and name in ("COPY_LINEAR", "CONSTANT_FILL"):
                assert mine.width == ssdma.count_bits(version) and (mine.lo, mine.dw) == (field.lo, field.dw)
            else:
                assert mine == field, (name, f)
    for name, n in ssdma.PACKET_DWORDS.items():
        assert esdma.dwords(version, name) == n, name
    for op in ("NOP", "COPY", "WRITE", "INDIRECT", "FENCE", "TRAP", "POLL_REGMEM", "CONST_FILL", "TIMESTAMP"):
        assert getattr(esdma, f"SDMA_OP_{op}") == getattr(ssdma, f"SDMA_OP_{op}")


@settings(max_examples=60, deadline=None)
@given(version=SDMA, dst=U64, src=U64, n=st.integers(1, 1 << 22))
def test_sdma_copy_decodes(version, dst, src, n):
    pkt = ssdma.copy_linear(version, dst, src, n)
    p = esdma.packets(version)["COPY_LINEAR"]

    def get(f):
        return p[f].get(pkt[p[f].dw])
    assert esdma.HEADER_OP.get(pkt[0]) == esdma.SDMA_OP_COPY and len(pkt) == esdma.dwords(version, "COPY_LINEAR")
    assert get("count") + 1 == n
    assert get("src_addr_31_0") | get("src_addr_63_32") << 32 == src
    assert get("dst_addr_31_0") | get("dst_addr_63_32") << 32 == dst


@settings(max_examples=60, deadline=None)
@given(version=SDMA, addr=U64, value=U32, ctx=st.integers(0, (1 << 28) - 1))
def test_sdma_fence_and_trap_decode(version, addr, value, ctx):
    pkt = ssdma.fence(version, addr, value)
    p = esdma.packets(version)["FENCE"]
    assert p["addr_31_0"].get(pkt[1]) | p["addr_63_32"].get(pkt[2]) << 32 == addr and p["data"].get(pkt[3]) == value
    t = ssdma.trap(ctx)
    assert esdma.packets(version)["TRAP"]["int_context"].get(t[1]) == ctx


# -- kernel descriptor and AQL -------------------------------------------------------------------------------------
@settings(max_examples=100, deadline=None)
@given(words=st.tuples(U32, U32, U32, st.integers(-(1 << 63), (1 << 63) - 1), U32, U32, U32,
                       st.integers(0, 0xFFFF), st.integers(0, 0xFFFF)),
       arch=st.sampled_from(["gfx90a", "gfx942", "gfx1100", "gfx1201"]))
def test_kernel_descriptor_parses_alike(words, arch):
    group, private, kernarg, entry, r3, r1, r2, props, preload = words
    data = struct.pack("<IIIIqxxxxxxxxxxxxxxxxxxxxIIIHHxxxx", group, private, kernarg, 0, entry, r3, r1, r2, props,
                       preload)
    mine, theirs = ekd.KernelDescriptor.parse(data), scodeobj.KernelDescriptor.parse(data, arch)
    for f in ("group_segment_fixed_size", "private_segment_fixed_size", "kernarg_size",
              "kernel_code_entry_byte_offset", "wave32"):
        assert getattr(mine, f) == getattr(theirs, f), f
    for reg in ("rsrc1", "rsrc2", "code_properties", "kernarg_preload"):
        m, t = getattr(mine, reg), getattr(theirs, reg)
        assert m.value == t.value
        for name in type(m).FIELDS:
            if hasattr(t, name):
                assert getattr(m, name) == getattr(t, name), (reg, name)


@settings(max_examples=100, deadline=None)
@given(props=st.integers(0, 0x7F), preload=st.integers(0, 0xFFFF), ka=U64, dp=U64, qp=U64, did=U64, flat=U64,
       private=U32, vsharp=st.tuples(U32, U32, U32, U32), kernargs=st.binary(min_size=0, max_size=64))
def test_initial_sgprs_agree_with_the_runtime(props, preload, ka, dp, qp, did, flat, private, vsharp, kernargs):
    """The packet processor's initial SGPRs (emu.amd.aql.user_sgprs) are what the runtime's PM4 path writes into
    COMPUTE_USER_DATA (stack.hcq.program.user_sgprs), for every enable combination and preload."""
    from emu.amd.aql import user_sgprs
    from emu.amd.queue import CPError
    data = struct.pack("<IIIIq20xIIIHH4x", 0, private, 0, 0, 0, 0, 0, 0, props, preload)
    theirs_kd = scodeobj.KernelDescriptor.parse(data, "gfx942")
    try:
        theirs = sprogram.user_sgprs(theirs_kd, ka, dp, qp, did, vsharp, flat, private, kernargs)
    except ValueError:
        theirs = None
    try:
        mine = user_sgprs(ekd.KernelDescriptor.parse(data), kernarg=ka, dispatch_ptr=dp, queue_ptr=qp,
                          dispatch_id=did, scratch_vsharp=vsharp, flat_scratch=flat, kernargs=kernargs)
    except CPError:
        mine = None
    assert mine == (None if theirs is None else tuple(theirs))


def test_aql_offsets_agree_with_the_runtime():
    assert hsa.DISPATCH["kernel_object"] == 32 and hsa.DISPATCH["kernarg_address"] == 40
    pkt = sprogram.dispatch_packet((2, 3, 4), (5, 6, 7), 3, 16, 32, 0x1234, 0x5678)
    header, setup = struct.unpack_from("<HH", pkt, hsa.DISPATCH["header"])
    assert header & ((1 << hsa.HEADER_TYPE_WIDTH) - 1) == hsa.TYPE_KERNEL_DISPATCH and setup == 3
    assert struct.unpack_from("<Q", pkt, hsa.DISPATCH["kernel_object"])[0] == 0x1234
    assert struct.unpack_from("<Q", pkt, hsa.DISPATCH["kernarg_address"])[0] == 0x5678
    assert struct.unpack_from("<I", pkt, hsa.DISPATCH["grid_size_z"])[0] == 4 * 7
    assert struct.unpack_from("<H", pkt, hsa.DISPATCH["workgroup_size_y"])[0] == 6
    assert len(pkt) == hsa.PACKET_BYTES


# -- untrusted input: descriptor bytes from GPU memory -------------------------------------------------------------
@settings(max_examples=100, deadline=None)
@given(data=st.binary(min_size=0, max_size=128))
def test_descriptor_bytes_of_any_length(data):
    """Any bytes: a descriptor, or a DescriptorError naming where and the length; never another exception."""
    if len(data) == ekd.SIZE:
        assert ekd.KernelDescriptor.parse(data, "kd at 0x1000").kernarg_size == struct.unpack_from("<I", data, 8)[0]
    else:
        with pytest.raises(ekd.DescriptorError, match=f"kd at 0x1000: {len(data)} bytes"):
            ekd.KernelDescriptor.parse(data, "kd at 0x1000")


def test_too_many_user_sgprs_is_a_cp_error():
    from emu.amd.aql import user_sgprs
    from emu.amd.queue import CPError
    data = struct.pack("<IIIIq20xIIIHH4x", 0, 0, 0, 0, 0, 0, 0, 0, 0x7F, 16)  # 16 SGPRs enabled + 16 preloaded
    with pytest.raises(CPError, match="do not fit the 16 COMPUTE_USER_DATA"):
        user_sgprs(ekd.KernelDescriptor.parse(data), kernarg=0, dispatch_ptr=0, queue_ptr=0, dispatch_id=0,
                   kernargs=bytes(256))
    with pytest.raises(CPError, match="no kernargs were given"):
        user_sgprs(ekd.KernelDescriptor.parse(data), kernarg=0, dispatch_ptr=0, queue_ptr=0, dispatch_id=0)


# -- KFD ioctl interface ---------------------------------------------------------------------------------------------
def test_kfd_ioctls_agree_with_the_runtime():
    """Request numbers, directions, argument sizes and every field offset of the commands the driver serves."""
    import ctypes

    from emu.amd.hw import kfd as ekfd
    from stack.hcq import kfd_ioctl as skfd
    assert ekfd.REQUEST == skfd.REQUEST
    assert set(ekfd.IOCTLS) == set(skfd.IOCTLS)
    for nr, (name, direction, theirs) in skfd.IOCTLS.items():
        ename, edirection, mine = ekfd.IOCTLS[nr]
        assert (ename, edirection, ctypes.sizeof(mine)) == (name, direction, ctypes.sizeof(theirs))
        for field, *_ in theirs._fields_:
            if field not in getattr(theirs, "_anonymous_", ()):
                assert getattr(mine, field).offset == getattr(theirs, field).offset, (name, field)
    for name in ("EventData", "MemoryExceptionData", "HwExceptionData", "ProcessDeviceApertures", "WaitEvents",
                 "EventId"):
        assert ctypes.sizeof(getattr(ekfd, name)) == ctypes.sizeof(getattr(skfd, name)), name
    shared = [n for n in dir(skfd) if n.isupper() and hasattr(ekfd, n) and n not in ("IOCTLS", "REQUEST")]
    assert {n: getattr(ekfd, n) for n in shared} == {n: getattr(skfd, n) for n in shared}


@settings(max_examples=50, deadline=None)
@given(data=st.binary(min_size=48, max_size=48))
def test_kfd_event_data_decodes_alike(data):
    from emu.amd.hw import kfd as ekfd
    from stack.hcq import kfd_ioctl as skfd
    mine, theirs = ekfd.EventData.from_buffer_copy(data), skfd.EventData.from_buffer_copy(data)
    assert (mine.event_id, mine.kfd_event_data_ext) == (theirs.event_id, theirs.kfd_event_data_ext)
    assert mine.memory_exception_data.va == theirs.memory_exception_data.va
    assert mine.hw_exception_data.gpu_id == theirs.hw_exception_data.gpu_id


# -- launch limits -----------------------------------------------------------------------------------------------------
def test_launch_limits_agree_with_the_runtime():
    """The emulator's limits (emu.amd.limits) are the figures the runtime checks launches against."""
    from emu.amd import limits, target
    for name in ("MAX_CODE_OBJECT", "MAX_KERNARG_SEGMENT", "MAX_WORKGROUP_SIZE", "MAX_GRID_ITEMS", "MAX_BUFFER"):
        assert getattr(limits, name) == getattr(scodeobj, name), name
    from stack.hcq.scratch import DYNAMIC_STACK
    assert limits.DYNAMIC_STACK == DYNAMIC_STACK
    for arch in target.TARGETS:
        assert limits.max_lds(arch) == scodeobj.max_lds(arch), arch
        assert limits.max_wave_scratch(arch) == scodeobj.max_wave_scratch(arch), arch


@settings(max_examples=100, deadline=None)
@given(value=st.integers(-(1 << 40), 1 << 40), limit=st.integers(0, 1 << 33))
def test_check_limit_words_alike(value, limit):
    from emu.amd import limits

    def outcome(fn, error):
        try:
            fn("where", "field", value, limit)
        except error as e:
            return str(e)
        return None
    assert outcome(limits.check_limit, limits.LimitError) == outcome(scodeobj.check_limit, scodeobj.LimitError)
