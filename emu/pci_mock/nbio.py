"""NBIO's host data path (HDP) flushes: how a driver makes its CPU writes to VRAM through BAR0 visible to the GPU.

Two ways, both acknowledged at once (the model's BAR writes reach VRAM directly, so nothing is ever pending):

- the remapped flush register: BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL holds the byte offset in the MMIO BAR of the HDP
  flush register's remapped copy (amdgpu's MMIO_REG_HOLE_OFFSET page, 0x80000 - 4 KiB, where nbio_v4_3/v6_1's
  remap_hdp_registers place it; a driver may move it); any write there is a flush, counted in `flushes`;
- the request/done pair BIF_BX_PF0_GPU_HDP_FLUSH_REQ / _DONE (the CP's WAIT_REG_MEM write-then-wait): a write of a
  request mask to REQ completes at once, so DONE reads back that mask.
"""
from __future__ import annotations

from emu.pci_mock.mmio import RegisterFile

REMAP_PAGE = 0x80000 - 0x1000  # amdgpu's MMIO_REG_HOLE_OFFSET: the remapped HDP registers' page in the MMIO BAR
REMAP, FLUSH_REQ, FLUSH_DONE = ("regBIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL", "regBIF_BX_PF0_GPU_HDP_FLUSH_REQ",
                                "regBIF_BX_PF0_GPU_HDP_FLUSH_DONE")


class HDP:
    """The HDP flush paths of one function's register file."""

    def __init__(self, regs: RegisterFile) -> None:
        self.regs, self.flushes = regs, 0
        self._remap = regs.addr(REMAP)
        self._flush_at: int | None = None
        regs.on_write(self._remap, self._move)
        self._move(self._remap, REMAP_PAGE)
        done = regs.addr(FLUSH_DONE)
        regs.on_write(regs.addr(FLUSH_REQ), lambda _a, mask: (regs.store(done, mask), self._count()))

    def _move(self, _addr: int, offset: int) -> None:
        """A new byte offset for the remapped flush register (dword aligned; the low bits are not stored)."""
        if self._flush_at is not None:
            self.regs.drop_hooks(self._flush_at)
        self.regs.store(self._remap, offset & ~3)
        self._flush_at = offset >> 2
        self.regs.on_write(self._flush_at, lambda _a, _v: self._count())

    def _count(self) -> None:
        self.flushes += 1
