"""One emulated GPU as a PCI function: its config space, BARs, register file and the discovery binary in VRAM, the
register models, and the GPU device (emu.amd.device: engines, VM, queues) they drive."""
from __future__ import annotations

import itertools

import numpy as np

from emu.amd import target
from emu.amd.device import GPUDevice
from emu.amd.queue import Engine
from emu.pci_mock import discovery
from emu.pci_mock.bars import Bar, MemoryBar
from emu.pci_mock.config import ConfigSpace
from emu.pci_mock.gmc import GMC
from emu.pci_mock.ih import InterruptHandler
from emu.pci_mock.mmio import RegisterBar, RegisterFile
from emu.pci_mock.nbio import HDP
from emu.pci_mock.psp import PSP
from emu.pci_mock.queues import ComputeQueues, SDMAQueues
from emu.pci_mock.rlc import RLC
from emu.pci_mock.smu import SMU
from emu.pci_mock.vmhub import GFXHub, NoSystemPages, SystemPages

MiB, GiB = 1 << 20, 1 << 30
MIN_BAR0 = 256 * MiB      # the legacy VRAM window; Resizable BAR offers it and every size up to all of VRAM
DOORBELL_SIZE = 2 * MiB   # BAR2 of AMD's dGPUs
MMIO_SIZE = 1 * MiB       # BAR5 of AMD's dGPUs
REVISION = 0x00           # no product revision is claimed


class PCIFunction:
    """The PCI function of chip `arch` with `vram` bytes of VRAM (default: the product's, emu.amd.target).

    BAR0/1: VRAM (64-bit, prefetchable, resizable: it decodes all of VRAM, rounded up to a power of two);
    BAR2/3: doorbells (64-bit, prefetchable); BAR5: the MMIO registers (32-bit). The discovery binary is in VRAM at
    `vram - 64 KiB`; RCC_CONFIG_MEMSIZE reads `vram` in MiB.

    The GPU (`gpu`, node `node` of `engine`, which runs its queues; default: an engine of its own) reads its
    doorbells from BAR2; its VM is the GFX hub's context 0 (`gfxhub`), its queues are the ones the HQD and SDMA
    registers start (`compute`, `sdma`), and what it reports goes to the IH ring (`ih`). `memory`: the system
    memory the GPU reaches by DMA (emu.os.pci.SystemMemory; default: none).
    """

    def __init__(self, arch: str, vram: int | None = None, engine: Engine | None = None, node: int = 1,
                 memory: SystemPages | None = None) -> None:
        self.target = t = target.get(arch)
        self.vram_size = t.vram if vram is None else vram
        if self.vram_size % MiB or self.vram_size < MIN_BAR0:
            raise ValueError(f"VRAM of {self.vram_size:#x} bytes: a whole number of MiB, at least {MIN_BAR0:#x}")
        self.blocks = discovery.ip_blocks(t)
        bar0 = 1 << (self.vram_size - 1).bit_length()
        sizes = tuple(MIN_BAR0 << i for i in range((bar0 // MIN_BAR0).bit_length()))
        self.vram = MemoryBar(0, f"{t.arch}-vram", bar0, is64=True, prefetch=True, sizes=sizes)
        self.doorbells = MemoryBar(2, f"{t.arch}-doorbells", DOORBELL_SIZE, is64=True, prefetch=True)
        self.regs = RegisterFile(self.blocks, self.vram_size)
        self.mmio = RegisterBar(5, MMIO_SIZE, self.regs)
        self.bars: dict[int, Bar] = {b.index: b for b in (self.vram, self.doorbells, self.mmio)}
        subsystem = (0x1002, t.device_id)  # an AMD-built board: no board vendor's ids are claimed
        self.config = ConfigSpace(t.device_id, REVISION, subsystem, list(self.bars.values()))
        self.discovery_offset = self.vram_size - discovery.OFFSET_FROM_END
        self.vram.write(self.discovery_offset, discovery.build(t, self.blocks))
        self.hdp = HDP(self.regs)
        self.gmc = GMC(self.regs, self.vram_size)
        self.rlc = RLC(self.regs)
        # the SMU and PSP of chips whose MP registers the vendor's tables have (not the APUs')
        self.smu = SMU(self.regs, t) if SMU.MAILBOX in self.regs.names else None
        self.psp = PSP(self.regs, self.vram, self.gmc, self.smu, self.rlc, t.mp0) if self.smu else None
        self.engine = Engine([]) if engine is None else engine
        self.gpu = GPUDevice(t.arch, node, 0, self.engine, doorbells=self.doorbells.array.view(np.uint64))
        self.ih = self.gpu.driver = InterruptHandler(self.regs, self.vram, self.gmc, self.gpu.gfx)
        self.ih.on_cleared = self.gpu.fault_reported
        self.gfxhub = GFXHub(self.regs, self.gmc, self.vram, self.vram_size, self.gpu,
                             NoSystemPages() if memory is None else memory)
        self.refusals: list[str] = []  # queue registers that describe no queue
        ids = itertools.count(1)
        self.compute = ComputeQueues(self.regs, self.gpu, ids, self.refusals)
        self.sdma = SDMAQueues(self.regs, self.gpu, ids, self.refusals)
        self.engine.gpus.append(self.gpu)

    def close(self) -> None:
        """Release the shared memory (clients' mappings stay valid until they unmap)."""
        self.vram.close()
        self.doorbells.close()

    def __enter__(self) -> PCIFunction:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
