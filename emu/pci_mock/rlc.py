"""The RLC's handshakes a driver waits on (gfx11/12; amdgpu's gfx_v11_0.c / gfx_v12_0.c).

- RLC_SAFE_MODE: the driver writes CMD (bit 0) with MESSAGE (1: enter, 0: leave safe mode, so that it may change
  clock gating); the RLC takes the request and clears CMD, which the driver waits for. The model takes it at once
  and records whether safe mode is on (`safe_mode`).
- CP_STAT reads 0 (the CP idle) and RLC_RLCS_BOOTLOAD_STATUS's BOOTLOAD_COMPLETE (bit 31) is set once the PSP has
  run the RLC autoload (emu.pci_mock.psp calls `autoloaded`).
"""
from __future__ import annotations

from emu.pci_mock.mmio import RegisterFile

CMD, MESSAGE_SHIFT, MESSAGE_MASK, ENTER = 1 << 0, 1, 0xF, 1  # RLC_SAFE_MODE's fields (gc 11/12 register tables)
BOOTLOAD_COMPLETE = 1 << 31


class RLC:
    def __init__(self, regs: RegisterFile) -> None:
        self.regs, self.safe_mode = regs, False
        for addr in regs.names.get("regRLC_SAFE_MODE", ()):
            regs.on_write(addr, self._safe_mode)
        self._status = regs.names.get("regRLC_RLCS_BOOTLOAD_STATUS", ())

    def _safe_mode(self, addr: int, value: int) -> None:
        if value & CMD:
            self.safe_mode = (value >> MESSAGE_SHIFT) & MESSAGE_MASK == ENTER
        self.regs.store(addr, value & ~CMD)

    def autoloaded(self) -> None:
        for addr in self._status:
            self.regs.store(addr, self.regs.stored(addr) | BOOTLOAD_COMPLETE)
