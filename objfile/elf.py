"""A reader of little-endian ELF files, 64-bit (HSA code objects) and 32-bit (Hexagon programs) (System V gABI,
"Object Files").

It reads what a program or code-object loader needs: the file header, the section headers with their names from the
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

`dynamic_symbols(read, size)` reads the other view of the same file: an image as a loader placed it in memory (the
dynamic segment's symbol table, found through the program headers), for memory a client wrote.
"""
from __future__ import annotations

import struct
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

SHT_SYMTAB, SHT_STRTAB, SHT_RELA, SHT_NOTE, SHT_NOBITS, SHT_DYNSYM = 2, 3, 4, 7, 8, 11
SHN_UNDEF, SHN_XINDEX, PN_XNUM = 0, 0xFFFF, 0xFFFF
PT_LOAD, PT_DYNAMIC = 1, 2
STT_FUNC = 2  # st_info's low four bits
DT_NULL, DT_HASH, DT_STRTAB, DT_SYMTAB, DT_STRSZ, DT_SYMENT = 0, 4, 5, 6, 10, 11
MAX_DYNAMIC_TABLE = 1 << 22  # bytes: the most dynamic_symbols reads of one table (a loaded image is not a file)


class _Class(NamedTuple):
    """The table layouts of one ELF class (e_ident[EI_CLASS]), each field order mapped onto the tuples below."""
    header: struct.Struct  # after the 16-byte e_ident
    shdr: struct.Struct
    phdr: struct.Struct
    phdr_order: tuple[int, ...]  # Segment's fields, as indices into a program header entry
    sym: struct.Struct
    sym_order: tuple[int, ...]  # Symbol's value, size, info, other, shndx as indices into an entry
    rela: struct.Struct
    sym_shift: int  # r_info: the symbol index above, the type below
    dyn: struct.Struct  # d_tag, d_val


_CLASSES = {
    2: _Class(struct.Struct("<HHIQQQIHHHHHH"), struct.Struct("<IIQQQQIIQQ"), struct.Struct("<IIQQQQQQ"),
              (0, 1, 2, 3, 4, 5, 6, 7), struct.Struct("<IBBHQQ"), (4, 5, 1, 2, 3), struct.Struct("<QQq"), 32,
              struct.Struct("<qQ")),
    1: _Class(struct.Struct("<HHIIIIIHHHHHH"), struct.Struct("<IIIIIIIIII"), struct.Struct("<IIIIIIII"),
              (0, 6, 1, 2, 3, 4, 5, 7), struct.Struct("<IIIBBH"), (1, 2, 3, 4, 5), struct.Struct("<IIi"), 8,
              struct.Struct("<iI")),
}


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
    sym: int
    type: int
    addend: int


def _class(data: bytes) -> _Class:
    if len(data) < 16 or data[:4] != b"\x7fELF":
        raise ElfError("not an ELF file (bad magic or shorter than an ELF header)")
    if data[4] not in _CLASSES or data[5] != 1:
        raise ElfError(f"not a little-endian ELF of 32 or 64 bits (EI_CLASS {data[4]}, EI_DATA {data[5]})")
    c = _CLASSES[data[4]]
    if len(data) < 16 + c.header.size:
        raise ElfError("not an ELF file (shorter than an ELF header)")
    return c


def read_header(data: bytes) -> Header:
    """The file header of a little-endian ELF file (ELFCLASS64 or ELFCLASS32)."""
    return Header._make(_class(data).header.unpack_from(data, 16))


def _strings(table: bytes, offsets: list[int], what: str, where: str) -> list[str]:
    """The NUL-terminated strings at `offsets` in string table `table` (UTF-8, bad bytes replaced); `what` formatted
    with i names entry i in errors, `where` the table. The NULs are found in one pass over the table (a search per
    string could scan a long table once for each)."""
    nuls = np.flatnonzero(np.frombuffer(table, np.uint8) == 0)
    ends = np.append(nuls, -1)[np.searchsorted(nuls, offsets)].tolist()  # -1: no NUL at or after the offset
    for i, (offset, end) in enumerate(zip(offsets, ends, strict=True)):
        if offset >= len(table):
            raise ElfError(f"{what.format(i)}: offset {offset:#x} lies outside {where} ({len(table):#x} bytes)")
        if end < 0:
            raise ElfError(f"{what.format(i)}: the string at offset {offset:#x} of {where} has no terminating NUL")
    return [table[o:e].decode("utf-8", errors="replace") for o, e in zip(offsets, ends, strict=True)]


