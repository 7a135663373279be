"""The mock system of a process: GPUs, their driver and engine, and the file-I/O interface they appear through.

`interface(arch, gpus)` (the `hwemu.interfaces` entry point MOCKKFD) gives the interface class of a mock system:
`gpus` emulated GPUs of `arch` behind MOCKKFD. It has the call contract of stack.hcq.fileio.FileIO: `/dev/kfd`,
`/dev/dri/renderD*`, the KFD topology under `/sys/devices/virtual/kfd/kfd/topology/` and the render nodes'
sysfs under `/sys/class/drm/renderD*/` are the mock's; every other path is the operating system's. An open
mock file holds a real descriptor (of /dev/null) so its `fd` is a unique int a client can pass around (e.g. as
ACQUIRE_VM's drm_fd). mmap of /dev/kfd (doorbells, event page) and of a render node (buffers) maps the
device memory's pages into the process, at the requested address with MAP_FIXED.
"""
from __future__ import annotations

import atexit
import errno
import os
import sys
import threading
from collections.abc import Callable

from emu.amd import drm, kernel_stats, topology
from emu.amd.bo import Heap
from emu.amd.device import GPUDevice
from emu.amd.doorbell import Doorbells
from emu.amd.exec import category
from emu.amd.kfd import KFD
from emu.amd.queue import Engine
from emu.amd.topology import DEFAULT_ARCH, FIRST_RENDER_MINOR, PERFORMANCE_LEVEL
from stack.hcq.fileio import MAP_FIXED, FileIO, os_mmap, os_munmap

OWNED = ("/sys/devices/virtual/kfd", "/sys/class/kfd", "/dev/dri/renderD", "/sys/class/drm/renderD")
GTT_SIZE = 64 << 30  # system memory GPU buffers can take (sparse: pages exist once touched)
# what amdgpu's power_dpm_force_performance_level accepts (drivers/gpu/drm/amd/pm/amdgpu_pm.c)
PERFORMANCE_LEVELS = ("auto", "low", "high", "manual", "profile_standard", "profile_min_sclk", "profile_min_mclk",
                      "profile_peak", "perf_determinism", "profile_exit")


