"""The DSP's virtual memory: 4 KiB pages mapped with permissions; an access outside them is a fault.

The emulated program reaches host memory only through these pages; a fault carries the address, size and
kind of the access (the core adds the packet and PC) and leaves the host untouched.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

PAGE = 4096


class MemoryFault(Exception):
    def __init__(self, addr: int, size: int, access: str, pc: int | None = None, packet: str = ""):
        self.addr, self.size, self.access, self.pc, self.packet = addr, size, access, pc, packet
        where = f" at pc {pc:#x} ({packet})" if pc is not None else ""
        super().__init__(f"{access} of {size} bytes at {addr:#010x}: not mapped for {access}{where}")


@dataclass
class _Page:
    data: bytearray
    perms: str  # subset of "rwx"


class Memory:
    def __init__(self) -> None:
        self.pages: dict[int, _Page] = {}
        self.generation = 0  # changes whenever a page is mapped, unmapped or gains permissions

    def map(self, addr: int, size: int, perms: str = "rw") -> None:
        """Map [addr, addr+size) (page-rounded), zero-filled; pages already mapped keep their contents."""
        self.generation += 1
        for n in range(addr // PAGE, (addr + size + PAGE - 1) // PAGE):
            page = self.pages.get(n)
            if page is None:
                self.pages[n] = _Page(bytearray(PAGE), perms)
            else:
                page.perms = "".join(sorted(set(page.perms) | set(perms)))

    def unmap(self, addr: int, size: int) -> None:
        self.generation += 1
        for n in range(addr // PAGE, (addr + size + PAGE - 1) // PAGE):
            self.pages.pop(n, None)

    def mapped(self, addr: int, size: int) -> bool:
        return all(n in self.pages for n in range(addr // PAGE, (addr + max(size, 1) + PAGE - 1) // PAGE))

    def _span(self, addr: int, size: int, access: str):
        addr &= 0xFFFFFFFF
        while size > 0:
            page = self.pages.get(addr // PAGE)
            if page is None or access[0] not in page.perms:
                raise MemoryFault(addr, size, access)
            off = addr % PAGE
            n = min(size, PAGE - off)
            yield page.data, off, n
            addr, size = (addr + n) & 0xFFFFFFFF, size - n

    def check(self, addr: int, size: int, access: str) -> None:
        """Raise the fault an access would raise, changing nothing."""
        for _ in self._span(addr, size, access):
            pass

    def read(self, addr: int, size: int, access: str = "read") -> bytes:
        if size <= 0:
            return b""
        spans = list(self._span(addr, size, access))
        return b"".join(bytes(d[o:o + n]) for d, o, n in spans)

    def write(self, addr: int, data: bytes | bytearray | memoryview) -> None:
        spans = list(self._span(addr, len(data), "write"))  # all pages checked before any byte changes
        k = 0
        for d, o, n in spans:
            d[o:o + n] = data[k:k + n]
            k += n

    def words(self, addr: int, n: int) -> list[int]:
        """The n little-endian words from addr as the core fetches a packet: 0 for a word on an unmapped page (a
        mapped page without read permission faults as a read)."""
        page, off = self.pages.get(addr // PAGE), addr % PAGE
        if page is not None and "r" in page.perms and off + 4 * n <= PAGE:  # one page: one unpack
            return list(struct.unpack_from(f"<{n}I", page.data, off))
        return [self.load(4, addr + 4 * k) if self.mapped(addr + 4 * k, 4) else 0 for k in range(n)]

    def load(self, size: int, addr: int) -> int:
        return int.from_bytes(self.read(addr, size), "little")

    def store(self, size: int, addr: int, value: int) -> None:
        self.write(addr, (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little"))
