"""The adapter tinygrad 0.14 imports for `DEV=MOCK...+AMD`: `test.mockgpu.mockgpu.MockFileIOInterface`.

tinygrad's HCQ runtime (`tinygrad/runtime/support/hcq.py`) replaces its file-I/O interface with that class when
DEV's interface starts with MOCK, and then drives /dev/kfd, sysfs and the render nodes through it exactly as it
drives the real ones. The class here is hwemu's mock interface (emu.os) for the system DEV describes: MOCKKFD
(MOCK is the same), the arch of DEV (default gfx1100) and max(indices)+1 GPUs (default HWEMU_GPUS, else 1).
It is only a calling-convention adapter: the driver, queues and GPUs are emu.os's, shared with hwemu's own stack.

`install()` makes the module importable under that name before tinygrad asks for it, as an entry of
sys.modules, so it wins over CPython's own `test` package and over a tinygrad checkout's `test/mockgpu`; it is
a small module whose class is built on first use, so tinygrad may import it while its own hcq module is still
half-initialized. HWEMU=0 turns it off (a checkout's own mock is used again). It also sets CC to clang-19 when the
process has neither CC nor a `clang`: tinygrad's CPU device runs `CC` (default `clang`), and Debian's LLVM 19
packages, which also serve the AMD:LLVM renderer, name the compiler clang-19.
"""
from __future__ import annotations

import os
import shutil
import sys
import types

MODULE, USB_MODULE, EMU_MODULE = "test.mockgpu.mockgpu", "test.mockgpu.usb", "test.mockgpu.amd.emu"
SUPPORTED = ("MOCKKFD", "MOCK")


def enabled(env=os.environ) -> bool:
    """Whether hwemu should serve tinygrad in this process: DEV names a mock KFD interface and HWEMU is not 0."""
    dev = env.get("DEV", "")
    return env.get("HWEMU", "1") != "0" and any(t.strip().startswith(SUPPORTED) for t in dev.split(";"))


def mock_interface():
    """hwemu's file-I/O interface class for the mock system DEV describes."""
    from emu.os import interface
    from stack.device import parse_dev
    spec = parse_dev(os.environ.get("DEV", "MOCKKFD+AMD"))
    gpus = max(spec.indices) + 1 if spec.indices else int(os.environ.get("HWEMU_GPUS", "1"))
    return interface(spec.arch, gpus)


def _getattr(name: str):
    if name == "MockFileIOInterface":
        cls = mock_interface()
        setattr(sys.modules[MODULE], name, cls)
        return cls
    raise AttributeError(f"module {MODULE!r} has no attribute {name!r}")


class MockUSB3:
    """tinygrad imports a USB bridge model next to the KFD mock; hwemu emulates no USB-attached GPU."""

    def __init__(self, *args, **kwargs):
        raise RuntimeError("hwemu emulates GPUs behind the KFD interface (DEV=MOCKKFD+AMD); "
                           "USB-attached GPUs (MOCKUSB) are not emulated")


def install() -> bool:
    """Register the adapter modules (once); returns whether hwemu now serves tinygrad's mock interface."""
    if not enabled():
        return False
    if getattr(sys.modules.get(MODULE), "__hwemu__", False):
        return True
    mod = types.ModuleType(MODULE, __doc__)
    mod.__hwemu__ = True
    mod.__getattr__ = _getattr
    usb = types.ModuleType(USB_MODULE, MockUSB3.__doc__)
    usb.MockUSB3 = MockUSB3
    sys.modules[MODULE], sys.modules[USB_MODULE] = mod, usb
    from emu.os import tinygrad_emu  # tinygrad's test/amd run their ISA snippets through its run_asm: hwemu's
    sys.modules[EMU_MODULE] = tinygrad_emu
    if "CC" not in os.environ and shutil.which("clang") is None and shutil.which("clang-19") is not None:
        os.environ["CC"] = "clang-19"
    return True
