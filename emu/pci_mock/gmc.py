"""The GPU memory controller's registers a driver's boot reads and its TLB flushes wait on (GFXHUB and MMHUB).

- the frame buffer's location in the GPU's memory-controller (MC) address space: MC_VM_FB_LOCATION_BASE/TOP (in
  16 MiB units) as the VBIOS programs them before any driver runs, VRAM at FB_BASE; a driver's MC addresses of
  VRAM are FB_BASE + offset (`vram_offset` maps them back, None outside VRAM);
- the 18 VM invalidation engines of each hub: SEM (reading it takes the engine's semaphore: 1 when it was free,
  0 while held; writing 0 releases it), REQ (an invalidation request for the VMIDs of its per_vmid_invalidate_req
  bits), ACK (the VMIDs whose invalidation completed). Invalidations complete at once: the listeners
  (`on_invalidate`, emu.pci_mock.vmhub's translation of the GFX hub) re-read the page tables before the request's
  VMIDs read back in ACK.
"""
from __future__ import annotations

from collections.abc import Callable

from emu.pci_mock.mmio import RegisterFile

FB_BASE = 0x80_0000_0000  # the MC address of VRAM on AMD dGPUs (amdgpu reads it from FB_LOCATION_BASE)
FB_UNIT = 24              # FB_LOCATION_BASE/TOP hold address bits 47:24
HUBS, ENGINES = ("MM", "GC"), 18
VMID_BITS = 0xFFFF        # per_vmid_invalidate_req: bits 0-15


class GMC:
    def __init__(self, regs: RegisterFile, vram_size: int) -> None:
        self.regs, self.vram_size, self.fb_base = regs, vram_size, FB_BASE
        self.invalidations = 0
        self.on_invalidate: list[Callable[[str, int], None]] = []  # called with (hub, VMID bits) of each request
        top = (FB_BASE + vram_size - 1) >> FB_UNIT
        for hub in HUBS:
            for name, value in ((f"reg{hub}MC_VM_FB_LOCATION_BASE", FB_BASE >> FB_UNIT),
                                (f"reg{hub}MC_VM_FB_LOCATION_TOP", top)):
                for addr in regs.names.get(name, ()):
                    regs.store(addr, value)
            for e in range(ENGINES):
                self._engine(hub, e)

    def _engine(self, hub: str, e: int) -> None:
        regs, name = self.regs, f"reg{hub}VM_INVALIDATE_ENG{e}"
        for i, req in enumerate(regs.names.get(f"{name}_REQ", ())):
            ack = regs.names[f"{name}_ACK"][i]
            regs.on_write(req, lambda a, v, ack=ack, hub=hub: self._invalidate(hub, a, v, ack))
            sems = regs.names.get(f"{name}_SEM", ())
            if i < len(sems):
                regs.on_read(sems[i], lambda a: self._take(a))
                regs.on_write(sems[i], lambda a, v: regs.store(a, v & 1))

    def _take(self, sem: int) -> int:
        """Reading SEM: 1 (and now held) if it was free, 0 if it is held."""
        held = self.regs.stored(sem) & 1
        self.regs.store(sem, 1)
        return 0 if held else 1

    def _invalidate(self, hub: str, req: int, value: int, ack: int) -> None:
        self.regs.store(req, value)
        self.invalidations += 1
        for listener in self.on_invalidate:
            listener(hub, value & VMID_BITS)
        self.regs.store(ack, value & VMID_BITS)

    def vram_offset(self, mc: int, size: int = 1) -> int | None:
        """The VRAM offset of MC address range [mc, mc+size), or None when it is not all VRAM."""
        off = mc - self.fb_base
        return off if 0 <= off and size >= 0 and off + size <= self.vram_size else None
