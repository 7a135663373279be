"""The buffer resource descriptor (V#): the four dwords a MUBUF / MTBUF instruction names, read as the hardware reads
them.

Fields (Vega and MI200 ISA manuals, "Buffer Resource"): BASE_ADDRESS word 0 and word 1 [15:0], STRIDE word 1 [29:16],
NUM_RECORDS word 2. The gfx9 layout also has SWIZZLE_ENABLE word 1 [31] and, in word 3, DATA_FORMAT [18:15] (with
ADD_TID_ENABLE it holds STRIDE [17:14]), ELEMENT_SIZE [20:19] (2 << n bytes), INDEX_STRIDE [22:21] (8 << n records)
and ADD_TID_ENABLE [23]. A swizzled buffer interleaves ELEMENT_SIZE-byte elements of INDEX_STRIDE consecutive
indices (with ADD_TID_ENABLE: lanes), which is how a gfx9 runtime gives each lane its private segment. On gfx10+ only
BASE, STRIDE and NUM_RECORDS are read (their swizzled resources are not modelled).
"""
from __future__ import annotations

from dataclasses import dataclass

SWIZZLE_ENABLE = 1 << 31  # word 1


@dataclass(frozen=True)
class BufferResource:
    base: int
    stride: int  # bytes per record
    num_records: int
    swizzle: bool = False
    element_size: int = 4  # bytes
    index_stride: int = 64  # records per interleaved group
    add_tid: bool = False  # the lane's id is added to the index

    @classmethod
    def read(cls, words: tuple[int, int, int, int], swizzle_fields: bool) -> BufferResource:
        """The resource in `words`; `swizzle_fields`: the generation's layout has them (gfx9)."""
        w0, w1, w2, w3 = words
        base, stride = w0 | (w1 & 0xFFFF) << 32, (w1 >> 16) & 0x3FFF
        if not swizzle_fields:
            return cls(base, stride, w2)
        add_tid = bool(w3 >> 23 & 1)
        if add_tid:
            stride |= (w3 >> 15 & 0xF) << 14
        return cls(base, stride, w2, bool(w1 & SWIZZLE_ENABLE), 2 << (w3 >> 19 & 3), 8 << (w3 >> 21 & 3), add_tid)

    def words(self) -> tuple[int, int, int, int]:
        """The gfx9 descriptor of these fields (DATA_FORMAT 32, NUM_FORMAT UINT, DST_SEL XYZW), as a runtime writes
        it."""
        es, ix = self.element_size.bit_length() - 2, self.index_stride.bit_length() - 4
        w3 = 4 | 5 << 3 | 6 << 6 | 7 << 9 | 4 << 12 | (self.stride >> 14 if self.add_tid else 4) << 15 \
            | es << 19 | ix << 21 | self.add_tid << 23
        return (self.base & 0xFFFFFFFF, (self.base >> 32 & 0xFFFF) | (self.stride & 0x3FFF) << 16
                | (SWIZZLE_ENABLE if self.swizzle else 0), self.num_records & 0xFFFFFFFF, w3)


def private_segment(base: int) -> BufferResource:
    """The private segment buffer a gfx9 kernel is given (its first four user SGPRs) for scratch at `base`: every lane's
    dwords interleaved, whole wave by whole wave; the wave's offset comes in the wave offset SGPR."""
    return BufferResource(base, 0, 0xFFFFFFFF, True, 4, 64, True)