class MockSystem:
    """The mock devices of one process: GPUs, their driver, the engine that runs them, the files they appear as."""

    def __init__(self, arch: str, ngpus: int):
        topology.chip(arch)  # a clear error for a chip without topology figures
        if not 1 <= ngpus <= 16:
            raise ValueError(f"a mock system has 1 to 16 GPUs, not {ngpus}")
        self.arch = arch
        self.lock = threading.RLock()
        self.gpus: list[GPUDevice] = []
        self.engine = Engine(self.gpus)
        self.gpus.extend(GPUDevice(arch, i + 1, FIRST_RENDER_MINOR + i, self.engine) for i in range(ngpus))
        self.kfd = KFD(self.gpus, Heap("gtt", GTT_SIZE), self.lock)
        self.files = topology.sysfs_files(arch, ngpus)
        self.written: set[str] = set()  # the writable files a client has written
        self.open_files: dict[int, object] = {}  # fd -> the mock node (a GPUDevice for render nodes, "kfd")
        if category.enabled():
            atexit.register(self._report)

    def inject_fault(self, addr: int, gpu: int = 0, write: bool = False) -> None:
        """hwemu's fault injection: GPU `gpu` (an index into .gpus) raises a VM fault at `addr` now, through the
        real fault path (the fault record, the driver's memory-exception event with the faulting page, the halted
        queues going on once the process has been told). OSError(EINVAL) for a GPU or address that is not one."""
        if not 0 <= gpu < len(self.gpus):
            raise OSError(errno.EINVAL, f"fault injection: no GPU {gpu} (the mock system has {len(self.gpus)})")
        with self.lock:
            self.gpus[gpu].inject_fault(addr, write)

    def default_performance_level(self, level: str) -> None:
        """`level` as every GPU's power_dpm_force_performance_level that no client has written (a client adapter's
        default: tinygrad's profilers want profile_standard, and set it through sudo, not through the mock)."""
        for path in self.files:
            if path.endswith(PERFORMANCE_LEVEL) and path not in self.written:
                self.files[path] = level + "\n"

    @staticmethod
    def owns(path: str) -> bool:
        """Whether `path` is in the mock's namespace (present or not): the KFD device and topology, render nodes."""
        p = os.path.normpath(path) if path else ""
        return p == "/dev/kfd" or p.startswith(OWNED)

    def exists(self, path: str) -> bool:
        p = os.path.normpath(path)
        return p in self.files or self.is_dir(p)

    def is_dir(self, path: str) -> bool:
        p = os.path.normpath(path).rstrip("/") + "/"
        return p.startswith(("/sys/", "/dev/")) and any(k.startswith(p) for k in self.files)

    def listdir(self, path: str) -> list[str]:
        p = os.path.normpath(path).rstrip("/") + "/"
        return sorted({k[len(p):].split("/")[0] for k in self.files if k.startswith(p)})

    def ioctl(self, fd: int, request: int, arg, what: str = "") -> int:
        """An ioctl on the mock file open as `fd` (`arg`: a buffer or a user address); OSError(errno) as the driver
        fails it."""
        node = self.open_files.get(fd)
        if node == "kfd":
            return self.kfd.ioctl(request, arg, self.render_fds())
        if node is not None:  # a render node
            return drm.ioctl(node.chip, request, arg)
        raise OSError(errno.ENOTTY, f"{what or f'fd {fd}'}: ioctl {request:#x} is not supported by the mock device")

    def mmap(self, fd: int, addr: int, size: int, prot: int, flags: int, offset: int, what: str = "") -> int:
        """mmap of the mock file open as `fd`: the device memory's pages (doorbells, event page, a buffer)."""
        node = self.open_files.get(fd)
        with self.lock:
            if node == "kfd":
                heap, off = self.kfd.mmap_kfd(size, offset), 0
            elif isinstance(node, GPUDevice):
                heap, off = self.kfd.mmap_render(node, size, offset)
            else:
                raise OSError(errno.ENODEV, f"{what or f'fd {fd}'} cannot be mapped")
        return os_mmap(addr, size, prot, flags if addr else flags & ~MAP_FIXED, heap.fd, off)

    def render_gpu(self, path: str) -> GPUDevice | None:
        return next((g for g in self.gpus if path == f"/dev/dri/renderD{g.render_minor}"), None)

    def render_fds(self) -> dict[int, GPUDevice]:
        return {fd: n for fd, n in self.open_files.items() if isinstance(n, GPUDevice)}

    def stats_line(self) -> str:
        """One line saying that hwemu served this process, and how much went through it."""
        s = self.summary()
        ioctls = sum(v for k, v in s.items() if k.startswith("ioctl "))
        sdma = sum(v for k, v in s.items() if k.startswith("SDMA_"))
        pm4 = sum(v for k, v in s.items() if k.isupper() and not k.startswith("SDMA_"))
        return (f"hwemu: MOCKKFD with {len(self.gpus)} emulated {self.arch}: {ioctls} ioctls, {pm4} PM4 packets, "
                f"{sdma} SDMA packets, {s.get('dispatches', 0)} dispatches, {s.get('waves', 0)} waves, "
                f"{s.get('wave_instructions', 0)} wave-instructions")

    def _report(self) -> None:
        """At exit under HWEMU_STATS: the line and the per-kernel table (emu.amd.kernel_stats)."""
        table = kernel_stats.format_table([(g.name, g.kernel_stats) for g in self.gpus])
        print(self.stats_line() + ("\n" + table if table else ""), file=sys.stderr, flush=True)

    def summary(self) -> dict[str, int]:
        """What went through the driver and the GPUs: ioctls by name, packets by name, dispatches, waves, ..."""
        out = {f"ioctl {k}": v for k, v in sorted(self.kfd.calls.items())}
        for g in self.gpus:
            for k, v in sorted(g.stats.items()):
                out[k] = out.get(k, 0) + v
            out["dispatches"] = out.get("dispatches", 0) + g.dispatches
        return out


