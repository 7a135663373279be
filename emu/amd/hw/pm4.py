"""PM4 type-3 packets of the compute command processor (MEC) and the compute registers they program.

Opcodes and packet fields come from the vendor's PM4 headers (soc15d.h for gfx9, nvd.h for gfx10+), register
addresses and fields from the GC register headers (gc 9.4.3 for gfx9, 11.0.0, 12.0.0), all through emu.amd.hw.
Register numbers are absolute dword addresses (the header's offset plus the GC segment-0 base), as SET_SH_REG
and SET_UCONFIG_REG count them. Where the gfx9 and gfx10+ headers differ, the tables are per gfx major.
"""
from __future__ import annotations

from emu.amd import hw
from emu.amd.hw.bits import Field

_T = hw.tables()
_NV, _SOC15 = _T["pm4"][11], _T["pm4"][9]
_C, _M = _NV["consts"], _NV["fields"]


def _field(name: str, width: int | None = None, macros: dict = _M) -> Field:
    lo, w = macros[name]
    if w is None and width is None:
        raise RuntimeError(f"vendor PM4 header: {name} has no width")
    return Field(lo, w if w is not None else width)


def _enum_width(prefix: str) -> int:
    """The width a field needs for its largest enumerated value (the header's enum of the field)."""
    return max(v for k, v in _C.items() if k.startswith(prefix)).bit_length()


# -- type-3 header -----------------------------------------------------------------------------------------------
PACKET_TYPE2, PACKET_TYPE3 = _C["PACKET_TYPE2"], _C["PACKET_TYPE3"]
HEADER_TYPE = _field("CP_PACKET_GET_TYPE")
HEADER_COUNT = _field("CP_PACKET_GET_COUNT")
HEADER_OPCODE = _field("CP_PACKET3_GET_OPCODE")


def body_dwords(header: int) -> int:
    """Body length of a type-3 packet from its header (count + 1)."""
    return HEADER_COUNT.get(header) + 1


# opcodes the compute CP runs (the same numbers in both headers: checked in tests/test_hw_crosscheck.py)
OPCODES = ("NOP", "DISPATCH_DIRECT", "DISPATCH_INDIRECT", "PRED_EXEC", "WRITE_DATA", "WAIT_REG_MEM",
           "INDIRECT_BUFFER", "COPY_DATA", "EVENT_WRITE", "RELEASE_MEM", "ACQUIRE_MEM", "SET_SH_REG",
           "SET_UCONFIG_REG")
NAMES: dict[int, str] = {_C["PACKET3_" + n]: n for n in OPCODES}
PACKET3_NOP = _C["PACKET3_NOP"]
PACKET3_DISPATCH_DIRECT, PACKET3_DISPATCH_INDIRECT = _C["PACKET3_DISPATCH_DIRECT"], _C["PACKET3_DISPATCH_INDIRECT"]
PACKET3_PRED_EXEC, PACKET3_WRITE_DATA = _C["PACKET3_PRED_EXEC"], _C["PACKET3_WRITE_DATA"]
PACKET3_WAIT_REG_MEM, PACKET3_INDIRECT_BUFFER = _C["PACKET3_WAIT_REG_MEM"], _C["PACKET3_INDIRECT_BUFFER"]
PACKET3_COPY_DATA, PACKET3_EVENT_WRITE = _C["PACKET3_COPY_DATA"], _C["PACKET3_EVENT_WRITE"]
PACKET3_RELEASE_MEM, PACKET3_ACQUIRE_MEM = _C["PACKET3_RELEASE_MEM"], _C["PACKET3_ACQUIRE_MEM"]
PACKET3_SET_SH_REG, PACKET3_SET_UCONFIG_REG = _C["PACKET3_SET_SH_REG"], _C["PACKET3_SET_UCONFIG_REG"]
PACKET3_SET_SH_REG_START, PACKET3_SET_SH_REG_END = _C["PACKET3_SET_SH_REG_START"], _C["PACKET3_SET_SH_REG_END"]
PACKET3_SET_UCONFIG_REG_START = _C["PACKET3_SET_UCONFIG_REG_START"]
PACKET3_SET_UCONFIG_REG_END = _SOC15["consts"]["PACKET3_SET_UCONFIG_REG_END"]  # gfx9's (nvd.h has none)


def uconfig_end(gfx: int) -> int:
    """The last register SET_UCONFIG_REG reaches: gfx9's header's end; on gfx10+ all its 16-bit offset field reaches
    (the thread-trace registers lie past gfx9's end)."""
    return PACKET3_SET_UCONFIG_REG_END if gfx == 9 else PACKET3_SET_UCONFIG_REG_START + 0xFFFF

