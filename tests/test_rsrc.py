"""Buffer resources (emu.amd.rsrc) and gfx90a's scratch: the private segment buffer's swizzle and FLAT_SCRATCH.

The expected addresses follow the buffer addressing of the Vega and MI200 ISA manuals, written out here on their
own; the instructions are llvm-mc-19's encodings."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_wave import asm

from emu.amd import Wave
from emu.amd.memspace import Scratch
from emu.amd.rsrc import BufferResource, private_segment
from stack.hcq.scratch import private_segment_buffer

needs_mc = pytest.mark.skipif(not shutil.which("llvm-mc-19"), reason="llvm-mc-19 is needed to assemble snippets")
WORD = st.integers(0, 0xFFFFFFFF)


def test_the_runtimes_private_segment_buffer_reads_as_lane_interleaved_dwords():
    """stack's encoder (its own constants) and emu's reader (its own) agree on what the kernel is given."""
    base = 0x7F12_3456_7000
    r = BufferResource.read(private_segment_buffer(9, base), swizzle_fields=True)
    assert (r.base, r.num_records, r.swizzle, r.element_size, r.index_stride, r.add_tid) == \
        (base, 0xFFFFFFFF, True, 4, 64, True)
    assert BufferResource.read(private_segment(base).words(), swizzle_fields=True) == private_segment(base)


@settings(max_examples=200, deadline=None)
@given(st.tuples(WORD, WORD, WORD, WORD), st.booleans())
def test_any_four_dwords_read_as_a_resource(words, swizzle_fields):
    r = BufferResource.read(words, swizzle_fields)
    assert 0 <= r.base < 1 << 48 and r.num_records == words[2]
    assert r.element_size in (2, 4, 8, 16) and r.index_stride in (8, 16, 32, 64)
    assert r.stride < (1 << 18 if r.add_tid else 1 << 14)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, (1 << 48) - 1), st.integers(0, (1 << 14) - 1), WORD, st.booleans(),
       st.sampled_from((2, 4, 8, 16)), st.sampled_from((8, 16, 32, 64)), st.booleans())
def test_a_resource_written_reads_back(base, stride, num, swizzle, es, ix, tid):
    r = BufferResource(base, stride, num, swizzle, es, ix, tid)
    assert BufferResource.read(r.words(), swizzle_fields=True) == r


def _sgprs(w, first: int, words) -> None:
    for i, v in enumerate(words):
        w.sgpr[first + i] = v


def _swizzled(base: int, soffset: int, index: np.ndarray, offset: np.ndarray, stride: int, es: int, ix: int
              ) -> np.ndarray:
    """The manuals' address of byte `offset` of record `index` in a swizzled buffer."""
    return base + soffset + (index // ix * stride + offset // es * es) * ix + index % ix * es + offset % es


@needs_mc
@pytest.mark.parametrize("es,ix", [(4, 64), (8, 16), (16, 32)])
def test_swizzled_stores_land_where_the_manual_says(es, ix):
    w = Wave("gfx90a")
    va = w.vm.alloc(1 << 16)
    w.vm.write(va, np.zeros(1 << 14, np.uint32))
    stride = 128  # bytes per record: groups of index_stride lanes do not overlap
    _sgprs(w, 0, BufferResource(va, stride, 0xFFFFFFFF, True, es, ix, True).words())
    w.sgpr[4] = 256  # soffset: the wave's byte offset
    lane = np.arange(64)
    w.vgpr[1] = 0xA000 + lane
    w.vgpr[2] = (lane % 3) * 4  # per-lane offsets 0, 4, 8
    w.vgpr[4], w.vgpr[5] = 0xB000 + lane, 0xC000 + lane
    w.run(asm("buffer_store_dword v1, v2, s[0:3], s4 offen offset:12\n"
              "buffer_store_dwordx2 v[4:5], v2, s[0:3], s4 offen offset:64\ns_endpgm", "gfx90a"))
    mem = np.frombuffer(w.vm.read(va, 1 << 16), np.uint8)
    off = w.vgpr[2].astype(np.int64)

    def dword(addr):
        return np.array([int.from_bytes(mem[a - va:a - va + 4].tobytes(), "little") for a in addr])
    np.testing.assert_array_equal(dword(_swizzled(va, 256, lane, off + 12, stride, es, ix)), 0xA000 + lane)
    np.testing.assert_array_equal(dword(_swizzled(va, 256, lane, off + 64, stride, es, ix)), 0xB000 + lane)
    np.testing.assert_array_equal(dword(_swizzled(va, 256, lane, off + 68, stride, es, ix)), 0xC000 + lane)
    w.run(asm("buffer_load_dwordx2 v[6:7], v2, s[0:3], s4 offen offset:64\ns_endpgm", "gfx90a"))
    np.testing.assert_array_equal(w.vgpr[6:8], w.vgpr[4:6])


@needs_mc
def test_gfx90a_scratch_instructions_address_flat_scratch():
    """Without architected flat scratch the kernel writes its scratch base to FLAT_SCRATCH; scratch instructions
    interleave each lane's dwords from there."""
    w = Wave("gfx90a")
    va = w.vm.alloc(1 << 16)
    w.vm.write(va, np.zeros(1 << 14, np.uint32))
    w.scratch = Scratch(w.vm, 0, 64, 256, w.sgpr)
    w.sgpr[0], w.sgpr[1] = (va + 0x1000) & 0xFFFFFFFF, (va + 0x1000) >> 32
    w.vgpr[1], w.vgpr[2] = np.arange(64) + 7, 4  # data; each lane's private byte offset
    w.run(asm("s_mov_b32 flat_scratch_lo, s0\ns_mov_b32 flat_scratch_hi, s1\n"
              "scratch_store_dword v2, v1, off offset:8\ns_endpgm", "gfx90a"))
    got = np.frombuffer(w.vm.read(va + 0x1000 + 3 * 64 * 4, 64 * 4), np.uint32)  # dword 3 of every lane
    np.testing.assert_array_equal(got, np.arange(64) + 7)
