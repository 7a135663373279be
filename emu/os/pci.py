"""MOCKPCI's files: the emulated GPUs as PCI functions (emu.pci_mock), seen through what a user-space driver binds a
GPU with, under `/sys/bus/pci/devices/<bdf>/` (Linux's PCI sysfs, drivers/pci/pci-sysfs.c):

- `vendor`, `device`, `class`, `subsystem_vendor`, `subsystem_device`, `revision`: the config header's ids as text;
- `config`: the config space, binary, read and written at any offset (emu.pci_mock.config);
- `resource`: one line per resource (`start end flags`, 13 lines for an endpoint), the BARs at the bus addresses
  the platform assigned them (programmed into the BARs, as firmware does);
- `resource0` (VRAM), `resource2` (doorbells): mmap gives the BAR's shared memory; `resource5` (the registers):
  mmap reserves address space with no memory behind it (PROT_NONE, as no host memory backs registers) and records
  it as a register window: a client reaches the registers through `register_view` (RegisterView: dword loads and
  stores that are the register file's reads and writes, with the models' side effects), never through plain loads;
- `resource0_resize`: the sizes Resizable BAR offers (bit n: 2^n MiB) and, written, BAR0's new size;
- `enable` ("0"/"1"; writing 1 enables memory decoding), `driver/unbind` (present while amdgpu is bound; writing
  the bdf unbinds it).

And the memory files the driver reads besides: `/proc/self/pagemap` (a host page's physical frame, for the GPU's
DMA: frames from SystemMemory, which remembers the host page of each frame it gave) and
`/proc/sys/vm/compact_unevictable_allowed` ("0": locked pages stay where they are). Shared anonymous memory the
driver maps for the GPU (`anon_mmap` with MAP_SHARED) gets consecutive frames at once, so an allocation is
physically contiguous, as a hugepage would be (MAP_HUGETLB is dropped: the host need not have hugepages).
Every other path is the operating system's, except that `/sys/bus/pci/devices` shows only the mock's GPUs.
"""
from __future__ import annotations

import array
import bisect
import errno
import os
import struct
import threading

from emu.amd.queue import Engine
from emu.os.system import MockFileIO, Systems
from emu.pci_mock import PCIFunction
from emu.pci_mock.bars import MemoryBar
from emu.pci_mock.config import SIZE as CONFIG_SIZE
from emu.pci_mock.config import ConfigSpaceError
from emu.pci_mock.mmio import RegisterBar
from emu.pci_mock.tables import tables
from stack.hcq.fileio import MAP_FIXED, MAP_SHARED, PROT_NONE, FileIO, os_mmap, os_munmap

P = tables()["pci"]
PCI_DEVICES = "/sys/bus/pci/devices"
PAGEMAP = "/proc/self/pagemap"
COMPACT_UNEVICTABLE = "/proc/sys/vm/compact_unevictable_allowed"
PAGE = 0x1000
MAP_ANONYMOUS, MAP_PRIVATE, MAP_HUGETLB, MAP_LOCKED = 0x20, 0x02, 0x40000, 0x2000
# linux/ioport.h: a `resource` line's flags; an endpoint's file has 13 lines (6 BARs, the ROM, 6 SR-IOV BARs)
IORESOURCE_MEM, IORESOURCE_PREFETCH, IORESOURCE_SIZEALIGN, IORESOURCE_MEM_64 = 0x200, 0x2000, 0x40000, 0x100000
RESOURCE_LINES = 13
# fs/proc/task_mmu.c: a pagemap entry (u64): bit 63 present, bits 0-54 the page frame number
PM_PRESENT, PM_PFN_MASK = 1 << 63, (1 << 55) - 1
FIRST_PFN = 0x100000       # synthetic system memory starts at 4 GiB, below the BARs
PREFETCH_WINDOW = 1 << 40  # 64-bit BARs of GPU i at PREFETCH_WINDOW + i * 64 GiB (BAR0; BAR2 32 GiB above)
MMIO_WINDOW = 0xD0000000   # 32-bit BAR5 of GPU i at MMIO_WINDOW + i MiB


def bdf(index: int) -> str:
    """GPU `index`'s address: domain 0, one bus per GPU (behind its own root port), device 0, function 0."""
    return f"0000:{0x03 + index:02x}:00.0"


