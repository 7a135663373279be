"""The calling process's memory as a driver sees it: copies that fail with EFAULT instead of crashing.

`copy_from_user` / `copy_to_user` use process_vm_readv/writev on this process, so an unmapped or read-only
address is an errno, as in the kernel. `host_array` views mapped host memory as a numpy array (for buffers
a client handed to the device, e.g. USERPTR allocations); `is_mapped` checks a range against /proc/self/maps.
"""
from __future__ import annotations

import ctypes
import errno
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
        raise OSError(errno.EFAULT, f"{what}: {n} bytes at user address {addr:#x} are not accessible")


def copy_from_user(addr: int, n: int, what: str = "copy_from_user") -> bytes:
    buf = (ctypes.c_char * n)()
    _transfer(_libc.process_vm_readv, buf, addr, n, what)
    return buf.raw


def copy_to_user(addr: int, data: bytes, what: str = "copy_to_user") -> None:
    buf = (ctypes.c_char * len(data)).from_buffer_copy(data)
    _transfer(_libc.process_vm_writev, buf, addr, len(data), what)


def is_mapped(addr: int, size: int, writable: bool = True) -> bool:
    """Whether [addr, addr+size) lies in readable (and writable) mappings of this process."""
    end, pos = addr + size, addr
    with open("/proc/self/maps") as f:
        spans = sorted((int(a, 16), int(b, 16), perms) for a, b, perms in
                       ((*line.split()[0].split("-"), line.split()[1]) for line in f))
    for lo, hi, perms in spans:
        if hi <= pos or lo > pos:
            continue
        if perms[0] != "r" or (writable and perms[1] != "w"):
            return False
        pos = hi
        if pos >= end:
            return True
    return pos >= end


def host_array(addr: int, size: int) -> np.ndarray:
    """A uint8 numpy view of `size` bytes of this process's memory at `addr` (caller checked it is mapped)."""
    return np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(addr))
