"""SDMA (system DMA engine) packets: opcodes, field layouts and encoders.

Facts from the Linux amdgpu SDMA packet headers (sdma_v4_0 / v5_0 / v6_0 pkt_open.h). A packet is dwords, the
header's op in bits 0-7 and sub-op in bits 8-15. `version` arguments are the SDMA IP major version (4 on gfx9,
5 on gfx10, 6 on gfx11, 7 on gfx12, which uses the v6 layouts). The emulator's SDMA engine decodes with these names.
Field names are the headers' (dword given by Field.dw).
"""
from __future__ import annotations

from stack.hcq.bits import Field, hi32, lo32

SDMA_OP_NOP, SDMA_OP_COPY, SDMA_OP_WRITE, SDMA_OP_INDIRECT = 0, 1, 2, 4
SDMA_OP_FENCE, SDMA_OP_TRAP, SDMA_OP_POLL_REGMEM = 5, 6, 8
SDMA_OP_CONST_FILL, SDMA_OP_TIMESTAMP = 11, 13
SDMA_SUBOP_COPY_LINEAR, SDMA_SUBOP_WRITE_LINEAR, SDMA_SUBOP_TIMESTAMP_GET_GLOBAL = 0, 0, 2

HEADER_OP, HEADER_SUB_OP = Field(0, 8), Field(8, 8)


def _addr(dw: int, name: str) -> dict[str, Field]:
    return {f"{name}_31_0": Field(0, 32, dw), f"{name}_63_32": Field(0, 32, dw + 1)}


# packet -> field -> Field; fixed-size packets' lengths in PACKET_DWORDS
COPY_LINEAR = {"count": Field(0, 30, 1), "dst_sw": Field(16, 2, 2), "src_sw": Field(24, 2, 2),
               **_addr(3, "src_addr"), **_addr(5, "dst_addr")}
WRITE_UNTILED = {**_addr(1, "dst_addr"), "count": Field(0, 20, 3), "sw": Field(24, 2, 3), "data0": Field(0, 32, 4)}
INDIRECT = {"vmid": Field(16, 4), **_addr(1, "ib_base"), "ib_size": Field(0, 20, 3), **_addr(4, "csa_addr")}
FENCE = {"mtype": Field(16, 3), **_addr(1, "addr"), "data": Field(0, 32, 3)}  # mtype: v5+
TRAP = {"int_context": Field(0, 28, 1)}
POLL_REGMEM = {"hdp_flush": Field(26), "func": Field(28, 3), "mem_poll": Field(31), **_addr(1, "addr"),
               "value": Field(0, 32, 3), "mask": Field(0, 32, 4), "interval": Field(0, 16, 5),
               "retry_count": Field(16, 12, 5)}
CONSTANT_FILL = {"sw": Field(16, 2), "fillsize": Field(30, 2), **_addr(1, "dst_addr"),
                 "src_data_31_0": Field(0, 32, 3), "count": Field(0, 30, 4)}
TIMESTAMP_GET_GLOBAL = {"write_addr_31_3": Field(3, 29, 1), "write_addr_63_32": Field(0, 32, 2)}
NOP = {"count": Field(16, 14), "data0": Field(0, 32, 1)}
PACKETS = {"COPY_LINEAR": COPY_LINEAR, "WRITE_UNTILED": WRITE_UNTILED, "INDIRECT": INDIRECT, "FENCE": FENCE,
           "TRAP": TRAP, "POLL_REGMEM": POLL_REGMEM, "CONSTANT_FILL": CONSTANT_FILL,
           "TIMESTAMP_GET_GLOBAL": TIMESTAMP_GET_GLOBAL, "NOP": NOP}
PACKET_DWORDS = {"COPY_LINEAR": 7, "INDIRECT": 6, "FENCE": 4, "TRAP": 2, "POLL_REGMEM": 6, "CONSTANT_FILL": 5,
                 "TIMESTAMP_GET_GLOBAL": 3}  # WRITE_UNTILED: 4 + count + 1; NOP: 1 + header count


def count_bits(version: int) -> int:
    """Width of COPY_LINEAR's and CONSTANT_FILL's byte count (count = bytes - 1): 22 bits before SDMA v6."""
    return 30 if version >= 6 else 22


