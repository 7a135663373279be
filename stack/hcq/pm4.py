"""PM4 type-3 packets of the compute command processor (MEC) and the compute registers they program.

Facts from the Linux amdgpu headers (nvd.h for gfx10+, soc15d.h for gfx9) and the gc register headers. Register
numbers here are absolute dword addresses (the gc header's offset plus the GC segment-0 base), as SET_SH_REG and
SET_UCONFIG_REG count them. `gfx` arguments are the gfx major version: 9 (soc15 headers: gfx90a/gfx942), 10, 11, 12.
The emulator's command processor decodes with these same names, so each number is defined once, here.
"""
from __future__ import annotations

from stack.hcq.bits import Field, hi32, lo32

# -- type-3 header: PACKET3(op, n) with n = body dwords - 1 ----------------------------------------------------------
PACKET_TYPE3 = 3
HEADER_TYPE, HEADER_COUNT, HEADER_OPCODE = Field(30, 2), Field(16, 14), Field(8, 8)
HEADER_SHADER_TYPE = Field(1)  # 1: compute (PACKET3_COMPUTE)
MAX_BODY_DWORDS = 1 << 14

PACKET3_NOP = 0x10
PACKET3_DISPATCH_DIRECT = 0x15
PACKET3_DISPATCH_INDIRECT = 0x16
PACKET3_PRED_EXEC = 0x23
PACKET3_WRITE_DATA = 0x37
PACKET3_WAIT_REG_MEM = 0x3C
PACKET3_INDIRECT_BUFFER = 0x3F
PACKET3_COPY_DATA = 0x40
PACKET3_EVENT_WRITE = 0x46
PACKET3_RELEASE_MEM = 0x49
PACKET3_ACQUIRE_MEM = 0x58
PACKET3_SET_SH_REG = 0x76
PACKET3_SET_UCONFIG_REG = 0x79

PACKET3_SET_SH_REG_START, PACKET3_SET_SH_REG_END = 0x2C00, 0x3000
PACKET3_SET_UCONFIG_REG_START, PACKET3_SET_UCONFIG_REG_END = 0xC000, 0xC400

# -- compute registers (SH space) --------------------------------------------------------------------------------------
COMPUTE_DISPATCH_INITIATOR = 0x2E00
COMPUTE_DIM_X, COMPUTE_DIM_Y, COMPUTE_DIM_Z = 0x2E01, 0x2E02, 0x2E03
COMPUTE_START_X, COMPUTE_START_Y, COMPUTE_START_Z = 0x2E04, 0x2E05, 0x2E06
COMPUTE_NUM_THREAD_X, COMPUTE_NUM_THREAD_Y, COMPUTE_NUM_THREAD_Z = 0x2E07, 0x2E08, 0x2E09
COMPUTE_PIPELINESTAT_ENABLE, COMPUTE_PERFCOUNT_ENABLE = 0x2E0A, 0x2E0B
COMPUTE_PGM_LO, COMPUTE_PGM_HI = 0x2E0C, 0x2E0D
COMPUTE_DISPATCH_SCRATCH_BASE_LO, COMPUTE_DISPATCH_SCRATCH_BASE_HI = 0x2E10, 0x2E11
COMPUTE_PGM_RSRC1, COMPUTE_PGM_RSRC2 = 0x2E12, 0x2E13
COMPUTE_RESOURCE_LIMITS = 0x2E15
COMPUTE_TMPRING_SIZE = 0x2E18
COMPUTE_RESTART_X, COMPUTE_RESTART_Y, COMPUTE_RESTART_Z = 0x2E1B, 0x2E1C, 0x2E1D
COMPUTE_PGM_RSRC3_GFX9, COMPUTE_PGM_RSRC3 = 0x2E2D, 0x2E28  # gfx9 (gc 9.4.x) / gfx10+
COMPUTE_USER_DATA_0 = 0x2E40
NUM_USER_DATA = 16


def compute_pgm_rsrc3(gfx: int) -> int:
    return COMPUTE_PGM_RSRC3_GFX9 if gfx == 9 else COMPUTE_PGM_RSRC3


