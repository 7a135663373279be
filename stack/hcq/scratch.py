"""Scratch (private segment) backing: how big, and what COMPUTE_TMPRING_SIZE says about it.

The CP gives each wave a slot of WAVESIZE units in the buffer at COMPUTE_DISPATCH_SCRATCH_BASE, with at most WAVES
slots in use per shader engine; sized for every scratch slot of every CU (max_slots_scratch_cu per CU), with 64
lanes per wave whatever the wave size.
"""
from __future__ import annotations

from dataclasses import dataclass

from stack.hcq import pm4
from stack.hcq.bits import hi32, lo32
from stack.hcq.kfd import Node

LANES = 64
DYNAMIC_STACK = 16384  # bytes per lane given to kernels whose stack size is unknown at compile time


@dataclass(frozen=True)
class ScratchLayout:
    lane_bytes: int  # private bytes per lane, rounded to the granule
    size: int  # bytes of the whole backing buffer (all XCCs)
    waves: int  # TMPRING_SIZE.WAVES
    wavesize: int  # TMPRING_SIZE.WAVESIZE, in granules
    tmpring_size: int  # the COMPUTE_TMPRING_SIZE value


def scratch_layout(private_bytes: int, gfx: int, cu_count: int, se_count: int, slots_per_cu: int,
                   xccs: int = 1) -> ScratchLayout:
    """Scratch for `private_bytes` per lane on a GPU with these counts (KFD topology properties)."""
    if private_bytes < 0:
        raise ValueError(f"private segment size {private_bytes} is negative")
    granule = pm4.SCRATCH_WAVESIZE_GRANULE[gfx]
    lane_bytes = -(-private_bytes // (granule // LANES)) * (granule // LANES)
    per_xcc = lane_bytes * LANES * slots_per_cu * cu_count
    wavesize = -(-LANES * lane_bytes // granule)
    waves = per_xcc // (wavesize * granule) // (1 if gfx == 9 else se_count) if wavesize else 0
    waves = min(waves, cu_count * slots_per_cu * xccs, (1 << pm4.TMPRING_SIZE_WAVES.width) - 1)
    if wavesize >> pm4.TMPRING_SIZE_WAVESIZE[gfx].width:
        raise ValueError(f"a private segment of {private_bytes} bytes per lane is more than COMPUTE_TMPRING_SIZE "
                         f"can describe on gfx{gfx}")
    tmpring = pm4.TMPRING_SIZE_WAVES.put(waves) | pm4.TMPRING_SIZE_WAVESIZE[gfx].put(wavesize)
    return ScratchLayout(lane_bytes, per_xcc * xccs, waves, wavesize, tmpring)


def node_scratch_layout(private_bytes: int, node: Node) -> ScratchLayout:
    return scratch_layout(private_bytes, node.gfx_version[0], node.cu_count, node.se_count,
                          node.props["max_slots_scratch_cu"], node.xccs)


# private segment buffer V# (a buffer resource: base, stride/swizzle, num_records, format word)
SWIZZLE_ENABLE_BIT = 1 << 31
NUM_RECORDS_ALL = 0xFFFFFFFF
# word 3: gfx9: DST_SEL_XYZW = XYZW, NUM_FORMAT UINT, DATA_FORMAT 32, ELEMENT_SIZE 4 B, INDEX_STRIDE 64, ADD_TID
WORD3_GFX9 = 4 | 5 << 3 | 6 << 6 | 7 << 9 | 4 << 12 | 4 << 15 | 1 << 19 | 3 << 21 | 1 << 23
# gfx10+: FORMAT 32_UINT (20), INDEX_STRIDE 32, ADD_TID, OOB_SELECT 2
WORD3_GFX10 = 20 << 12 | 2 << 21 | 1 << 23 | 2 << 28


def private_segment_buffer(gfx: int, base: int) -> tuple[int, int, int, int]:
    """The 4-dword scratch V# a kernel with ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER gets in its first user SGPRs."""
    return lo32(base), hi32(base) | SWIZZLE_ENABLE_BIT, NUM_RECORDS_ALL, WORD3_GFX9 if gfx == 9 else WORD3_GFX10
