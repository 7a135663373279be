"""The calling process's memory as a driver sees it: copies that fail with EFAULT instead of crashing.

`copy_from_user` / `copy_to_user` use process_vm_readv/writev on this process, so an unmapped or read-only
address is an errno, as in the kernel. `host_array` views mapped host memory as a numpy array (for buffers
a client handed to the device, e.g. USERPTR allocations); `accessible` checks that a range is mapped readable
(and writable), cheaply enough to ask before every packet: one PROCMAP_QUERY ioctl on /proc/self/maps per
mapping it spans (Linux 6.11+), else by reading /proc/self/maps whole (`is_mapped`).
"""
from __future__ import annotations

import bisect
import ctypes
import errno
import fcntl
import os

import numpy as np

_libc = ctypes.CDLL(None, use_errno=True)


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


for _f in (_libc.process_vm_readv, _libc.process_vm_writev):
    _f.restype = ctypes.c_ssize_t
    _f.argtypes = [ctypes.c_int, ctypes.POINTER(_IoVec), ctypes.c_ulong, ctypes.POINTER(_IoVec), ctypes.c_ulong,
                   ctypes.c_ulong]


def _transfer(fn, local: ctypes.Array, addr: int, n: int, what: str) -> None:
    if n == 0:
        return
    if not 0 < addr < 1 << 64 or addr + n > 1 << 64:
        raise OSError(errno.EFAULT, f"{what}: bad user address {addr:#x}")
    lv, rv = _IoVec(ctypes.addressof(local), n), _IoVec(addr, n)
    got = fn(os.getpid(), ctypes.byref(lv), 1, ctypes.byref(rv), 1, 0)
    if got != n:
        access = "writable" if fn is _libc.process_vm_writev else "readable"
        raise OSError(errno.EFAULT, f"{what}: {n} bytes at user address {addr:#x} are not {access}")


def copy_from_user(addr: int, n: int, what: str = "copy_from_user") -> bytes:
    buf = (ctypes.c_char * n)()
    _transfer(_libc.process_vm_readv, buf, addr, n, what)
    return buf.raw


def copy_to_user(addr: int, data: bytes, what: str = "copy_to_user") -> None:
    buf = (ctypes.c_char * len(data)).from_buffer_copy(data)
    _transfer(_libc.process_vm_writev, buf, addr, len(data), what)


_parsed: tuple[bytes, list] = (b"", [])  # the text of /proc/self/maps last parsed, and its (lo, hi, perms) spans


def _spans() -> list:
    """This process's mappings now: /proc/self/maps is read each time but parsed only when its text changed (an
    engine turn asks for each USERPTR buffer; the address space rarely changes between turns)."""
    global _parsed
    with open("/proc/self/maps", "rb") as f:
        text = f.read()
    if text != _parsed[0]:
        _parsed = (text, sorted((int(a, 16), int(b, 16), perms.decode()) for a, b, perms in
                                ((*line.split()[0].split(b"-"), line.split()[1]) for line in text.splitlines())))
    return _parsed[1]


def is_mapped(addr: int, size: int, writable: bool = True) -> bool:
    """Whether [addr, addr+size) lies in readable (and writable) mappings of this process."""
    end, pos = addr + size, addr
    spans = _spans()
    for lo, hi, perms in spans[max(0, bisect.bisect_right(spans, (addr, 1 << 64)) - 1):]:
        if hi <= pos or lo > pos:
            continue
        if perms[0] != "r" or (writable and perms[1] != "w"):
            return False
        pos = hi
        if pos >= end:
            return True
    return pos >= end


class _ProcmapQuery(ctypes.Structure):
    """struct procmap_query of linux/fs.h (Linux 6.11): the VMA covering query_addr with the permissions asked."""
    _fields_ = [(n, ctypes.c_uint64) for n in ("size", "query_flags", "query_addr", "vma_start", "vma_end",
                                                "vma_flags", "vma_page_size", "vma_offset", "inode")] \
        + [(n, ctypes.c_uint32) for n in ("dev_major", "dev_minor", "vma_name_size", "build_id_size")] \
        + [("vma_name_addr", ctypes.c_uint64), ("build_id_addr", ctypes.c_uint64)]