class SystemMemory:
    """The host pages the driver asked the physical address of, by frame: what the GPU reaches by DMA. A frame is
    handed out once per host page and stays until the page is unmapped through the interface."""

    def __init__(self) -> None:
        self.page_of: dict[int, int] = {}  # pfn -> host address of its page
        self.pfn_of: dict[int, int] = {}   # host page address -> pfn
        self._next = FIRST_PFN

    def reserve(self, addr: int, size: int) -> None:
        """Consecutive frames for the pages of [addr, addr+size) (a contiguous allocation)."""
        for page in range(addr & ~(PAGE - 1), addr + size, PAGE):
            self._assign(page)

    def _assign(self, page: int) -> int:
        pfn = self.pfn_of.get(page)
        if pfn is None:
            pfn = self.pfn_of[page] = self._next
            self.page_of[pfn] = page
            self._next += 1
        return pfn

    def release(self, addr: int, size: int) -> None:
        for page in range(addr & ~(PAGE - 1), addr + size, PAGE):
            pfn = self.pfn_of.pop(page, None)
            if pfn is not None:
                del self.page_of[pfn]

    def pagemap(self, offset: int, size: int) -> bytes:
        """`size` bytes of pagemap from file offset `offset` (8 bytes per page of the address space)."""
        first, count = offset // 8, -(-(offset % 8 + size) // 8)
        raw = struct.pack(f"<{count}Q", *(PM_PRESENT | self._assign(p * PAGE) for p in range(first, first + count)))
        return raw[offset % 8:offset % 8 + size]

    def frames(self, first: int, end: int) -> list[int]:
        """The frames in [first, end) handed out, in order."""
        return sorted(f for f in self.page_of if first <= f < end)

    def host_address(self, phys: int) -> int | None:
        """The host address of physical address `phys`, or None for a frame that was never handed out."""
        page = self.page_of.get(phys // PAGE)
        return None if page is None else page + phys % PAGE


class RegisterView:
    """A client's view of a register window: item loads and stores of `fmt` ('I': dwords) at byte `offset` of the
    BAR are the register file's reads and writes (MMIOError for anything but aligned dwords, saying where)."""

    def __init__(self, bar: RegisterBar, offset: int, nbytes: int, fmt: str = "B") -> None:
        self.bar, self.offset, self.nbytes, self.format = bar, offset, nbytes, fmt
        self.itemsize = struct.calcsize(fmt)

    def cast(self, fmt: str) -> RegisterView:
        return RegisterView(self.bar, self.offset, self.nbytes, fmt)

    def __len__(self) -> int:
        return self.nbytes // self.itemsize

    def _at(self, i: int) -> int:
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"register view index {i} outside its {n} items")
        return self.offset + (i % n) * self.itemsize

    def __getitem__(self, k):
        if isinstance(k, slice):
            return memoryview(array.array(self.format, [self[i] for i in range(*k.indices(len(self)))]))
        return self.bar.read(self._at(k), self.itemsize)

    def __setitem__(self, k, value) -> None:
        if isinstance(k, slice):
            idx = range(*k.indices(len(self)))
            values = list(memoryview(value).cast(self.format)) if isinstance(value, (bytes, bytearray, memoryview)) \
                else list(value)
            if len(values) != len(idx):
                raise ValueError(f"register view: {len(values)} values for {len(idx)} registers")
            for i, v in zip(idx, values, strict=True):
                self.bar.write(self._at(i), v, self.itemsize)
        else:
            self.bar.write(self._at(k), value, self.itemsize)


