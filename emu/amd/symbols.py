"""Kernel names of dispatches: from what the launcher knows, else from the dynamic symbols of the code object that
holds the entry (as loaded in the GPU VM)."""
from __future__ import annotations

import weakref

from emu.amd.memory import GPUFault
from objfile.elf import STT_FUNC, ElfError, dynamic_symbols


def dispatch_name(vm, d) -> str:
    """The kernel of dispatch `d` (emu.amd.dispatch.Dispatch): the launcher's name for it, else kernel_name."""
    return d.kernel.name if d.kernel is not None else kernel_name(vm, d.program, d.entry)


def kernel_name(vm, program, entry: int) -> str:
    """The name of the function holding `entry`, from the dynamic symbols of the code object loaded at the start of
    the code's mapping; `kernel@ENTRY` when the mapping holds none (the client's memory is read as untrusted)."""
    names = _names.setdefault(program, {})
    name = names.get(entry)
    if name is None:
        m = vm.mapping(entry)
        try:
            syms = dynamic_symbols(lambda at, n: vm.read(m.va + at, n), m.size) if m is not None else []
        except (GPUFault, ElfError):
            syms = []
        off = entry - (m.va if m is not None else 0)
        name = next((s.name for s in syms if s.info & 0xF == STT_FUNC and s.value <= off < s.value + max(s.size, 1)),
                    f"kernel@{entry:#x}")
        names[entry] = name
    return name


_names: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # Program -> {entry: kernel name}