class MockFileIO:
    """A file of the mock system or, for any other path, of the operating system (see the module docstring)."""
    system: MockSystem  # bound by interface()

    def __init__(self, path: str, flags: int = os.O_RDONLY, fd: int | None = None):
        self.path = os.path.normpath(path) if path else path
        self._real: FileIO | None = None
        if fd is not None or not self.system.owns(self.path):
            self._real = FileIO(path, flags) if fd is None else _wrap_fd(path, fd)
            self.fd = self._real.fd
            return
        fd = os.open("/dev/null", os.O_RDWR | os.O_CLOEXEC)
        try:
            attach(self.system, self.path, fd)
        except OSError:
            os.close(fd)
            raise
        self.fd, self._pos = fd, 0

    def __del__(self) -> None:
        fd = getattr(self, "fd", None)
        if fd is None or getattr(self, "_real", None) is not None:
            return  # the real file closes itself
        self.system.open_files.pop(fd, None)
        os.close(fd)
        self.fd = None

    def _node(self):
        return self.system.open_files.get(self.fd)

    def ioctl(self, request: int, arg) -> int:
        if self._real is not None:
            return self._real.ioctl(request, arg)
        return self.system.ioctl(self.fd, request, arg, self.path)

    def mmap(self, addr: int, size: int, prot: int, flags: int, offset: int) -> int:
        if self._real is not None:
            return self._real.mmap(addr, size, prot, flags, offset)
        return self.system.mmap(self.fd, addr, size, prot, flags, offset, self.path)

    def read(self, size: int | None = None, binary: bool = False, offset: int | None = None):
        if self._real is not None:
            return self._real.read(size, binary, offset)
        text = self.system.files.get(self.path)
        if text is None:
            raise OSError(errno.EINVAL if self.path in self.system.files else errno.EISDIR, f"{self.path}: not a "
                          "readable file")
        pos = self._pos if offset is None else offset
        data = text.encode()[pos:] if size is None else text.encode()[pos:pos + size]
        self._pos = pos + len(data)
        return data if binary else data.decode()

    def write(self, content, binary: bool = False, offset: int | None = None) -> None:
        if self._real is not None:
            return self._real.write(content, binary, offset)
        if not self.path.endswith(PERFORMANCE_LEVEL):
            raise OSError(errno.EACCES, f"{self.path}: read-only")
        try:
            level = (bytes(content).decode() if binary else str(content)).strip()
        except (TypeError, UnicodeDecodeError):
            raise OSError(errno.EINVAL, f"{self.path}: expected text, not {type(content).__name__}") from None
        if level not in PERFORMANCE_LEVELS:
            raise OSError(errno.EINVAL, f"{self.path}: {level!r} is not a level ({', '.join(PERFORMANCE_LEVELS)})")
        self.system.files[self.path] = level + "\n"
        self.system.written.add(self.path)

    def seek(self, offset: int) -> None:
        if self._real is not None:
            os.lseek(self.fd, offset, os.SEEK_SET)
        else:
            self._pos = offset

    def listdir(self) -> list[str]:
        return self._real.listdir() if self._real is not None else self.system.listdir(self.path)

    @classmethod
    def exists(cls, path: str) -> bool:
        return cls.system.exists(path) if cls.system.owns(path) else os.path.exists(path)

    @staticmethod
    def anon_mmap(addr: int, size: int, prot: int, flags: int, offset: int = 0) -> int:
        return FileIO.anon_mmap(addr, size, prot, flags, offset)

    @staticmethod
    def munmap(addr: int, size: int) -> None:
        os_munmap(addr, size)

    @staticmethod
    def readlink(path: str) -> str:
        return os.readlink(path)

    @staticmethod
    def eventfd(initval: int, flags: int = 0):
        return _wrap_fd("eventfd", os.eventfd(initval, flags))


def attach(system, path: str, fd: int) -> None:
    """Make `fd`, a descriptor the caller holds (of /dev/null), the open mock file `path` of `system` (a MockSystem, or
    emu.os.pci's system): the ioctls and mmaps of `fd` are then its node's (/dev/kfd, a render node; none for sysfs
    files). FileNotFoundError when the mock has no such file."""
    p = os.path.normpath(path)
    if not system.exists(p):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    node = "kfd" if p == "/dev/kfd" else system.render_gpu(p)
    if node is not None:
        system.open_files[fd] = node


def _wrap_fd(path: str, fd: int) -> FileIO:
    f = FileIO.__new__(FileIO)
    f.path, f.fd = path, fd
    return f


class Systems:
    """The process's mock systems of one interface: one per (chip, GPU count), each served by a file-I/O class of its
    own whose `system` it is."""

    def __init__(self, base: type, make: Callable[[str, int], object]) -> None:
        self.base, self.make = base, make
        self.classes: dict[tuple[str, int], type] = {}
        self.lock = threading.Lock()

    def interface(self, arch: str | None, gpus: int) -> type:
        key = ((arch or DEFAULT_ARCH).lower(), gpus)
        with self.lock:
            cls = self.classes.get(key)
            if cls is None:
                cls = self.classes[key] = type(self.base.__name__, (self.base,), {"system": self.make(*key)})
            return cls

    def all(self) -> list:
        return [c.system for c in self.classes.values()]


_mock = Systems(MockFileIO, MockSystem)


def _after_fork_in_child() -> None:
    """A forked child is a new process to the driver: the parent's queues are not its own, and its engine thread
    did not survive the fork (KFD likewise serves only the process that opened it)."""
    _mock.lock = threading.Lock()
    for s in systems():
        s.lock = threading.RLock()
        s.kfd.lock, s.kfd.cond = s.lock, threading.Condition(s.lock)
        s.engine.doorbells, s.engine._thread = Doorbells(), None
        for g in s.gpus:
            g.queues.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def interface(arch: str | None = None, gpus: int = 1) -> type[MockFileIO]:
    """The file-I/O interface class of the process's mock system with `gpus` GPUs of `arch` (default gfx1100)."""
    return _mock.interface(arch, gpus)


def systems() -> list[MockSystem]:
    """The mock systems this process has created."""
    return _mock.all()