# -- packet bodies -------------------------------------------------------------------------------------------------
WAIT_REG_MEM_FUNCTION = _field("PACKET3_WAIT_REG_MEM__FUNCTION")
WAIT_REG_MEM_MEM_SPACE = _field("PACKET3_WAIT_REG_MEM__MEM_SPACE")
WAIT_REG_MEM_OPERATION = _field("PACKET3_WAIT_REG_MEM__OPERATION")
_F = "PACKET3_WAIT_REG_MEM__FUNCTION__"
WAIT_REG_MEM_FUNCTION_ALWAYS, WAIT_REG_MEM_FUNCTION_LT = _C[_F + "ALWAYS_PASS"], _C[_F + "LESS_THAN_REF_VALUE"]
WAIT_REG_MEM_FUNCTION_LE = _C[_F + "LESS_THAN_EQUAL_TO_THE_REF_VALUE"]
WAIT_REG_MEM_FUNCTION_EQ = _C[_F + "EQUAL_TO_THE_REFERENCE_VALUE"]
WAIT_REG_MEM_FUNCTION_NE = _C[_F + "NOT_EQUAL_REFERENCE_VALUE"]
WAIT_REG_MEM_FUNCTION_GE = _C[_F + "GREATER_THAN_OR_EQUAL_REFERENCE_VALUE"]
WAIT_REG_MEM_FUNCTION_GT = _C[_F + "GREATER_THAN_REFERENCE_VALUE"]
WAIT_REG_MEM_MEM_SPACE_MEMORY = _C["PACKET3_WAIT_REG_MEM__MEM_SPACE__MEMORY_SPACE"]
WAIT_REG_MEM_OPERATION_WR_WAIT_WR_REG = _C["PACKET3_WAIT_REG_MEM__OPERATION__WR_WAIT_WR_REG"]

INDIRECT_BUFFER_IB_SIZE = _field("PACKET3_INDIRECT_BUFFER__IB_SIZE")
INDIRECT_BUFFER_CHAIN = _field("PACKET3_INDIRECT_BUFFER__CHAIN")
INDIRECT_BUFFER_VALID = _field("PACKET3_INDIRECT_BUFFER__VALID")

WRITE_DATA_DST_SEL = _field("PACKET3_WRITE_DATA__DST_SEL")
WRITE_DATA_ADDR_INCR = _field("PACKET3_WRITE_DATA__ADDR_INCR")
WRITE_DATA_DST_SEL_MEMORY = _C["PACKET3_WRITE_DATA__DST_SEL__MEMORY"]

EVENT_WRITE_EVENT_TYPE = _field("PACKET3_EVENT_WRITE__EVENT_TYPE")
EVENTS: dict[int, dict[str, int]] = _T["events"]  # gfx major -> VGT event type numbers the CP acts on

COPY_DATA_SRC_SEL = _field("PACKET3_COPY_DATA__SRC_SEL")
COPY_DATA_DST_SEL = _field("PACKET3_COPY_DATA__DST_SEL")
COPY_DATA_COUNT_SEL = _field("PACKET3_COPY_DATA__COUNT_SEL")

PRED_EXEC_EXEC_COUNT = _field("PACKET3_PRED_EXEC__EXEC_COUNT", macros=_SOC15["fields"])  # gfx9 header names them
PRED_EXEC_DEVICE_SELECT = _field("PACKET3_PRED_EXEC__VIRTUAL_XCC_ID_SELECT", macros=_SOC15["fields"])

# RELEASE_MEM: [event_cntl, data_cntl, addr_lo, addr_hi, data_lo, data_hi, int_ctxid (gfx10+)]; the header's macros
# give the shifts, its enums of the fields the widths
RELEASE_MEM_DATA_SEL = _field("PACKET3_RELEASE_MEM_DATA_SEL", _enum_width("data_sel__mec_release_mem__"))
RELEASE_MEM_INT_SEL = _field("PACKET3_RELEASE_MEM_INT_SEL", _enum_width("int_sel__mec_release_mem__"))
RELEASE_MEM_DST_SEL = _field("PACKET3_RELEASE_MEM_DST_SEL", _enum_width("dst_sel__mec_release_mem__"))
DATA_SEL_NONE = _C["data_sel__mec_release_mem__none"]
DATA_SEL_SEND_32_BIT_LOW = _C["data_sel__mec_release_mem__send_32_bit_low"]
DATA_SEL_SEND_64_BIT_DATA = _C["data_sel__mec_release_mem__send_64_bit_data"]
DATA_SEL_SEND_GPU_CLOCK_COUNTER = _C["data_sel__mec_release_mem__send_gpu_clock_counter"]
INT_SEL_SEND_INTERRUPT_ONLY = _C["int_sel__mec_release_mem__send_interrupt_only"]
INT_SEL_SEND_INTERRUPT_AFTER_WRITE_CONFIRM = _C["int_sel__mec_release_mem__send_interrupt_after_write_confirm"]