PROCMAP_QUERY = 3 << 30 | ctypes.sizeof(_ProcmapQuery) << 16 | ord("f") << 8 | 17  # _IOWR('f', 17, ...)
VMA_READABLE, VMA_WRITABLE = 1, 2
_maps: tuple[int, int | None] = (-1, None)  # (pid, fd of its /proc/self/maps or None without PROCMAP_QUERY)
# The query keeps the GIL (PyDLL): it returns in about a microsecond, and a call that let the GIL go would wait up
# to a switch interval to get it back from a busy client thread, once per query.
_query = ctypes.PyDLL(None, use_errno=True).ioctl
_query.argtypes, _query.restype = (ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p), ctypes.c_int


def _maps_fd() -> int | None:
    """This process's /proc/self/maps opened once per pid (a forked child opens its own), None on kernels without
    PROCMAP_QUERY."""
    global _maps
    pid = os.getpid()
    if _maps[0] != pid:
        fd = os.open("/proc/self/maps", os.O_RDONLY | os.O_CLOEXEC)
        q = _ProcmapQuery(size=ctypes.sizeof(_ProcmapQuery), query_addr=0, query_flags=0)
        try:
            fcntl.ioctl(fd, PROCMAP_QUERY, q)
        except OSError as e:
            if e.errno != errno.ENOENT:  # ENOENT: no VMA at 0, the query works
                os.close(fd)
                fd = None
        _maps = (pid, fd)
    return _maps[1]


def accessible(addr: int, size: int, writable: bool = True) -> bool:
    """Whether [addr, addr+size) lies in readable (and writable) mappings of this process now."""
    return not inaccessible([(addr, size, writable)])


def inaccessible(ranges: list[tuple[int, int, bool]]) -> list[int]:
    """The indices of `ranges` ((addr, size, writable) each) that do not lie in readable (and, where asked,
    writable) mappings of this process now. Ranges in one mapping cost one query between them."""
    fd = _maps_fd()
    if fd is None:
        return [i for i, (a, n, w) in enumerate(ranges) if not is_mapped(a, n, w)]
    q = _ProcmapQuery(size=ctypes.sizeof(_ProcmapQuery), query_flags=VMA_READABLE)
    ref = ctypes.addressof(q)
    seen: list[tuple[int, int, int]] = []  # (start, end, flags) of the mappings queried so far

    def vma(pos: int) -> tuple[int, int, int] | None:
        for v in seen:
            if v[0] <= pos < v[1]:
                return v
        q.query_addr = pos
        if _query(fd, PROCMAP_QUERY, ref) != 0:
            err = ctypes.get_errno()
            if err == errno.ENOENT:
                return None
            raise OSError(err, f"PROCMAP_QUERY at {pos:#x}: {os.strerror(err)}")
        seen.append((q.vma_start, q.vma_end, q.vma_flags))
        return seen[-1]

    bad = []
    for i, (addr, size, writable) in enumerate(ranges):
        pos, end = addr, addr + size
        while pos < end:
            v = vma(pos)
            if v is None or writable and not v[2] & VMA_WRITABLE:
                bad.append(i)
                break
            pos = v[1]
    return bad


def host_array(addr: int, size: int) -> np.ndarray:
    """A uint8 numpy view of `size` bytes of this process's memory at `addr` (caller checked it is mapped)."""
    return np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(addr))


def argument_bytes(arg, n: int, what: str) -> bytes:
    """The n argument bytes of an ioctl: from a buffer object, or from the user address an int names."""
    if isinstance(arg, int):
        return copy_from_user(arg, n, what)
    try:
        mv = memoryview(arg).cast("B")
    except TypeError:
        raise OSError(errno.EFAULT, f"{what}: the argument is neither a buffer nor an address") from None
    if len(mv) < n:
        raise OSError(errno.EFAULT, f"{what}: the argument has {len(mv)} bytes, the request says {n}")
    return bytes(mv[:n])


def store_argument(arg, data: bytes, what: str) -> None:
    """Store an ioctl's result bytes into its argument: EFAULT for a read-only buffer (bytes) or address."""
    if isinstance(arg, int):
        copy_to_user(arg, data, what)
        return
    mv = memoryview(arg).cast("B")
    if mv.readonly:
        raise OSError(errno.EFAULT, f"{what}: the argument is a read-only {type(arg).__name__} buffer; the request "
                                    "returns its result in it")
    mv[:len(data)] = data
