"""MOCKPCI: the emulated AMD GPU as a PCI function, for user-space drivers that bind the device themselves (tinygrad's
AM driver, later stack/hcq/pci.py) instead of going through /dev/kfd.

Modelled now (the first steps of issue 25):

- `tables`: the vendor data, converted once from the pinned tinygrad wheel's autogen headers as data (PCI config
  constants, the IP discovery structs and hardware ids, the IP blocks' segment bases, each IP version's registers);
- `config`: the config space (header, BARs with the sizing protocol, PM / PCIe / MSI capabilities, Resizable BAR);
- `bars`: VRAM (BAR0/1) and doorbells (BAR2/3) as memfd-backed shared memory a client maps;
- `mmio`: the register file behind BAR5, per-IP vendor offsets at the discovery table's bases, with read/write hooks
  for models; the VRAM-size register (RCC_CONFIG_MEMSIZE) and BIF's index/data window answer already;
- `discovery`: the IP discovery binary at VRAM end - 64 KiB (the chip's IP versions from emu.amd.target, the same
  the KFD topology reports);
- the register models on the hooks, in the order a driver's boot reaches them: `nbio` (HDP flushes), `gmc` (the FB
  location, the VM invalidation engines), `psp` (the bootloader, the sOS ring, firmware checked and recorded, never
  run), `smu` (the message mailbox), `rlc` (safe mode, the autoload's completion);
- `firmware`: the distribution's firmware files, fetched into hwemu's cache;
- the GPU behind them (emu.amd.device, the engines MOCKKFD's queues run on): `vmhub` (the GFX hub's VMID 0: the
  system aperture and the driver's page tables walked into the device's GPU VM), `queues` (the HQD registers of
  compute queues, banked by GRBM_GFX_CNTL, and the SDMA ring registers, starting queues on BAR2's doorbells), `ih`
  (the IH ring: end-of-pipe, SDMA trap, VM fault and wave / CP error interrupts; the fault status registers);
- `function`: `PCIFunction`, one GPU tying them together.

emu/os/pci serves the functions' sysfs folders, BAR mappings and /proc/self/pagemap under DEV=MOCKPCI+AMD. Not
modelled yet: MES, KIQ, user VMIDs (contexts 1-15), the MM hub's tables (what the PSP and IH reach is VRAM through
the frame buffer's MC addresses).
"""
from emu.pci_mock.function import PCIFunction

__all__ = ["PCIFunction"]
