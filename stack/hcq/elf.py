"""A reader of 64-bit little-endian ELF files, the format of HSA code objects (System V gABI, "Object Files").

It reads what a code-object loader needs: the file header, the section headers with their names from the
section-name string table, the program headers, symbol tables (SHT_SYMTAB, SHT_DYNSYM) with their names, SHT_RELA
relocations and section data. Every offset, count and size the file gives is checked against the file before it is
used, so a damaged file never causes a large allocation, and no byte is read as part of two sections (the gABI's
rule: sections do not overlap), so the work stays linear in the file size; anything malformed raises `ElfError`
naming the table, the index and the offsets.

  elf = Elf(data)                    # read_header(data) reads the file header alone
  elf.header                         # Header: e_type, e_machine, e_flags, ... (e_ident is data[:16])
  elf.sections, elf.segments         # tuples of Section (name, type, flags, addr, offset, size, ...) and Segment
  elf.data(section)                  # its bytes (b"" for SHT_NOBITS)
  elf.symbols(section)               # list of Symbol (name, value, size, info, other, shndx)
  elf.relocations(section)           # list of Rela (offset, info, addend; .sym, .type)
"""
from __future__ import annotations

import struct
from typing import NamedTuple

import numpy as np

SHT_SYMTAB, SHT_STRTAB, SHT_RELA, SHT_NOTE, SHT_NOBITS, SHT_DYNSYM = 2, 3, 4, 7, 8, 11
SHN_UNDEF, SHN_XINDEX, PN_XNUM = 0, 0xFFFF, 0xFFFF
PT_LOAD = 1

_HEADER = struct.Struct("<HHIQQQIHHHHHH")  # after the 16-byte e_ident
_SHDR = struct.Struct("<IIQQQQIIQQ")
_PHDR = struct.Struct("<IIQQQQQQ")
_SYM = struct.Struct("<IBBHQQ")
_RELA = struct.Struct("<QQq")


class ElfError(ValueError):
    """A malformed ELF file; the message names the table, the index and the offsets."""


class Header(NamedTuple):
    e_type: int
    e_machine: int
    e_version: int
    e_entry: int
    e_phoff: int
    e_shoff: int
    e_flags: int
    e_ehsize: int
    e_phentsize: int
    e_phnum: int
    e_shentsize: int
    e_shnum: int
    e_shstrndx: int


class Section(NamedTuple):
    index: int
    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    addralign: int
    entsize: int

    @property
    def where(self) -> str:
        return f"section {self.index} {self.name!r}"


class Segment(NamedTuple):
    """A program header."""
    type: int
    flags: int
    offset: int
    vaddr: int
    paddr: int
    filesz: int
    memsz: int
    align: int


class Symbol(NamedTuple):
    name: str
    value: int
    size: int
    info: int
    other: int
    shndx: int


class Rela(NamedTuple):
    offset: int
    info: int
    addend: int

    @property
    def sym(self) -> int:
        return self.info >> 32

    @property
    def type(self) -> int:
        return self.info & 0xFFFFFFFF


def read_header(data: bytes) -> Header:
    """The file header of an ELF64 little-endian file."""
    if len(data) < 64 or data[:4] != b"\x7fELF":
        raise ElfError("not an ELF file (bad magic or shorter than an ELF header)")
    if data[4] != 2 or data[5] != 1:
        raise ElfError("not a 64-bit little-endian ELF")
    return Header._make(_HEADER.unpack_from(data, 16))


