"""Where the compiler gets the vendor's pcode text: a lookup found through the `hwemu.pcode` entry point
(emu.amd.isa provides it), so emu.pcode imports nothing from the ISA packages that use it.

The lookup is any object with `family(arch) -> str` (the vendor tables' name; raising ValueError for an unknown
arch), `name(arch) -> str` (the name of the instruction set of arch: the chip's generation's, a family name's own),
`fp8(arch) -> str` (its fp8 / bf8 formats: "ocp", or "fnuz" where the texts' fp8 and bf8 mean the FNUZ formats)
and `load(arch)` returning that instruction set's tables, whose `by_name` maps (opcode space, name) to entries with
`enc`, `name`, `value` and `pcode` (the text, or None).
"""
from __future__ import annotations

import functools
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any, Protocol


class Tables(Protocol):
    by_name: Mapping[tuple[str, str], Any]


class VendorText(Protocol):
    def family(self, arch: str) -> str: ...

    def name(self, arch: str) -> str: ...

    def fp8(self, arch: str) -> str: ...

    def load(self, arch: str) -> Tables: ...


@functools.cache
def vendor() -> VendorText:
    """The registered vendor-text lookup."""
    found = entry_points(group="hwemu.pcode", name="amd")
    if not found:
        raise RuntimeError("no vendor pcode source: the 'hwemu.pcode' entry point 'amd' is not installed "
                           "(pip install -e . registers emu.amd.isa)")
    return next(iter(found)).load()