# register fields
DISPATCH_INITIATOR_COMPUTE_SHADER_EN = Field(0)
DISPATCH_INITIATOR_PARTIAL_TG_EN = Field(1)
DISPATCH_INITIATOR_FORCE_START_AT_000 = Field(2)
DISPATCH_INITIATOR_USE_THREAD_DIMENSIONS = Field(5)
DISPATCH_INITIATOR_CS_W32_EN = Field(15)  # gfx10+
NUM_THREAD_FULL, NUM_THREAD_PARTIAL = Field(0, 16), Field(16, 16)  # gfx12: FULL is bits 0-12
PGM_RSRC1_PRIV = Field(20)
PGM_RSRC2_SCRATCH_EN, PGM_RSRC2_USER_SGPR = Field(0), Field(1, 5)
PGM_RSRC2_TGID_X_EN, PGM_RSRC2_TGID_Y_EN, PGM_RSRC2_TGID_Z_EN = Field(7), Field(8), Field(9)
PGM_RSRC2_TG_SIZE_EN, PGM_RSRC2_TIDIG_COMP_CNT, PGM_RSRC2_LDS_SIZE = Field(10), Field(11, 2), Field(15, 9)
RESOURCE_LIMITS_WAVES_PER_SH = Field(0, 10)
TMPRING_SIZE_WAVES = Field(0, 12)
TMPRING_SIZE_WAVESIZE = {9: Field(12, 13), 10: Field(12, 15), 11: Field(12, 15), 12: Field(12, 18)}
LDS_SIZE_GRANULE = 512  # bytes per PGM_RSRC2.LDS_SIZE unit (128 dwords, gfx7 to gfx12)
SCRATCH_WAVESIZE_GRANULE = {9: 1024, 10: 256, 11: 256, 12: 256}  # bytes per TMPRING_SIZE.WAVESIZE unit
SCRATCH_BASE_SHIFT = 8  # COMPUTE_DISPATCH_SCRATCH_BASE and COMPUTE_PGM_LO hold address >> 8
PGM_ADDRESS_SHIFT = 8

# -- packet bodies ----------------------------------------------------------------------------------------------------
# WAIT_REG_MEM: [control, addr_lo | reg0, addr_hi | reg1, reference, mask, poll_interval]
WAIT_REG_MEM_FUNCTION, WAIT_REG_MEM_MEM_SPACE = Field(0, 3), Field(4, 2)
WAIT_REG_MEM_OPERATION, WAIT_REG_MEM_ENGINE = Field(6, 2), Field(8, 2)
WAIT_REG_MEM_FUNCTION_ALWAYS, WAIT_REG_MEM_FUNCTION_LT, WAIT_REG_MEM_FUNCTION_LE = 0, 1, 2
WAIT_REG_MEM_FUNCTION_EQ, WAIT_REG_MEM_FUNCTION_NE, WAIT_REG_MEM_FUNCTION_GE, WAIT_REG_MEM_FUNCTION_GT = 3, 4, 5, 6
WAIT_REG_MEM_MEM_SPACE_REGISTER, WAIT_REG_MEM_MEM_SPACE_MEMORY = 0, 1
WAIT_REG_MEM_OPERATION_WAIT, WAIT_REG_MEM_OPERATION_WR_WAIT_WR_REG = 0, 1
WAIT_REG_MEM_POLL_INTERVAL = Field(0, 16)

