"""The interrupt handler (IH, OSSSYS): the ring in memory through which the GPU tells the driver what happened, and
the fault status registers of the GFX hub. Under MOCKPCI this is the device's driver side (GPUDevice.driver), in the
place MOCKKFD's KFD takes.

The ring (amdgpu's ih_v6_0.c / ih_v7_0.c): IH_RB_BASE(_HI) hold its MC address >> 8 (VRAM, through the frame buffer's
aperture), IH_RB_CNTL.RB_SIZE its size (2^RB_SIZE dwords) and RB_ENABLE; the IH writes each interrupt as a 32-byte
vector at the write pointer, IH_RB_WPTR.OFFSET (bytes), which it then advances (wrapping at the ring's end), and
writes the pointer back to IH_RB_WPTR_ADDR_LO/HI when WPTR_WRITEBACK_ENABLE is set; the driver reads entries up to it
and moves IH_RB_RPTR. With no ring enabled, interrupts are counted and dropped. Overflow is not modelled: the writer
wraps over entries the driver has not read.

An entry (soc15 interrupt vector, amdgpu_irq.h / soc15_ih_clientid.h): dword 0 client id [7:0], source id [15:8],
ring id [23:16], VMID [27:24], VMID type [31] (0: the GFX hub); dwords 1-2 a timestamp; dword 3 PASID [15:0], node
[23:16]; dwords 4-7 the source's data. The interrupts (client SOC21 GRBM_CP / GFX, the vendor's source ids):

- CP_EOP_INTERRUPT: RELEASE_MEM with INT_SEL asking for one; data 0 its context id;
- SDMA_TRAP: an SDMA TRAP packet; data 0 its INT_CONTEXT;
- UTCL2_FAULT: a GPU VM fault; data 0 the page's address bits 43:12, data 1 bits 47:44 (gmc_v11_0.c's decoding).
  The fault's page goes into GCVM_L2_PROTECTION_FAULT_ADDR_LO32/HI32 and the access's direction (RW), VMID and a
  PERMISSION_FAULTS bit (the model's: bit 0, the valid check) into PROTECTION_FAULT_STATUS, which hold the first
  fault until the driver writes PROTECTION_FAULT_CNTL's CLEAR_PROTECTION_FAULT_STATUS_ADDR; later ones set
  MORE_FAULTS. The queue that faulted stays halted until then, and then goes on after the packet that faulted
  (`on_cleared`: GPUDevice.fault_reported, the same as MOCKKFD's after the process has been told);
- SQ_INTERRUPT_ID: a wave's error (an illegal instruction, a trap, the watchdog); CP_BAD_OPCODE_ERROR: a packet the
  command processor cannot run.

Each fault's report (emu.amd.kfd.fault_report, the report MOCKKFD gives) is written to a file, named on stderr with
the fault in one line, as the kernel logs a VM fault.
"""
from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from emu.amd.memory import PAGE, FaultRecord
from emu.pci_mock.bars import MemoryBar
from emu.pci_mock.gmc import GMC
from emu.pci_mock.mmio import RegisterFile
from emu.pci_mock.tables import tables

_C = tables()["ih"]
ENTRY = 32  # bytes
GRBM_CP, GFX = _C["SOC21_IH_CLIENTID_GRBM_CP"], _C["SOC21_IH_CLIENTID_GFX"]
SQ_ERROR = 2 << 6  # SQ interrupt data 1: encoding type 2, an error (gfx11 sq_intr layout)
SQ_ILLEGAL_INST = 1 << 21  # data 0: the error type ILLEGAL_INST
PERMISSION_VALID = 1  # PROTECTION_FAULT_STATUS.PERMISSION_FAULTS of an access to a page that is not valid


def source(gfx: int, name: str) -> int:
    return _C[f"GFX_{gfx}_0_0__SRCID__{name}"]


