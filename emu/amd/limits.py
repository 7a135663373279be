"""The emulator's launch limits: every size a packet, a launch or a file gives is checked against one of these
before anything is allocated, and a size beyond one raises `LimitError` (a ValueError) naming the field, its value
and the limit.

  MAX_CODE_OBJECT      256 MiB  a code object file
  MAX_KERNARG_SEGMENT   64 KiB  a kernarg segment (descriptor kernarg_size, raw kernargs)
  max_lds(arch)         64 KiB  LDS per workgroup, fixed + dynamic (the chip's: 160 KiB on gfx950)
  max_wave_scratch(arch)        private memory of one wave: the largest COMPUTE_TMPRING_SIZE.WAVESIZE (its width in
                                the vendor register header times the generation's granule); a work-item's private
                                segment is at most this / wave size
  MAX_WORKGROUP_SIZE    1024    work-items per workgroup
  MAX_GRID_ITEMS        2^32-1  work-items of a dispatch per dimension (the AQL packet's 32-bit grid_size_*) and in all
  MAX_BUFFER            4 GiB   one buffer of the runner API (a buffer resource's NUM_RECORDS is 32 bits)

The figures are the same as the code-object limits (objfile.codeobj) the host runtime checks before it submits;
tests/test_hw_crosscheck.py compares the two.
"""
from __future__ import annotations

import os
import stat
from typing import Protocol

from emu.amd import target
from emu.amd.hw import pm4
from objfile.codeobj import LimitError, check_limit, size_text  # the one message format, shared with the host

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
MAX_CODE_OBJECT = 256 * MIB
MAX_KERNARG_SEGMENT = 64 * KIB
MAX_WORKGROUP_SIZE = 1024
MAX_GRID_ITEMS = (1 << 32) - 1
MAX_BUFFER = 4 * GIB
DYNAMIC_STACK = 16384  # private bytes per lane the runner gives a kernel whose stack size is unknown (as ROCm does)


class FileLimitError(LimitError):
    """A file larger than the limit of what it holds."""


def max_lds(arch: str) -> int:
    """Bytes of LDS one workgroup can allocate on `arch`."""
    return target.get(arch).workgroup_lds_kb * KIB


def max_wave_scratch(arch: str) -> int:
    """Bytes of private memory one wave can have: the largest COMPUTE_TMPRING_SIZE.WAVESIZE in bytes."""
    gfx = target.generation(arch).gfx
    return ((1 << pm4.TMPRING_SIZE_WAVESIZE[gfx].width) - 1) * pm4.SCRATCH_WAVESIZE_GRANULE[gfx]


def read_file(path, limit: int = MAX_CODE_OBJECT, what: str = "a code object") -> bytes:
    """The bytes of the file at `path`; OSError when unreadable, FileLimitError when longer than `limit` (devices
    and pipes included: at most limit + 1 bytes are read, so /dev/zero is refused too)."""
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        big = stat.S_ISREG(st.st_mode) and st.st_size > limit
        data = b"" if big else f.read(limit + 1)
    if big or len(data) > limit:
        raise FileLimitError(f"{path}: larger than the {size_text(limit)} limit of {what}")
    return data


def check_work(where: str, items: int, shape: str, lds: int, lds_field: str, arch: str) -> None:
    """A dispatch's work-items in all (`shape` says how they were given) and its LDS bytes (from `lds_field`)
    against MAX_GRID_ITEMS and max_lds(arch), before anything is allocated."""
    check_limit(where, f"work-items {shape}", items, MAX_GRID_ITEMS)
    check_limit(where, f"LDS bytes ({lds_field})", lds, max_lds(arch))


class _Descriptor(Protocol):
    group_segment_fixed_size: int
    private_segment_fixed_size: int
    wave32: bool


class Kernel(Protocol):
    """What the launch checks read of a kernel of a code object."""
    name: str
    uses_dynamic_stack: bool
    max_flat_workgroup_size: int | None

    @property
    def descriptor(self) -> _Descriptor: ...


def check_grid(kernel: Kernel, arch: str, groups: tuple[int, int, int], local: tuple[int, int, int],
               dynamic_lds: int = 0) -> None:
    """A launch's work-items (per dimension and in all) and LDS against the limits, before anything is allocated."""
    where = f"kernel {kernel.name!r}"
    items = [int(g) * int(n) for g, n in zip(groups, local, strict=True)]
    for axis, g, n, total in zip("xyz", groups, local, items, strict=True):
        check_limit(where, f"work-items in {axis} (grid {g} x block {n})", total, MAX_GRID_ITEMS)
    kd = kernel.descriptor
    check_work(where, items[0] * items[1] * items[2], f"(grid {tuple(groups)} x block {tuple(local)})",
               kd.group_segment_fixed_size + dynamic_lds, "group_segment_fixed_size + dynamic_lds", arch)


def check_private(kernel: Kernel, arch: str) -> int:
    """A work-item's private segment bytes (the descriptor's, plus DYNAMIC_STACK when the compiler could not size
    the stack), checked against a wave's largest scratch; returns them."""
    kd = kernel.descriptor
    lanes = target.generation(arch).lanes(kd.wave32)
    private = kd.private_segment_fixed_size + (DYNAMIC_STACK if kernel.uses_dynamic_stack else 0)
    check_limit(f"kernel {kernel.name!r}", f"private segment bytes per work-item (wave{lanes})", private,
                max_wave_scratch(arch) // lanes)
    return private