def max_copy_bytes(version: int) -> int:
    return 1 << count_bits(version)


POLL_FUNC_ALWAYS, POLL_FUNC_LT, POLL_FUNC_LE, POLL_FUNC_EQ, POLL_FUNC_NE, POLL_FUNC_GE, POLL_FUNC_GT = range(7)
FENCE_MTYPE_UC = 3
CONSTANT_FILL_FILLSIZE_DWORD = 2
POLL_INTERVAL, POLL_RETRY_COUNT_INFINITE = 4, 0xFFF


def header(op: int, sub_op: int = 0, extra: int = 0) -> int:
    return HEADER_OP.put(op) | HEADER_SUB_OP.put(sub_op) | extra


def copy_linear(version: int, dst: int, src: int, nbytes: int) -> list[int]:
    """Copy `nbytes` (1..max_copy_bytes(version)) from src to dst."""
    if not 1 <= nbytes <= max_copy_bytes(version):
        raise ValueError(f"SDMA COPY_LINEAR of {nbytes} bytes (1..{max_copy_bytes(version)} on SDMA v{version})")
    return [header(SDMA_OP_COPY, SDMA_SUBOP_COPY_LINEAR), nbytes - 1, 0, lo32(src), hi32(src), lo32(dst), hi32(dst)]


def write_untiled(dst: int, values: list[int]) -> list[int]:
    if not values:
        raise ValueError("SDMA WRITE of no dwords")
    return [header(SDMA_OP_WRITE, SDMA_SUBOP_WRITE_LINEAR), lo32(dst), hi32(dst), len(values) - 1,
            *(lo32(v) for v in values)]


def constant_fill(version: int, dst: int, value: int, nbytes: int) -> list[int]:
    """Fill `nbytes` (a multiple of 4) at dst with the dword `value`."""
    if nbytes <= 0 or nbytes % 4 or nbytes > max_copy_bytes(version):
        raise ValueError(f"SDMA CONSTANT_FILL of {nbytes} bytes (a positive multiple of 4)")
    extra = CONSTANT_FILL["fillsize"].put(CONSTANT_FILL_FILLSIZE_DWORD)
    return [header(SDMA_OP_CONST_FILL, 0, extra), lo32(dst), hi32(dst), lo32(value), nbytes - 1]


def fence(version: int, addr: int, value: int) -> list[int]:
    """Write the dword `value` to addr (uncached on v5+)."""
    extra = FENCE["mtype"].put(FENCE_MTYPE_UC) if version >= 5 else 0
    return [header(SDMA_OP_FENCE, 0, extra), lo32(addr), hi32(addr), lo32(value)]


def trap(int_context: int) -> list[int]:
    """Raise an interrupt carrying `int_context` (the KFD event id)."""
    return [header(SDMA_OP_TRAP), TRAP["int_context"].put(int_context)]


def poll_regmem(addr: int, value: int, func: int = POLL_FUNC_GE, mask: int = 0xFFFFFFFF) -> list[int]:
    """Wait until (dword at addr & mask) <func> value."""
    extra = POLL_REGMEM["func"].put(func) | POLL_REGMEM["mem_poll"].put(1)
    return [header(SDMA_OP_POLL_REGMEM, 0, extra), lo32(addr), hi32(addr), lo32(value), mask,
            POLL_REGMEM["interval"].put(POLL_INTERVAL) | POLL_REGMEM["retry_count"].put(POLL_RETRY_COUNT_INFINITE)]


def timestamp(addr: int) -> list[int]:
    """Write the 64-bit global timestamp to addr (8-byte aligned)."""
    if addr & 7:
        raise ValueError(f"SDMA TIMESTAMP address {addr:#x} is not 8-byte aligned")
    return [header(SDMA_OP_TIMESTAMP, SDMA_SUBOP_TIMESTAMP_GET_GLOBAL), lo32(addr), hi32(addr)]


def indirect(addr: int, ndwords: int) -> list[int]:
    return [header(SDMA_OP_INDIRECT), lo32(addr), hi32(addr), INDIRECT["ib_size"].put(ndwords), 0, 0]


def nops(ndwords: int) -> list[int]:
    """`ndwords` single-dword NOPs (ring padding)."""
    return [header(SDMA_OP_NOP)] * ndwords