# ACQUIRE_MEM gfx10+: [coher_cntl, size_lo, size_hi, base_lo, base_hi, poll_interval, gcr_cntl]
# ACQUIRE_MEM gfx9:   [coher_cntl, size_lo, size_hi, base_lo, base_hi, poll_interval]
ACQUIRE_MEM_GCR_CNTL_GLI_INV, ACQUIRE_MEM_GCR_CNTL_GL1_RANGE = Field(0, 2), Field(2, 2)
ACQUIRE_MEM_GCR_CNTL_GLM_WB, ACQUIRE_MEM_GCR_CNTL_GLM_INV = Field(4), Field(5)
ACQUIRE_MEM_GCR_CNTL_GLK_WB, ACQUIRE_MEM_GCR_CNTL_GLK_INV = Field(6), Field(7)
ACQUIRE_MEM_GCR_CNTL_GLV_INV, ACQUIRE_MEM_GCR_CNTL_GL1_INV = Field(8), Field(9)
ACQUIRE_MEM_GCR_CNTL_GL2_US, ACQUIRE_MEM_GCR_CNTL_GL2_RANGE = Field(10), Field(11, 2)
ACQUIRE_MEM_GCR_CNTL_GL2_DISCARD, ACQUIRE_MEM_GCR_CNTL_GL2_INV = Field(13), Field(14)
ACQUIRE_MEM_GCR_CNTL_GL2_WB, ACQUIRE_MEM_GCR_CNTL_SEQ = Field(15), Field(16, 2)
ACQUIRE_MEM_CP_COHER_CNTL_TC_NC_ACTION_ENA, ACQUIRE_MEM_CP_COHER_CNTL_TC_WB_ACTION_ENA = Field(3), Field(18)
ACQUIRE_MEM_CP_COHER_CNTL_TCL1_ACTION_ENA, ACQUIRE_MEM_CP_COHER_CNTL_TC_ACTION_ENA = Field(22), Field(23)
ACQUIRE_MEM_CP_COHER_CNTL_SH_KCACHE_ACTION_ENA = Field(27)
ACQUIRE_MEM_CP_COHER_CNTL_SH_ICACHE_ACTION_ENA = Field(29)
ACQUIRE_MEM_POLL_INTERVAL_GFX9 = 0xA
ACQUIRE_MEM_FULL_SIZE = 0xFFFFFFFF

# RELEASE_MEM: [event_cntl, data_cntl, addr_lo, addr_hi, data_lo, data_hi, int_ctxid]
RELEASE_MEM_EVENT_TYPE, RELEASE_MEM_EVENT_INDEX = Field(0, 6), Field(8, 4)
RELEASE_MEM_GCR_GLM_WB, RELEASE_MEM_GCR_GLM_INV, RELEASE_MEM_GCR_GLV_INV = Field(12), Field(13), Field(14)
RELEASE_MEM_GCR_GL1_INV, RELEASE_MEM_GCR_GL2_US, RELEASE_MEM_GCR_GL2_RANGE = Field(15), Field(16), Field(17)
RELEASE_MEM_GCR_GL2_DISCARD, RELEASE_MEM_GCR_GL2_INV = Field(19), Field(20)
RELEASE_MEM_GCR_GL2_WB, RELEASE_MEM_GCR_SEQ = Field(21), Field(22)
EOP_TC_WB_ACTION_EN, EOP_TC_ACTION_EN = Field(15), Field(17)  # gfx9 cache actions in event_cntl
RELEASE_MEM_CACHE_POLICY, RELEASE_MEM_EXECUTE = Field(25, 2), Field(28)
RELEASE_MEM_DST_SEL, RELEASE_MEM_INT_SEL, RELEASE_MEM_DATA_SEL = Field(16, 2), Field(24, 3), Field(29, 3)
DATA_SEL_NONE, DATA_SEL_SEND_32_BIT_LOW, DATA_SEL_SEND_64_BIT_DATA, DATA_SEL_SEND_GPU_CLOCK_COUNTER = 0, 1, 2, 3
INT_SEL_NONE, INT_SEL_SEND_INTERRUPT_ONLY, INT_SEL_SEND_INTERRUPT_AFTER_WRITE_CONFIRM = 0, 1, 2
DST_SEL_MEMORY_CONTROLLER, DST_SEL_TC_L2 = 0, 1

# EVENT_WRITE: [event_type | event_index << 8]; event types and indices
EVENT_TYPE, EVENT_INDEX = Field(0, 6), Field(8, 4)
CS_PARTIAL_FLUSH, CACHE_FLUSH_AND_INV_TS_EVENT = 7, 20
EVENT_INDEX_CS_PARTIAL_FLUSH, EVENT_INDEX_END_OF_PIPE = 4, 5

# INDIRECT_BUFFER: [base_lo (4-byte aligned), base_hi, control]
INDIRECT_BUFFER_IB_SIZE, INDIRECT_BUFFER_CHAIN = Field(0, 20), Field(20)
INDIRECT_BUFFER_VALID, INDIRECT_BUFFER_VMID = Field(23), Field(24, 4)

