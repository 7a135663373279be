"""Kernel names of dispatches: from what the launcher knows, else from the dynamic symbols of the code object that
holds the entry (as loaded in the GPU VM)."""
from __future__ import annotations

import struct
import weakref

from emu.amd.memory import GPUFault

PT_DYNAMIC, DT_NULL, DT_HASH, DT_STRTAB, DT_SYMTAB, DT_STRSZ, STT_FUNC = 2, 0, 4, 5, 6, 10, 2
MAX_SYMBOLS, MAX_STRTAB = 1 << 16, 1 << 20


def dispatch_name(vm, d) -> str:
    """The kernel of dispatch `d` (emu.amd.dispatch.Dispatch): the launcher's name for it, else kernel_name."""
    return d.kernel.name if d.kernel is not None else kernel_name(vm, d.program, d.entry)


def kernel_name(vm, program, entry: int) -> str:
    """The name of the function holding `entry`, from the dynamic symbols of the code object loaded at the start of
    the code's mapping (its ELF header, program headers and .dynsym are in its first PT_LOAD segment)."""
    names = _names.setdefault(program, {})
    name = names.get(entry)
    if name is None:
        m = vm.mapping(entry)
        try:
            syms = _functions(vm, m.va) if m is not None else []
        except (GPUFault, struct.error, ValueError):
            syms = []
        off = entry - (m.va if m is not None else 0)
        name = next((n for value, size, n in syms if value <= off < value + max(size, 1)), f"kernel@{entry:#x}")
        names[entry] = name
    return name


_names: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # Program -> {entry: kernel name}


def _functions(vm, base: int) -> list[tuple[int, int, str]]:
    """(value, size, name) of the STT_FUNC symbols in the DT_SYMTAB of the ELF image at `base`."""
    head = vm.read(base, 64)
    if head[:5] != b"\x7fELF\x02":
        return []
    phoff, = struct.unpack_from("<Q", head, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
    phdrs = vm.read(base + phoff, phentsize * min(phnum, 64))
    dynamic = next((struct.unpack_from("<Q", phdrs, i + 16)[0] for i in range(0, len(phdrs), phentsize)
                    if struct.unpack_from("<I", phdrs, i)[0] == PT_DYNAMIC), None)
    if dynamic is None:
        return []
    tags = {}
    for i in range(0, 64 * 16, 16):
        tag, value = struct.unpack("<qQ", vm.read(base + dynamic + i, 16))
        if tag == DT_NULL:
            break
        tags[tag] = value
    if not {DT_HASH, DT_STRTAB, DT_SYMTAB} <= tags.keys():
        return []
    nsyms = min(struct.unpack("<II", vm.read(base + tags[DT_HASH], 8))[1], MAX_SYMBOLS)
    strtab = vm.read(base + tags[DT_STRTAB], min(tags.get(DT_STRSZ, 0), MAX_STRTAB))
    out = []
    for i in range(nsyms):
        st_name, info, _, _, value, size = struct.unpack("<IBBHQQ", vm.read(base + tags[DT_SYMTAB] + 24 * i, 24))
        if info & 0xF == STT_FUNC:
            out.append((value, size, strtab[st_name:strtab.index(b"\0", st_name)].decode(errors="replace")))
    return out