class PCISystem:
    """The mock PCI devices of one process: `ngpus` functions of chip `arch`, their sysfs files, system memory."""

    def __init__(self, arch: str, ngpus: int) -> None:
        if not 1 <= ngpus <= 16:
            raise ValueError(f"a mock PCI system has 1 to 16 GPUs, not {ngpus}")
        self.arch = arch
        self.lock = threading.RLock()
        self.memory = SystemMemory()
        self.engine = Engine([])  # runs the queues of every function
        self.functions = [PCIFunction(arch, engine=self.engine, node=i + 1, memory=self.memory)
                          for i in range(ngpus)]
        self.enabled = [False] * ngpus
        self.bound = [True] * ngpus  # amdgpu binds every GPU at boot
        self._windows: list[tuple[int, int, RegisterBar]] = []  # (start, end, bar), sorted
        self.open_files: dict[int, object] = {}
        self.files: dict[str, str | None] = {}
        for i, fn in enumerate(self.functions):
            self._assign_bars(i, fn)
            self._add_files(i, fn)

    # -- the platform's side ---------------------------------------------------------------------------------------
    @staticmethod
    def _assign_bars(i: int, fn: PCIFunction) -> None:
        """Program the BARs with bus addresses, as the platform firmware does before the OS starts."""
        base = {0: PREFETCH_WINDOW + (i << 36), 2: PREFETCH_WINDOW + (i << 36) + (1 << 35), 5: MMIO_WINDOW + (i << 20)}
        for index, bar in fn.bars.items():
            reg = P["PCI_BASE_ADDRESS_0"] + 4 * index
            fn.config.write(reg, 4, base[index] & 0xFFFFFFFF)
            if bar.is64:
                fn.config.write(reg + 4, 4, base[index] >> 32)

    def _add_files(self, i: int, fn: PCIFunction) -> None:
        d, c = f"{PCI_DEVICES}/{bdf(i)}", fn.config
        ids = {"vendor": (P["PCI_VENDOR_ID"], 2), "device": (P["PCI_DEVICE_ID"], 2),
               "subsystem_vendor": (P["PCI_SUBSYSTEM_VENDOR_ID"], 2), "subsystem_device": (P["PCI_SUBSYSTEM_ID"], 2)}
        self.files.update({f"{d}/{k}": f"{c.read(off, n):#06x}\n" for k, (off, n) in ids.items()})
        self.files.update({f"{d}/class": f"{c.read(P['PCI_CLASS_REVISION'], 4) >> 8:#08x}\n",
                           f"{d}/revision": f"{c.read(P['PCI_CLASS_REVISION'], 1):#04x}\n",
                           f"{d}/enable": None, f"{d}/config": None, f"{d}/resource": None,
                           f"{d}/resource0_resize": None, f"{d}/driver/unbind": None})
        self.files.update({f"{d}/resource{b}": None for b in fn.bars})
        self.files.update({PAGEMAP: None, COMPACT_UNEVICTABLE: "0\n"})

    def function(self, path: str) -> tuple[int, str] | None:
        """(GPU index, the file's name under the device folder) of a path in a GPU's sysfs folder."""
        head, _, rest = path[len(PCI_DEVICES) + 1:].partition("/")
        for i in range(len(self.functions)):
            if head == bdf(i):
                return i, rest
        return None

    # -- the file namespace (MockFileIO's view of a system) ----------------------------------------------------------
    @staticmethod
    def owns(path: str) -> bool:
        p = os.path.normpath(path) if path else ""
        return p in (PAGEMAP, COMPACT_UNEVICTABLE) or p == PCI_DEVICES or p.startswith(PCI_DEVICES + "/")

    def exists(self, path: str) -> bool:
        p = os.path.normpath(path)
        return p in self.files or self.is_dir(p)

    def is_dir(self, path: str) -> bool:
        p = os.path.normpath(path).rstrip("/") + "/"
        return p == PCI_DEVICES + "/" or any(k.startswith(p) for k in self.files)

    def listdir(self, path: str) -> list[str]:
        p = os.path.normpath(path).rstrip("/") + "/"
        return sorted({k[len(p):].split("/")[0] for k in self.files if k.startswith(p)})

    @staticmethod
    def render_gpu(path: str) -> None:
        return None

    # -- the special files ------------------------------------------------------------------------------------------
    def resource_text(self, fn: PCIFunction) -> str:
        lines = [(0, 0, 0)] * RESOURCE_LINES
        for index, bar in fn.bars.items():
            lo = fn.config.read(P["PCI_BASE_ADDRESS_0"] + 4 * index, 4)
            hi = fn.config.read(P["PCI_BASE_ADDRESS_0"] + 4 * index + 4, 4) if bar.is64 else 0
            start = (hi << 32 | lo) & ~0xF
            flags = (IORESOURCE_MEM | IORESOURCE_SIZEALIGN | (IORESOURCE_PREFETCH if bar.prefetch else 0)
                     | (IORESOURCE_MEM_64 if bar.is64 else 0) | bar.flags)
            lines[index] = (start, start + bar.size - 1, flags)
        return "".join(f"{s:#018x} {e:#018x} {f:#018x}\n" for s, e, f in lines)

    def mmap_bar(self, i: int, index: int, addr: int, size: int, prot: int, flags: int, offset: int) -> int:
        bar = self.functions[i].bars.get(index)
        if bar is None:
            raise OSError(errno.ENODEV, f"{bdf(i)}: BAR{index} is not a memory BAR")
        if not flags & MAP_SHARED:
            raise OSError(errno.EINVAL, f"{bdf(i)} resource{index}: a BAR is mapped MAP_SHARED")
        if size <= 0 or offset < 0 or offset % PAGE or offset + size > bar.size:
            raise OSError(errno.EINVAL, f"{bdf(i)} resource{index}: {size:#x} bytes at offset {offset:#x} do not fit "
                          f"in the {bar.size:#x}-byte BAR")
        if isinstance(bar, MemoryBar):
            return os_mmap(addr, size, prot, flags, bar.fd, offset)
        at = os_mmap(addr, size, PROT_NONE, (flags & MAP_FIXED) | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        with self.lock:
            bisect.insort(self._windows, (at, at + size, offset, bar))
        return at

    def register_view(self, addr: int, size: int) -> RegisterView | None:
        """The registers behind [addr, addr+size) when it lies in a mapping of a register BAR, else None."""
        w = self._windows
        k = bisect.bisect_right(w, (addr, float("inf"))) - 1
        if k < 0 or not (w[k][0] <= addr and addr + size <= w[k][1]):
            return None
        start, _end, offset, bar = w[k]
        return RegisterView(bar, offset + addr - start, size)

    def unmap(self, addr: int, size: int) -> None:
        with self.lock:
            self._windows = [w for w in self._windows if not (addr <= w[0] and w[1] <= addr + size)]
            for fn in self.functions:  # the GPU stops reaching the pages before the host gives them back
                fn.gfxhub.host_unmapped(addr, size)
            self.memory.release(addr, size)

    def read_special(self, path: str, size: int | None, offset: int) -> bytes | None:
        """The bytes of a file whose content is computed, or None for a plain text file."""
        if path == PAGEMAP:
            return self.memory.pagemap(offset, 8 if size is None else size)
        found = self.function(path)
        if found is None:
            return None
        i, name = found
        fn = self.functions[i]
        if name == "config":  # as Linux's: a read past the end is short
            end = CONFIG_SIZE if size is None else min(CONFIG_SIZE, offset + size)
            return fn.config.read_bytes(offset, end - offset) if offset < end else b""
        text = {"enable": f"{int(self.enabled[i])}\n", "resource": self.resource_text(fn),
                "resource0_resize": f"{fn.config.rebar_sizes():016x}\n"}.get(name)
        return None if text is None else text.encode()[offset:None if size is None else offset + size]

    def write_special(self, path: str, data: bytes, offset: int) -> None:
        if path == COMPACT_UNEVICTABLE:
            if data.strip() not in (b"0", b"1"):
                raise OSError(errno.EINVAL, f"{path}: expected 0 or 1, not {data[:16]!r}")
            self.files[path] = data.strip().decode() + "\n"
            return
        found = self.function(path)
        if found is None:
            raise OSError(errno.EACCES, f"{path}: read-only")
        i, name = found
        fn, where = self.functions[i], f"{bdf(i)}/{name}"
        if name == "config":
            try:
                fn.config.write_bytes(offset, data)
            except ConfigSpaceError as e:
                raise OSError(errno.EINVAL, f"{where}: {e}") from None
        elif name == "enable":
            self._enable(i, _int(data, where, 10))
        elif name == "driver/unbind":
            if data.strip().decode(errors="replace") != bdf(i):
                raise OSError(errno.ENODEV, f"{where}: {data.strip()[:32]!r} is not this device ({bdf(i)})")
            self.bound[i] = False
            self.files.pop(f"{PCI_DEVICES}/{bdf(i)}/driver/unbind", None)
        elif name == "resource0_resize":
            self._resize(i, _int(data, where, 10), where)
        else:
            raise OSError(errno.EACCES, f"{where}: read-only")

    def _enable(self, i: int, value: int) -> None:
        cmd = P["PCI_COMMAND"]
        c = self.functions[i].config
        mem = P["PCI_COMMAND_MEMORY"]
        self.enabled[i] = value != 0
        c.write(cmd, 2, (c.read(cmd, 2) | mem) if value else (c.read(cmd, 2) & ~mem))

    def _resize(self, i: int, n: int, where: str) -> None:
        """BAR0 to 2^n MiB through the Resizable BAR control, as the kernel does (only with no driver bound)."""
        fn = self.functions[i]
        if self.bound[i]:
            raise OSError(errno.EBUSY, f"{where}: a driver is bound")
        if not 0 <= n < 32 or (1 << 20 << n) not in fn.vram.sizes:
            raise OSError(errno.EINVAL, f"{where}: size 2^{n} MiB is not one BAR0 offers")
        fn.config.resize_bar0(n)


def _int(data: bytes, where: str, base: int) -> int:
    try:
        return int(data.strip().decode(), base)
    except (UnicodeDecodeError, ValueError):
        raise OSError(errno.EINVAL, f"{where}: {data.strip()[:32]!r} is not a number") from None


class PCIFileIO(MockFileIO):
    """A file of the mock PCI system or, for any other path, of the operating system (the module docstring)."""
    system: PCISystem  # bound by interface()

    def _pci(self) -> tuple[int, str] | None:
        return self.system.function(self.path)

    def read(self, size: int | None = None, binary: bool = False, offset: int | None = None):
        if self._real is not None:
            return self._real.read(size, binary, offset)
        pos = self._pos if offset is None else offset
        with self.system.lock:
            data = self.system.read_special(self.path, size, pos)
        if data is None:
            return super().read(size, binary, offset)
        self._pos = pos + len(data)
        return data if binary else data.decode()

    def write(self, content, binary: bool = False, offset: int | None = None) -> None:
        if self._real is not None:
            return self._real.write(content, binary, offset)
        try:
            data = bytes(content) if binary else str(content).encode()
        except TypeError:
            raise OSError(errno.EINVAL, f"{self.path}: expected bytes, not {type(content).__name__}") from None
        pos = self._pos if offset is None else offset
        with self.system.lock:
            self.system.write_special(self.path, data, pos)
        self._pos = pos + len(data)

    def ioctl(self, request: int, arg) -> int:
        if self._real is not None:
            return self._real.ioctl(request, arg)
        raise OSError(errno.ENOTTY, f"{self.path}: ioctl {request:#x} is not supported by the mock device")

    def mmap(self, addr: int, size: int, prot: int, flags: int, offset: int) -> int:
        if self._real is not None:
            return self._real.mmap(addr, size, prot, flags, offset)
        found = self._pci()
        if found is None or not found[1].startswith("resource") or not found[1][8:].isdigit():
            raise OSError(errno.ENODEV, f"{self.path} cannot be mapped")
        return self.system.mmap_bar(found[0], int(found[1][8:]), addr, size, prot, flags, offset)

    @classmethod
    def anon_mmap(cls, addr: int, size: int, prot: int, flags: int, offset: int = 0) -> int:
        """Anonymous memory; shared memory (the driver's system memory for the GPU) gets consecutive frames, with
        MAP_HUGETLB and MAP_LOCKED dropped (the host need not have hugepages or a memlock allowance)."""
        shared = flags & MAP_SHARED
        at = FileIO.anon_mmap(addr, size, prot, flags & ~(MAP_HUGETLB | MAP_LOCKED) if shared else flags, offset)
        if shared:
            with cls.system.lock:
                cls.system.memory.reserve(at, size)
        return at

    @classmethod
    def munmap(cls, addr: int, size: int) -> None:
        cls.system.unmap(addr, size)
        os_munmap(addr, size)


_pci = Systems(PCIFileIO, PCISystem)


def interface(arch: str | None = None, gpus: int = 1) -> type[PCIFileIO]:
    """The file-I/O interface class of the process's mock PCI system with `gpus` GPUs of `arch` (default gfx1100)."""
    return _pci.interface(arch, gpus)


def systems() -> list[PCISystem]:
    return _pci.all()