class Elf:
    """The tables of one little-endian ELF file (`data`), checked against its size. `bits` is 64 or 32."""

    def __init__(self, data: bytes):
        self.raw = data
        c = self._c = _class(data)
        self.bits = 64 if c is _CLASSES[2] else 32
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
        self._table("program", h.e_phoff, phnum, h.e_phentsize, c.phdr.size)
        self.segments = tuple(Segment._make(e[k] for k in c.phdr_order) for e in
                              (c.phdr.unpack_from(data, h.e_phoff + i * c.phdr.size) for i in range(phnum)))

    def _table(self, what: str, offset: int, count: int, entsize: int, size: int) -> None:
        """Check that `count` entries of `size` bytes at `offset` lie inside the file."""
        if count and entsize != size:
            raise ElfError(f"{what} header table: entry size {entsize}, not {size}")
        if count and offset + count * size > len(self.raw):
            raise ElfError(f"{what} header table [{offset:#x}, {offset + count * size:#x}) runs past the end of the "
                           f"file ({len(self.raw):#x} bytes): truncated?")

    def _section_headers(self, offset: int, count: int, entsize: int) -> list[tuple]:
        shdr = self._c.shdr
        self._table("section", offset, count, entsize, shdr.size)
        return list(shdr.iter_unpack(self.raw[offset:offset + count * shdr.size]))

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
        names = _strings(self.data(strtab), [h[0] for h in headers], "section {} name", where)
        return tuple(Section(i, name, *h[1:]) for i, (name, h) in enumerate(zip(names, headers, strict=True)))

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
        entries = self._entries(section, self._c.sym, "a symbol")
        names = _strings(self.data(strtab), [e[0] for e in entries], f"{section.where} symbol {{}} name", strtab.where)
        order = self._c.sym_order
        out = self._symbols[section.index] = [Symbol(name, *(e[k] for k in order))
                                              for name, e in zip(names, entries, strict=True)]
        return out

    def relocations(self, section: Section) -> list[Rela]:
        """The entries of an SHT_RELA section."""
        shift = self._c.sym_shift
        return [Rela(offset, info >> shift, info & ((1 << shift) - 1), addend)
                for offset, info, addend in self._entries(section, self._c.rela, "a RELA entry")]


def dynamic_symbols(read: Callable[[int, int], bytes], size: int) -> list[Symbol]:
    """The dynamic symbols (DT_SYMTAB, index 0 included, as many as DT_HASH's nchain) of an ELF image as a loader
    placed it: `read(offset, n)` gives n bytes at `offset` from the load base, `size` bytes of which exist. The
    image is the file's PT_LOAD segments at their vaddrs, the first one mapping the file's start at vaddr 0 (as
    ld.lld links code objects), so that the file and program headers lie at their file offsets. Every table is
    checked to lie inside the image and to be at most MAX_DYNAMIC_TABLE bytes before it is read; anything else
    raises ElfError naming the table."""
    def table(what: str, offset: int, n: int) -> bytes:
        if n > MAX_DYNAMIC_TABLE:
            raise ElfError(f"{what}: {n:#x} bytes, more than the {MAX_DYNAMIC_TABLE:#x} read of a loaded image")
        if not 0 <= offset <= offset + n <= size:
            raise ElfError(f"{what} [{offset:#x}, {offset + n:#x}) lies outside the loaded image ({size:#x} bytes)")
        return read(offset, n)

    head = table("the file header", 0, min(size, 64))
    c, h = _class(head), read_header(head)
    if h.e_phnum and h.e_phentsize != c.phdr.size:
        raise ElfError(f"program header table: entry size {h.e_phentsize}, not {c.phdr.size}")
    phdrs = table("the program header table", h.e_phoff, h.e_phnum * c.phdr.size)
    dynamic = [e for e in c.phdr.iter_unpack(phdrs) if e[0] == PT_DYNAMIC]
    if len(dynamic) != 1:
        raise ElfError(f"{len(dynamic)} PT_DYNAMIC segments, not 1")
    seg = Segment._make(dynamic[0][k] for k in c.phdr_order)
    tags: dict[int, int] = {}
    for tag, value in c.dyn.iter_unpack(table("the PT_DYNAMIC segment", seg.vaddr,
                                              seg.filesz // c.dyn.size * c.dyn.size)):
        if tag == DT_NULL:
            break
        tags.setdefault(tag, value)
    required = {DT_HASH: "DT_HASH", DT_STRTAB: "DT_STRTAB", DT_SYMTAB: "DT_SYMTAB", DT_STRSZ: "DT_STRSZ"}
    missing = [name for tag, name in required.items() if tag not in tags]
    if missing:
        raise ElfError(f"the PT_DYNAMIC segment has no {', '.join(missing)}")
    if tags.get(DT_SYMENT, c.sym.size) != c.sym.size:
        raise ElfError(f"DT_SYMENT {tags[DT_SYMENT]} is not the {c.sym.size} bytes of a symbol")
    _, nchain = struct.unpack("<II", table("the DT_HASH table", tags[DT_HASH], 8))
    entries = list(c.sym.iter_unpack(table("the DT_SYMTAB table", tags[DT_SYMTAB], nchain * c.sym.size)))
    strtab = table("the DT_STRTAB table", tags[DT_STRTAB], tags[DT_STRSZ])
    names = _strings(strtab, [e[0] for e in entries], "DT_SYMTAB symbol {} name", "the DT_STRTAB table")
    return [Symbol(name, *(e[k] for k in c.sym_order)) for name, e in zip(names, entries, strict=True)]
