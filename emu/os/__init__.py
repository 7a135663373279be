"""The seam between a process and the mock devices (emu.os.system): `interface(arch, gpus)` (the `hwemu.interfaces`
entry point MOCKKFD) gives the file-I/O interface class of a mock system, `systems()` the systems made so far.

Both import emu.os.system on first use: every Python process under `hwemu run` imports this package at start (its
boot hook installs the tinygrad adapter), and one that never opens a mock device (pytest's controller, a compiler
pool's workers) does not pay for importing the GPU model.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from emu.os.system import MockFileIO, MockSystem


def interface(arch: str | None = None, gpus: int = 1) -> type[MockFileIO]:
    """The file-I/O interface class of the process's mock system with `gpus` GPUs of `arch` (default gfx1100)."""
    from emu.os import system
    return system.interface(arch, gpus)


def systems() -> list[MockSystem]:
    """The mock systems this process has created."""
    from emu.os import system
    return system.systems()
