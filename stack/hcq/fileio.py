"""The file-I/O interface through which the runtime reaches devices: the OS seam.

`FileIO` is the real one (device files, sysfs, ioctl, mmap of the operating system). A mock interface (e.g.
hwemu's MOCKKFD, `emu.os.MockFileIO`) has the same call contract and is found by name through the
`hwemu.interfaces` entry-point group, so this package never imports the emulator:

    io = file_interface("MOCKKFD", arch="gfx1100", gpus=1)   # or "KFD" for the operating system's own
    kfd = io("/dev/kfd", os.O_RDWR)                # .path, .fd (an int)
    kfd.ioctl(request, args)                       # args: a ctypes struct, updated in place; errors: OSError(errno)
    addr = kfd.mmap(addr, size, prot, flags, offset)
    text = io("/sys/.../properties").read()        # read(size=None, binary=False, offset=None); write(...)
    io("/sys/.../nodes").listdir(); io.exists(path); io.anon_mmap(addr, size, prot, flags, 0); io.munmap(addr, size)
"""
from __future__ import annotations

import ctypes
import fcntl
import os
from importlib.metadata import entry_points

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
MAP_FAILED = ctypes.c_void_p(-1).value

PROT_NONE, PROT_READ, PROT_WRITE = 0, 1, 2
MAP_SHARED, MAP_PRIVATE, MAP_FIXED, MAP_ANONYMOUS, MAP_NORESERVE = 0x01, 0x02, 0x10, 0x20, 0x4000


def os_mmap(addr: int, size: int, prot: int, flags: int, fd: int, offset: int) -> int:
    """mmap(2); raises OSError(errno) on failure."""
    r = _libc.mmap(addr or None, size, prot, flags, fd, offset)
    if r in (None, MAP_FAILED):
        e = ctypes.get_errno()
        raise OSError(e, f"mmap of {size:#x} bytes at {addr or 0:#x} (fd {fd}, offset {offset:#x}): {os.strerror(e)}")
    return r


def os_munmap(addr: int, size: int) -> None:
    if _libc.munmap(addr, size):
        e = ctypes.get_errno()
        raise OSError(e, f"munmap of {size:#x} bytes at {addr:#x}: {os.strerror(e)}")


class FileIO:
    """A file of the operating system (device node or sysfs attribute)."""

    def __init__(self, path: str, flags: int = os.O_RDONLY):
        self.path = path
        self.fd = os.open(path, flags)

    def __del__(self) -> None:
        if getattr(self, "fd", None) is not None:
            os.close(self.fd)
            self.fd = None

    def ioctl(self, request: int, arg) -> int:
        return fcntl.ioctl(self.fd, request, arg)

    def mmap(self, addr: int, size: int, prot: int, flags: int, offset: int) -> int:
        return os_mmap(addr, size, prot, flags, self.fd, offset)

    def read(self, size: int | None = None, binary: bool = False, offset: int | None = None):
        if offset is not None:
            os.lseek(self.fd, offset, os.SEEK_SET)
        with open(self.fd, "rb" if binary else "r", closefd=False) as f:
            return f.read(size)

    def write(self, content, binary: bool = False, offset: int | None = None) -> None:
        if offset is not None:
            os.lseek(self.fd, offset, os.SEEK_SET)
        with open(self.fd, "wb" if binary else "w", closefd=False) as f:
            f.write(content)

    def listdir(self) -> list[str]:
        return os.listdir(self.path)

    @staticmethod
    def exists(path: str) -> bool:
        return os.path.exists(path)

    @staticmethod
    def anon_mmap(addr: int, size: int, prot: int, flags: int, offset: int = 0) -> int:
        return os_mmap(addr, size, prot, flags | MAP_ANONYMOUS, -1, offset)

    @staticmethod
    def munmap(addr: int, size: int) -> None:
        os_munmap(addr, size)


def file_interface(name: str, arch: str | None = None, gpus: int = 1) -> type:
    """The file-I/O interface class for an interface name from DEV: the OS's for KFD, a mock's by entry point.

    A mock's entry point is a callable `(arch, gpus) -> class` giving the interface of a mock system with `gpus`
    emulated GPUs of `arch` (None: the mock's default); the same arguments give the same system."""
    if not name.startswith("MOCK"):
        return FileIO
    found = [ep for ep in entry_points(group="hwemu.interfaces") if ep.name == name]
    if not found:
        known = sorted(ep.name for ep in entry_points(group="hwemu.interfaces"))
        raise LookupError(f"no mock interface {name!r} is installed (hwemu.interfaces entry points: {known})")
    return found[0].load()(arch, gpus)