# WRITE_DATA: [control, addr_lo, addr_hi, data...]
WRITE_DATA_DST_SEL, WRITE_DATA_ADDR_INCR, WRITE_DATA_WR_CONFIRM = Field(8, 4), Field(16), Field(20)
WRITE_DATA_CACHE_POLICY, WRITE_DATA_ENGINE_SEL = Field(25, 2), Field(30, 2)
WRITE_DATA_DST_SEL_MEMORY = 5

# DISPATCH_DIRECT: [dim_x, dim_y, dim_z, dispatch_initiator]


# -- encoders: each returns the packet's dwords, header first ---------------------------------------------------------
def packet3(opcode: int, body: list[int]) -> list[int]:
    """A type-3 packet: header (count = len(body) - 1) and body."""
    if not 1 <= len(body) <= MAX_BODY_DWORDS:
        raise ValueError(f"PM4 packet {opcode:#x}: body of {len(body)} dwords (1..{MAX_BODY_DWORDS})")
    header = HEADER_TYPE.put(PACKET_TYPE3) | HEADER_COUNT.put(len(body) - 1) | HEADER_OPCODE.put(opcode)
    return [header, *(lo32(d) for d in body)]


def body_dwords(header: int) -> int:
    """Body length of a type-3 packet from its header."""
    return HEADER_COUNT.get(header) + 1


def nop(body: int = 1) -> list[int]:
    return packet3(PACKET3_NOP, [0] * body)


def set_regs(reg: int, *values: int) -> list[int]:
    """SET_SH_REG or SET_UCONFIG_REG (by the register's space) writing consecutive registers from `reg`."""
    if PACKET3_SET_SH_REG_START <= reg and reg + len(values) <= PACKET3_SET_SH_REG_END:
        return packet3(PACKET3_SET_SH_REG, [reg - PACKET3_SET_SH_REG_START, *values])
    if PACKET3_SET_UCONFIG_REG_START <= reg and reg + len(values) <= PACKET3_SET_UCONFIG_REG_END:
        return packet3(PACKET3_SET_UCONFIG_REG, [reg - PACKET3_SET_UCONFIG_REG_START, *values])
    raise ValueError(f"registers {reg:#x}..{reg + len(values) - 1:#x} are in neither the SH nor the UCONFIG space")


def wait_reg_mem(addr: int, ref: int, function: int = WAIT_REG_MEM_FUNCTION_GE, mask: int = 0xFFFFFFFF,
                 poll_interval: int = 4) -> list[int]:
    """Wait until (dword at `addr` & mask) <function> ref (memory space)."""
    control = WAIT_REG_MEM_FUNCTION.put(function) | WAIT_REG_MEM_MEM_SPACE.put(WAIT_REG_MEM_MEM_SPACE_MEMORY)
    return packet3(PACKET3_WAIT_REG_MEM, [control, lo32(addr), hi32(addr), ref, mask, poll_interval])


GCR_CNTL_INVALIDATE = (ACQUIRE_MEM_GCR_CNTL_GLM_WB.put(1) | ACQUIRE_MEM_GCR_CNTL_GLM_INV.put(1)
                       | ACQUIRE_MEM_GCR_CNTL_GLK_WB.put(1) | ACQUIRE_MEM_GCR_CNTL_GLK_INV.put(1)
                       | ACQUIRE_MEM_GCR_CNTL_GLV_INV.put(1) | ACQUIRE_MEM_GCR_CNTL_GL1_INV.put(1))
GCR_CNTL_FULL = (GCR_CNTL_INVALIDATE | ACQUIRE_MEM_GCR_CNTL_GLI_INV.put(1) | ACQUIRE_MEM_GCR_CNTL_GL2_INV.put(1)
                 | ACQUIRE_MEM_GCR_CNTL_GL2_WB.put(1))
CP_COHER_CNTL_FULL = (ACQUIRE_MEM_CP_COHER_CNTL_TC_NC_ACTION_ENA.put(1)
                      | ACQUIRE_MEM_CP_COHER_CNTL_TC_WB_ACTION_ENA.put(1)
                      | ACQUIRE_MEM_CP_COHER_CNTL_TCL1_ACTION_ENA.put(1)
                      | ACQUIRE_MEM_CP_COHER_CNTL_TC_ACTION_ENA.put(1)
                      | ACQUIRE_MEM_CP_COHER_CNTL_SH_KCACHE_ACTION_ENA.put(1)
                      | ACQUIRE_MEM_CP_COHER_CNTL_SH_ICACHE_ACTION_ENA.put(1))


