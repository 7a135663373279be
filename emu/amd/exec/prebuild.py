"""The native tiers' code that no kernel shapes, built ahead: `python -m emu.amd.exec.prebuild` (./dev runs it).

The VM's access functions every native region and handler calls (emu.amd.exec.access) compile once per machine and
wave size into hwemu's cache, some 0.4 s (wave32) and 0.9 s (wave64) of LLVM, at the first dispatch that needs them.
Built at install time instead, a run on an empty cache pays only for its kernels' own code. Nothing else changes: a
cache without them (another HWEMU_CACHE, hwemu's sources changed since) is filled at first use as before."""
from __future__ import annotations

from emu.amd.exec import access, jit


def prebuild() -> None:
    """Load, or compile into the cache, the access functions of both wave sizes."""
    for lanes in (32, 64):
        access.ensure(lanes, jit.sources())


if __name__ == "__main__":
    prebuild()