class Elf:
    """The tables of one ELF64 little-endian file (`data`), checked against its size."""

    def __init__(self, data: bytes):
        self.raw = data
        h = self.header = read_header(data)
        extended = h.e_shnum == 0 or h.e_shstrndx == SHN_XINDEX or h.e_phnum == PN_XNUM
        # section 0 holds the counts that do not fit the file header (extended numbering)
        first = self._section_headers(h.e_shoff, 1, h.e_shentsize) if h.e_shoff and extended else None
        shnum = 0 if not h.e_shoff else first[0][5] if h.e_shnum == 0 else h.e_shnum
        shstrndx = first[0][6] if h.e_shstrndx == SHN_XINDEX and first else h.e_shstrndx
        phnum = first[0][7] if h.e_phnum == PN_XNUM and first else h.e_phnum
        headers = self._section_headers(h.e_shoff, shnum, h.e_shentsize)
        self.sections = self._named(headers, shstrndx)
        for s in self.sections:
            if s.type != SHT_NOBITS and s.offset + s.size > len(data):
                raise ElfError(f"{s.where} [{s.offset:#x}, {s.offset + s.size:#x}) runs past the end of the file "
                               f"({len(data):#x} bytes)")
        spans = sorted((s.offset, s.offset + s.size, s.index) for s in self.sections if s.type != SHT_NOBITS and s.size)
        for (_, end, i), (start, _, j) in zip(spans, spans[1:], strict=False):
            if start < end:
                raise ElfError(f"{self.sections[j].where} at {start:#x} overlaps {self.sections[i].where}, which ends "
                               f"at {end:#x}")
        self._symbols: dict[int, list[Symbol]] = {}
        self._table("program", h.e_phoff, phnum, h.e_phentsize, _PHDR.size)
        self.segments = tuple(Segment._make(_PHDR.unpack_from(data, h.e_phoff + i * _PHDR.size))
                              for i in range(phnum))

    def _table(self, what: str, offset: int, count: int, entsize: int, size: int) -> None:
        """Check that `count` entries of `size` bytes at `offset` lie inside the file."""
        if count and entsize != size:
            raise ElfError(f"{what} header table: entry size {entsize}, not {size}")
        if count and offset + count * size > len(self.raw):
            raise ElfError(f"{what} header table [{offset:#x}, {offset + count * size:#x}) runs past the end of the "
                           f"file ({len(self.raw):#x} bytes): truncated?")

    def _section_headers(self, offset: int, count: int, entsize: int) -> list[tuple]:
        self._table("section", offset, count, entsize, _SHDR.size)
        return list(_SHDR.iter_unpack(self.raw[offset:offset + count * _SHDR.size]))

    def _named(self, headers: list[tuple], shstrndx: int) -> tuple[Section, ...]:
        if shstrndx == SHN_UNDEF or not headers:
            return tuple(Section(i, "", *h[1:]) for i, h in enumerate(headers))
        if shstrndx >= len(headers):
            raise ElfError(f"e_shstrndx {shstrndx} is outside the section header table ({len(headers)} sections)")
        strtab = Section(shstrndx, "", *headers[shstrndx][1:])
        where = f"the section-name string table (section {shstrndx})"
        if strtab.type == SHT_NOBITS or strtab.offset + strtab.size > len(self.raw):
            raise ElfError(f"{where} [{strtab.offset:#x}, {strtab.offset + strtab.size:#x}) has no data in the file "
                           f"({len(self.raw):#x} bytes)")
        names = self._strings(strtab, [h[0] for h in headers], "section {} name", where)
        return tuple(Section(i, name, *h[1:]) for i, (name, h) in enumerate(zip(names, headers, strict=True)))

    def _strings(self, strtab: Section, offsets: list[int], what: str, where: str) -> list[str]:
        """The NUL-terminated strings at `offsets` in string table `strtab` (UTF-8, bad bytes replaced); `what`
        formatted with i names entry i in errors, `where` the table. The NULs are found in one pass over the table
        (a search per string could scan a long table once for each)."""
        table = self.raw[strtab.offset:strtab.offset + strtab.size]
        nuls = np.flatnonzero(np.frombuffer(table, np.uint8) == 0)
        ends = np.append(nuls, -1)[np.searchsorted(nuls, offsets)].tolist()  # -1: no NUL at or after the offset
        for i, (offset, end) in enumerate(zip(offsets, ends, strict=True)):
            if offset >= len(table):
                raise ElfError(f"{what.format(i)}: offset {offset:#x} lies outside {where} ({len(table):#x} bytes)")
            if end < 0:
                raise ElfError(f"{what.format(i)}: the string at offset {offset:#x} of {where} has no terminating NUL")
        return [table[o:e].decode("utf-8", errors="replace") for o, e in zip(offsets, ends, strict=True)]

    def data(self, section: Section) -> bytes:
        """The section's bytes (b"" for SHT_NOBITS; bounds were checked when the file was read)."""
        return b"" if section.type == SHT_NOBITS else self.raw[section.offset:section.offset + section.size]

    def _entries(self, section: Section, struct_: struct.Struct, what: str) -> list[tuple]:
        if section.entsize != struct_.size:
            raise ElfError(f"{section.where}: sh_entsize {section.entsize} is not the {struct_.size} bytes of {what}")
        return list(struct_.iter_unpack(self.data(section)[:section.size // struct_.size * struct_.size]))

    def symbols(self, section: Section) -> list[Symbol]:
        """The symbols of a symbol table section, index 0 (the null symbol) included, named from its sh_link."""
        if section.index in self._symbols:
            return self._symbols[section.index]
        link = section.link
        if not 0 < link < len(self.sections) or self.sections[link].type != SHT_STRTAB:
            raise ElfError(f"{section.where}: sh_link {link} is not a string table section")
        strtab = self.sections[link]
        entries = self._entries(section, _SYM, "a symbol")
        names = self._strings(strtab, [e[0] for e in entries], f"{section.where} symbol {{}} name", strtab.where)
        out = self._symbols[section.index] = [Symbol(name, e[4], e[5], e[1], e[2], e[3])
                                              for name, e in zip(names, entries, strict=True)]
        return out

    def relocations(self, section: Section) -> list[Rela]:
        """The entries of an SHT_RELA section."""
        return [Rela._make(e) for e in self._entries(section, _RELA, "a RELA entry")]
