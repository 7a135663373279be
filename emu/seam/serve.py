"""The in-process side of the native seam (emu/seam/python.c calls `call`): the mock device nodes a native client
opened, served by the process's mock system (emu.os.system), the one tinygrad's file-I/O hook reaches too.

The system has HWEMU_SEAM_GPUS (default 1) GPUs of HWEMU_SEAM_ARCH (default gfx1100), as `hwemu run` sets them. The
seam holds the descriptors (of /dev/null); the system knows which node each is. Every failure is answered with
-errno (OSError's; EIO, with the error on stderr, for anything else), never an exception into C.
"""
from __future__ import annotations

import atexit
import errno
import os
import sys
import traceback

from emu.amd.exec import jit
from emu.os import interface
from emu.os.system import attach
from emu.pcode.llvmjit import CLOSE_TIMEOUT, GATE
from emu.seam import ARCH, GPUS, LOG

OPEN, CLOSE, IOCTL, MMAP, DUP = range(5)  # emu/seam/seam.h's enum seam_request
NAMES = ("open", "close", "ioctl", "mmap", "dup")
STOP_WAIT = 60.0  # seconds the exit waits for each of hwemu's threads to end (a dispatch in flight runs to its end)
_system = None


def system():
    global _system
    if _system is None:
        _system = interface(os.environ.get(ARCH) or None, int(os.environ.get(GPUS) or 1)).system
    return _system


def _open(path: str, fd: int, flags: int, *_) -> int:
    attach(system(), path, fd)
    return 0


def _close(_, fd: int, *__) -> int:
    system().open_files.pop(fd, None)
    return 0


def _ioctl(_, fd: int, request: int, arg: int, *__) -> int:
    return system().ioctl(fd, request & 0xFFFFFFFF, arg)


def _mmap(_, fd: int, addr: int, size: int, prot: int, flags: int, offset: int) -> int:
    return system().mmap(fd, addr, size, prot, flags, offset)


def _dup(_, fd: int, new: int, *__) -> int:
    s = system()
    s.open_files[new] = s.open_files[fd]
    return 0


HANDLERS = (_open, _close, _ioctl, _mmap, _dup)


def call(request: int, path: str | None, *a: int) -> int:
    """One request of the seam (seam.h): its result, or -errno."""
    try:
        return HANDLERS[request](path, *a)
    except OSError as e:
        if os.environ.get(LOG, "0") not in ("", "0"):
            print(f"hwemu seam: {NAMES[request]}: {e}", file=sys.stderr)
        return -(e.errno or errno.EIO)
    except Exception:  # a bug in hwemu: the client gets EIO, and the traceback is shown
        print(f"hwemu seam: internal error in {NAMES[request]}:\n{traceback.format_exc()}", file=sys.stderr)
        return -errno.EIO


def at_exit() -> None:
    """The client is exiting (python.c, before any library's exit handler or destructor): hwemu's threads end first, so
    that none of them is inside native code (LLVM, numpy) while the libraries tear it down. Compiled code stops
    (GATE: no LLVM engine is made any more either), the mock GPUs' engine runs the packets in flight to their end,
    interpreted, then hwemu's exit functions run (HWEMU_STATS's report; the JIT closes), then the compile thread
    ends, finding the JIT closed. Work the client's own exit handlers still submit runs on the thread that waits."""
    GATE.close(CLOSE_TIMEOUT)
    if _system is not None and not _system.engine.stop(STOP_WAIT):
        print(f"hwemu seam: the mock GPUs' engine did not end within {STOP_WAIT:g} s of the exit", file=sys.stderr)
    atexit._run_exitfuncs()
    if not jit.background.stop(STOP_WAIT):
        print(f"hwemu seam: the compile thread did not end within {STOP_WAIT:g} s of the exit", file=sys.stderr)