def acquire_mem(gfx: int, gcr_cntl: int = GCR_CNTL_FULL) -> list[int]:
    """Invalidate/write back caches over the whole address range before what follows reads memory."""
    size = [ACQUIRE_MEM_FULL_SIZE, ACQUIRE_MEM_FULL_SIZE, 0, 0]  # size lo/hi, base lo/hi
    if gfx == 9:
        return packet3(PACKET3_ACQUIRE_MEM, [CP_COHER_CNTL_FULL, *size, ACQUIRE_MEM_POLL_INTERVAL_GFX9])
    return packet3(PACKET3_ACQUIRE_MEM, [0, *size, 0, gcr_cntl])


def release_mem(gfx: int, addr: int, value: int, data_sel: int, int_sel: int = INT_SEL_NONE, ctxid: int = 0,
                cache_flush: bool = True) -> list[int]:
    """At end of pipe: optionally flush caches, write `value` (per data_sel) to `addr`, optionally interrupt with
    `ctxid` (the KFD event id on gfx10+; gfx9 interrupts carry no context id)."""
    event = RELEASE_MEM_EVENT_TYPE.put(CACHE_FLUSH_AND_INV_TS_EVENT) | RELEASE_MEM_EVENT_INDEX.put(
        EVENT_INDEX_END_OF_PIPE)
    if cache_flush:
        event |= (EOP_TC_ACTION_EN.put(1) | EOP_TC_WB_ACTION_EN.put(1) if gfx == 9 else
                  RELEASE_MEM_GCR_GLM_WB.put(1) | RELEASE_MEM_GCR_GLM_INV.put(1) | RELEASE_MEM_GCR_GLV_INV.put(1)
                  | RELEASE_MEM_GCR_GL1_INV.put(1) | RELEASE_MEM_GCR_GL2_INV.put(1) | RELEASE_MEM_GCR_GL2_WB.put(1)
                  | RELEASE_MEM_GCR_SEQ.put(1))
    data = RELEASE_MEM_DATA_SEL.put(data_sel) | RELEASE_MEM_INT_SEL.put(int_sel) | RELEASE_MEM_DST_SEL.put(
        DST_SEL_MEMORY_CONTROLLER)
    return packet3(PACKET3_RELEASE_MEM, [event, data, lo32(addr), hi32(addr), lo32(value), hi32(value),
                                         0 if gfx == 9 else ctxid])


def event_write(event_type: int, event_index: int) -> list[int]:
    return packet3(PACKET3_EVENT_WRITE, [EVENT_TYPE.put(event_type) | EVENT_INDEX.put(event_index)])


def indirect_buffer(addr: int, ndwords: int) -> list[int]:
    if addr & 3:
        raise ValueError(f"indirect buffer at {addr:#x} is not 4-byte aligned")
    return packet3(PACKET3_INDIRECT_BUFFER, [lo32(addr), hi32(addr),
                                             INDIRECT_BUFFER_IB_SIZE.put(ndwords) | INDIRECT_BUFFER_VALID.put(1)])


def write_data(addr: int, *values: int) -> list[int]:
    """Write dwords to memory at `addr` (with write confirmation)."""
    control = WRITE_DATA_DST_SEL.put(WRITE_DATA_DST_SEL_MEMORY) | WRITE_DATA_WR_CONFIRM.put(1)
    return packet3(PACKET3_WRITE_DATA, [control, lo32(addr), hi32(addr), *values])


def dispatch_initiator(gfx: int, wave32: bool) -> int:
    v = DISPATCH_INITIATOR_COMPUTE_SHADER_EN.put(1) | DISPATCH_INITIATOR_FORCE_START_AT_000.put(1)
    return v | (DISPATCH_INITIATOR_CS_W32_EN.put(1) if wave32 and gfx >= 10 else 0)


def dispatch_direct(groups: tuple[int, int, int], initiator: int) -> list[int]:
    """Launch groups[0] x groups[1] x groups[2] workgroups with the registers set so far."""
    return packet3(PACKET3_DISPATCH_DIRECT, [*groups, initiator])
