"""SDMA packets: opcodes and field layouts per SDMA IP major version, from the vendor's SDMA packet headers
(sdma_v4_0 / v5_0 / v6_0 pkt_open.h; v7 uses the v6 layouts) through emu.amd.hw.

`packets(version)[PACKET][field]` is a Field (lowest bit, width, dword); field names are the headers'.
"""
from __future__ import annotations

import functools

from emu.amd import hw
from emu.amd.hw.bits import Field

_T = hw.tables()["sdma"]
VERSIONS = tuple(_T)
_C = _T[6]["consts"]
SDMA_OP_NOP, SDMA_OP_COPY, SDMA_OP_WRITE = _C["SDMA_OP_NOP"], _C["SDMA_OP_COPY"], _C["SDMA_OP_WRITE"]
SDMA_OP_INDIRECT, SDMA_OP_FENCE, SDMA_OP_TRAP = _C["SDMA_OP_INDIRECT"], _C["SDMA_OP_FENCE"], _C["SDMA_OP_TRAP"]
SDMA_OP_POLL_REGMEM, SDMA_OP_CONST_FILL = _C["SDMA_OP_POLL_REGMEM"], _C["SDMA_OP_CONST_FILL"]
SDMA_OP_TIMESTAMP, SDMA_OP_GCR = _C["SDMA_OP_TIMESTAMP"], _C["SDMA_OP_GCR"]
SDMA_SUBOP_COPY_LINEAR = _C["SDMA_SUBOP_COPY_LINEAR"]
SDMA_SUBOP_TIMESTAMP_GET_GLOBAL = _C["SDMA_SUBOP_TIMESTAMP_GET_GLOBAL"]


@functools.cache
def packets(version: int) -> dict[str, dict[str, Field]]:
    """Every packet's fields on SDMA IP major `version` (4 to 7)."""
    if version not in _T:
        raise ValueError(f"SDMA v{version}: the vendor headers describe v{', v'.join(map(str, VERSIONS))}")
    return {pkt: {name: Field(*f) for name, f in fields.items()} for pkt, fields in _T[version]["packets"].items()}


def dwords(version: int, packet: str) -> int:
    """A fixed-size packet's length: one past the last dword the header names for it."""
    return max(f.dw for f in packets(version)[packet].values()) + 1


HEADER_OP, HEADER_SUB_OP = packets(6)["NOP"]["op"], packets(6)["NOP"]["sub_op"]