class InterruptHandler:
    """The IH ring and the GFX hub's fault registers of one function (see the module docstring)."""

    def __init__(self, regs: RegisterFile, vram: MemoryBar, gmc: GMC, gfx: int) -> None:
        self.regs, self.vram, self.gmc, self.gfx = regs, vram, gmc, gfx
        self.delivered: list[tuple[int, int, tuple[int, ...]]] = []  # (client, source, data) written to the ring
        self.dropped = 0
        self.on_cleared: Callable[[], None] | None = None  # the driver has taken the fault
        self._lock = threading.Lock()
        status = "regGCVM_L2_PROTECTION_FAULT_STATUS" + ("_LO32" if gfx >= 12 else "")
        self.status_name = status
        self._r = {n: regs.addr(n) for n in ("regIH_RB_CNTL", "regIH_RB_BASE", "regIH_RB_BASE_HI", "regIH_RB_WPTR",
                                              "regIH_RB_WPTR_ADDR_LO", "regIH_RB_WPTR_ADDR_HI", status,
                                              "regGCVM_L2_PROTECTION_FAULT_ADDR_LO32",
                                              "regGCVM_L2_PROTECTION_FAULT_ADDR_HI32",
                                              "regGCVM_L2_PROTECTION_FAULT_CNTL")}
        regs.on_write(self._r["regGCVM_L2_PROTECTION_FAULT_CNTL"], self._fault_cntl)

    # -- the ring -------------------------------------------------------------------------------------------------
    def post(self, client: int, src: int, data: tuple[int, ...] = (), ring_id: int = 0, vmid: int = 0) -> bool:
        """Write one interrupt vector to the ring; False when no ring is enabled (or it is not in VRAM)."""
        regs, r, f = self.regs, self._r, self.regs.field
        with self._lock:
            cntl = regs.stored(r["regIH_RB_CNTL"])
            size = 4 << f("regIH_RB_CNTL", cntl, "rb_size")
            base = (regs.stored(r["regIH_RB_BASE_HI"]) << 32 | regs.stored(r["regIH_RB_BASE"])) << 8
            at = self.gmc.vram_offset(base, size)
            if not f("regIH_RB_CNTL", cntl, "rb_enable") or at is None or size < ENTRY:
                self.dropped += 1
                return False
            wptr = f("regIH_RB_WPTR", regs.stored(r["regIH_RB_WPTR"]), "offset") * 4 % size // ENTRY * ENTRY
            words = np.zeros(8, np.uint32)
            words[0] = client & 0xFF | (src & 0xFF) << 8 | (ring_id & 0xFF) << 16 | (vmid & 0xF) << 24
            words[4:4 + len(data)] = [d & 0xFFFFFFFF for d in data[:4]]
            self.vram.write(at + wptr, words.tobytes())
            wptr = (wptr + ENTRY) % size
            regs.store(r["regIH_RB_WPTR"], regs.encode("regIH_RB_WPTR", offset=wptr >> 2))
            if f("regIH_RB_CNTL", cntl, "wptr_writeback_enable"):
                wb = (regs.stored(r["regIH_RB_WPTR_ADDR_HI"]) << 32 | regs.stored(r["regIH_RB_WPTR_ADDR_LO"])) & ~3
                if (wb_at := self.gmc.vram_offset(wb, 4)) is not None:
                    self.vram.write(wb_at, int(wptr).to_bytes(4, "little"))
            self.delivered.append((client, src, tuple(data)))
            return True

    # -- what the device reports (GPUDevice.driver's protocol) ------------------------------------------------------
    def interrupt(self, ctxid: int, source_name: str) -> None:
        self.post(GRBM_CP if source_name == "CP_EOP_INTERRUPT" else GFX, source(self.gfx, source_name), (ctxid,))

    def memory_fault(self, gpu, rec: FaultRecord) -> None:
        from emu.amd.kfd import fault_report
        addr = rec.addresses[0] if rec.addresses else 0
        page = addr // PAGE
        self._fault_status(page, rec.write)
        fault_report(gpu, rec)
        self.post(GFX, source(self.gfx, "UTCL2_FAULT"), (page & 0xFFFFFFFF, page >> 32 & 0xF))

    def hw_exception(self, gpu, rec: FaultRecord | None = None) -> None:
        from emu.amd.kfd import fault_report
        if rec is None or rec.kind == "cp-error":
            self.post(GRBM_CP, source(self.gfx, "CP_BAD_OPCODE_ERROR"))
            return
        fault_report(gpu, rec)
        self.post(GFX, source(self.gfx, "SQ_INTERRUPT_ID"),
                  (SQ_ILLEGAL_INST if rec.kind == "illegal-instruction" else 0, SQ_ERROR))

    # -- the fault registers ----------------------------------------------------------------------------------------
    def _fault_status(self, page: int, write: bool) -> None:
        regs, r, name = self.regs, self._r, self.status_name
        held = regs.stored(r[name])
        if held:
            regs.store(r[name], held | regs.encode(name, more_faults=1))
            return
        regs.store(r[name], regs.encode(name, rw=int(write), vmid=0, permission_faults=PERMISSION_VALID))
        regs.store(r["regGCVM_L2_PROTECTION_FAULT_ADDR_LO32"], page & 0xFFFFFFFF)
        regs.store(r["regGCVM_L2_PROTECTION_FAULT_ADDR_HI32"], page >> 32 & 0xF)

    def _fault_cntl(self, addr: int, value: int) -> None:
        self.regs.store(addr, value & ~1)
        if value & 1:  # CLEAR_PROTECTION_FAULT_STATUS_ADDR
            for n in (self.status_name, "regGCVM_L2_PROTECTION_FAULT_ADDR_LO32",
                      "regGCVM_L2_PROTECTION_FAULT_ADDR_HI32"):
                self.regs.store(self._r[n], 0)
            if self.on_cleared is not None:
                self.on_cleared()