# -- compute registers (SH space) and their fields, per gfx major -------------------------------------------------
REGS: dict[int, dict[str, tuple[int, dict[str, Field]]]] = {
    gfx: {name: (addr, {f: Field(lo, w) for f, (lo, w) in fields.items()}) for name, (addr, fields) in regs.items()}
    for gfx, regs in _T["regs"].items()}
_R = REGS[11]


def reg(name: str, gfx: int = 11) -> int:
    """The absolute dword address of compute register `name` (e.g. 'COMPUTE_PGM_LO') on gfx major `gfx`."""
    return REGS[_gfx(gfx)][name][0]


def reg_field(name: str, field: str, gfx: int = 11) -> Field:
    """Field `field` (the header's lower-case name) of compute register `name` on gfx major `gfx`."""
    return REGS[_gfx(gfx)][name][1][field]


def _gfx(gfx: int) -> int:
    return gfx if gfx in REGS else 11  # gfx10 shares gfx11's compute register layout


COMPUTE_DISPATCH_INITIATOR, COMPUTE_NUM_THREAD_X = reg("COMPUTE_DISPATCH_INITIATOR"), reg("COMPUTE_NUM_THREAD_X")
COMPUTE_START_X, COMPUTE_PGM_LO, COMPUTE_PGM_HI = reg("COMPUTE_START_X"), reg("COMPUTE_PGM_LO"), reg("COMPUTE_PGM_HI")
COMPUTE_DISPATCH_SCRATCH_BASE_LO = reg("COMPUTE_DISPATCH_SCRATCH_BASE_LO")
COMPUTE_DISPATCH_SCRATCH_BASE_HI = reg("COMPUTE_DISPATCH_SCRATCH_BASE_HI")
COMPUTE_PGM_RSRC1, COMPUTE_PGM_RSRC2 = reg("COMPUTE_PGM_RSRC1"), reg("COMPUTE_PGM_RSRC2")
COMPUTE_TMPRING_SIZE, COMPUTE_USER_DATA_0 = reg("COMPUTE_TMPRING_SIZE"), reg("COMPUTE_USER_DATA_0")
COMPUTE_THREAD_TRACE_ENABLE = reg("COMPUTE_THREAD_TRACE_ENABLE")
COMPUTE_PERFCOUNT_ENABLE = reg("COMPUTE_PERFCOUNT_ENABLE")
NUM_USER_DATA = sum(1 for n in _R if n.startswith("COMPUTE_USER_DATA_"))
DISPATCH_INITIATOR_COMPUTE_SHADER_EN = reg_field("COMPUTE_DISPATCH_INITIATOR", "compute_shader_en")
DISPATCH_INITIATOR_USE_THREAD_DIMENSIONS = reg_field("COMPUTE_DISPATCH_INITIATOR", "use_thread_dimensions")
DISPATCH_INITIATOR_CS_W32_EN = reg_field("COMPUTE_DISPATCH_INITIATOR", "cs_w32_en")  # gfx10+
NUM_THREAD_FULL = reg_field("COMPUTE_NUM_THREAD_X", "num_thread_full")
TMPRING_SIZE_WAVES = reg_field("COMPUTE_TMPRING_SIZE", "waves")
TMPRING_SIZE_WAVESIZE = {gfx: reg_field("COMPUTE_TMPRING_SIZE", "wavesize", gfx) for gfx in (9, 10, 11, 12)}

# -- units (AMDGPUUsage and the register specifications; no header names them) ------------------------------------
LDS_SIZE_GRANULE = 512  # bytes per PGM_RSRC2.LDS_SIZE unit (128 dwords, gfx7 to gfx12)
SCRATCH_WAVESIZE_GRANULE = {9: 1024, 10: 256, 11: 256, 12: 256}  # bytes per TMPRING_SIZE.WAVESIZE unit
SCRATCH_BASE_SHIFT = 8  # COMPUTE_DISPATCH_SCRATCH_BASE and COMPUTE_PGM_LO hold address >> 8
PGM_ADDRESS_SHIFT = 8
