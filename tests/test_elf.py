"""objfile.elf, the ELF reader under the code-object parser and the Hexagon loader: real clang-19 code objects
(ELF64) and Hexagon programs (ELF32) read as pyelftools reads them; random bytes and damaged code objects give a
parsed file or an ElfError (CodeObjectError from CodeObject.parse) naming what is wrong, never another exception
and never an allocation beyond the file's size. The loaded view (dynamic_symbols, over an image in memory a client
wrote) likewise: the .dynsym pyelftools reads from the file, or an ElfError, reading nothing outside the image."""
import functools
import io
import re
import struct
import subprocess
import tracemalloc

import pytest
from elftools.elf import enums
from elftools.elf.elffile import ELFFile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from objfile.codeobj import CodeObject, CodeObjectError
from objfile.elf import (
    DT_HASH,
    DT_STRTAB,
    DT_SYMENT,
    DT_SYMTAB,
    PT_DYNAMIC,
    PT_LOAD,
    SHT_DYNSYM,
    SHT_NOBITS,
    SHT_RELA,
    SHT_SYMTAB,
    STT_FUNC,
    Elf,
    ElfError,
    dynamic_symbols,
)
from stack.codegen import opencl
from tools import dsp_llvm_agreement as la

needs_clang = pytest.mark.skipif(not opencl.available(), reason="needs clang-19 and ld.lld-19")

# a kernel with LDS, private memory and a pointer table in constant memory (R_AMDGPU_RELATIVE64 relocations)
SOURCE = """
__constant int data[4] = {1, 2, 3, 4};
__constant int *__constant ptrs[2] = {data, data + 2};
kernel void probe(global float *out, float f, uint u, local float *dyn) {
  __local float tile[64];
  float priv[16];
  size_t i = get_global_id(0), j = get_local_id(0);
  for (int k = 0; k < 16; k++) priv[k] = f * k + ptrs[u & 1][k & 1];
  tile[j & 63] = priv[(u + j) & 15];
  dyn[j] = tile[j & 63];
  barrier(CLK_LOCAL_MEM_FENCE);
  out[i] = tile[(j + 1) & 63] + dyn[j ^ 1];
}
kernel void second(global int *out) { out[get_global_id(0)] = ptrs[0][1]; }
"""
CONFIGS = [(a, o) for a in ("gfx1100", "gfx1201", "gfx942") for o in ("-O0", "-O3")]


@functools.cache
def _compiled(arch: str, opt: str) -> bytes:
    return opencl.compile_cl(SOURCE, arch, opt)


def _num(value, *tables) -> int:
    """pyelftools' enum name as its number (ints pass through)."""
    if isinstance(value, int):
        return value
    return next(t[value] for t in tables if value in t)


SH_TYPES = (enums.ENUM_SH_TYPE_BASE, enums.ENUM_SH_TYPE_AMD64)
P_TYPES = (enums.ENUM_P_TYPE_BASE,)


def _same_as_pyelftools(data: bytes) -> tuple[int, int]:
    """Check every table of `data` against pyelftools'; the counts of symbols and relocations read."""
    ours, theirs = Elf(data), ELFFile(io.BytesIO(data))
    h = theirs.header
    assert ours.bits == theirs.elfclass
    assert ours.header.e_machine == _num(h.e_machine, enums.ENUM_E_MACHINE)
    assert ours.header.e_type == _num(h.e_type, enums.ENUM_E_TYPE)
    assert [getattr(ours.header, k) for k in ("e_entry", "e_phoff", "e_shoff", "e_flags", "e_shstrndx")] == \
        [h[k] for k in ("e_entry", "e_phoff", "e_shoff", "e_flags", "e_shstrndx")]
    assert len(ours.sections) == theirs.num_sections() and len(ours.segments) == theirs.num_segments()
    relocations = symbols = 0
    for s, t in zip(ours.sections, theirs.iter_sections(), strict=True):
        assert (s.name, s.type, s.flags, s.addr, s.offset, s.size, s.link, s.info, s.addralign, s.entsize) == \
            (t.name, _num(t["sh_type"], *SH_TYPES), t["sh_flags"], t["sh_addr"], t["sh_offset"], t["sh_size"],
             t["sh_link"], t["sh_info"], t["sh_addralign"], t["sh_entsize"])
        assert ours.data(s) == (b"" if s.type == SHT_NOBITS else t.data())  # pyelftools: sh_size zero bytes
        if s.type in (SHT_SYMTAB, SHT_DYNSYM):
            got = [(y.name, y.value, y.size, y.info, y.other & 3, y.shndx) for y in ours.symbols(s)]
            assert got == [(y.name, y["st_value"], y["st_size"],
                            _num(y["st_info"]["bind"], enums.ENUM_ST_INFO_BIND) << 4
                            | _num(y["st_info"]["type"], enums.ENUM_ST_INFO_TYPE),
                            _num(y["st_other"]["visibility"], enums.ENUM_ST_VISIBILITY),
                            _num(y["st_shndx"], enums.ENUM_ST_SHNDX)) for y in t.iter_symbols()]
            symbols += len(got)
        if s.type == SHT_RELA:
            got = [(r.offset, r.sym, r.type, r.addend) for r in ours.relocations(s)]
            assert got == [(r["r_offset"], r["r_info_sym"], r["r_info_type"], r["r_addend"])
                           for r in t.iter_relocations()]
            relocations += len(got)
    for p, t in zip(ours.segments, theirs.iter_segments(), strict=True):
        assert tuple(p) == (_num(t["p_type"], *P_TYPES), t["p_flags"], t["p_offset"], t["p_vaddr"], t["p_paddr"],
                            t["p_filesz"], t["p_memsz"], t["p_align"])
    return symbols, relocations


@needs_clang
@pytest.mark.parametrize("arch, opt", CONFIGS, ids=["-".join(c) for c in CONFIGS])
def test_code_objects_read_as_pyelftools_reads_them(arch, opt):
    symbols, relocations = _same_as_pyelftools(_compiled(arch, opt))
    assert symbols and relocations


@pytest.mark.skipif(not la.corpus_available(), reason="clang-19 / ld.lld-19 not installed (./dev)")
def test_hexagon_programs_and_objects_read_as_pyelftools_reads_them(tmp_path):
    """ELF32: a clang-19 Hexagon program (what emu.dsp.linux loads) and its relocatable object (RELA entries)."""
    src = la.PROGRAMS / "fround.c"
    exe, obj = tmp_path / "fround", tmp_path / "fround.o"
    la.compile_program(src, "-O2", exe)
    subprocess.run([la.CLANG, *la.CFLAGS, "-O2", "-c", str(src), "-o", str(obj)], check=True, capture_output=True)
    program = Elf(exe.read_bytes())
    assert program.bits == 32 and any(p.type == PT_LOAD for p in program.segments)
    assert _same_as_pyelftools(exe.read_bytes())[0]
    symbols, relocations = _same_as_pyelftools(obj.read_bytes())
    assert symbols and relocations
    with pytest.raises(CodeObjectError, match="ELFCLASS64"):
        CodeObject.parse(exe.read_bytes())


@needs_clang
def test_extended_numbering_reads_the_counts_from_section_0():
    """e_shnum 0, e_shstrndx SHN_XINDEX and e_phnum PN_XNUM: the counts are section 0's sh_size, sh_link, sh_info."""
    data = _compiled("gfx1100", "-O3")
    plain = Elf(data)
    h = plain.header
    blob = bytearray(data)
    struct.pack_into("<HHH", blob, 56, 0xFFFF, h.e_shentsize, 0)  # e_phnum, e_shentsize, e_shnum
    struct.pack_into("<H", blob, 62, 0xFFFF)
    struct.pack_into("<QII", blob, h.e_shoff + 32, h.e_shnum, h.e_shstrndx, h.e_phnum)  # sh_size, sh_link, sh_info
    ext, theirs = Elf(bytes(blob)), ELFFile(io.BytesIO(bytes(blob)))
    assert [s.name for s in ext.sections] == [s.name for s in plain.sections] == \
        [s.name for s in theirs.iter_sections()]
    assert ext.segments == plain.segments and len(ext.segments) == theirs.num_segments()
    assert CodeObject.parse(bytes(blob)).kernels == CodeObject.parse(data).kernels


def _field_offsets(data: bytes) -> list[tuple[int, int]]:
    """(file offset, width) of every field of the file header, the section and program headers, and the symbol and
    RELA entries of a pristine ELF: where a structured mutation writes."""
    elf = Elf(data)
    out = [(16 + o, w) for o, w in zip((0, 2, 4, 8, 16, 24, 32, 36, 38, 40, 42, 44, 46),
                                       (2, 2, 4, 8, 8, 8, 4, 2, 2, 2, 2, 2, 2), strict=True)]
    sh = ((0, 4), (4, 4), (8, 8), (16, 8), (24, 8), (32, 8), (40, 4), (44, 4), (48, 8), (56, 8))
    out += [(elf.header.e_shoff + 64 * i + o, w) for i in range(len(elf.sections)) for o, w in sh]
    ph = ((0, 4), (4, 4), (8, 8), (16, 8), (24, 8), (32, 8), (40, 8), (48, 8))
    out += [(elf.header.e_phoff + 56 * i + o, w) for i in range(len(elf.segments)) for o, w in ph]
    for s in elf.sections:
        entry = {SHT_SYMTAB: ((0, 4), (4, 1), (6, 2), (8, 8), (16, 8)), SHT_DYNSYM: ((0, 4), (6, 2), (8, 8)),
                 SHT_RELA: ((0, 8), (8, 8), (16, 8))}.get(s.type, ())
        out += [(s.offset + 24 * i + o, w) for i in range(s.size // 24) for o, w in entry]
    return out


@functools.cache
def _targets() -> list[tuple[bytes, list[tuple[int, int]]]]:
    return [(d, _field_offsets(d)) for d in (_compiled("gfx1100", "-O3"), _compiled("gfx942", "-O0"))]


def _read_all(data: bytes) -> None:
    """Read every table of `data` as a loader might: each step returns or raises ElfError."""
    try:
        elf = Elf(data)
    except ElfError as e:
        assert str(e)
        return
    for s in elf.sections:
        elf.data(s)
        for read in (elf.symbols, elf.relocations):
            try:
                read(s)
            except ElfError as e:
                assert str(e)


def _check(data: bytes) -> None:
    """`data` reads (allocating at most a small multiple of its size) or raises ElfError / CodeObjectError."""
    tracemalloc.start()
    try:
        _read_all(data)
        try:
            CodeObject.parse(data)
        except CodeObjectError as e:
            assert str(e)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * len(data) + (1 << 20), f"{peak} bytes allocated reading {len(data)} bytes"


ELF_IDENT = b"\x7fELF\x02\x01\x01\x40\x02" + bytes(7)
ELF32_IDENT = b"\x7fELF\x01\x01\x01\x00" + bytes(8)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.binary(max_size=512), st.builds(lambda i, b: i + b, st.sampled_from([ELF_IDENT, ELF32_IDENT]),
                                                     st.binary(min_size=36, max_size=2048))))
def test_random_bytes_parse_or_raise_elf_error(data):
    _check(data)


# an ELF header pointing its tables at small offsets in a random body, so that the tables get read
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.tuples(st.integers(0, 0xFFFF), st.sampled_from([0, 1, 64, 0xFFFF])), st.integers(0, 256),
       st.integers(0, 256), st.sampled_from([0, 56, 64, 0xFFFF]), st.integers(0, 12), st.sampled_from([0, 64, 56]),
       st.integers(0, 12), st.integers(0, 12), st.binary(min_size=0, max_size=2048))
def test_random_tables_parse_or_raise_elf_error(machine_type, phoff, shoff, phentsize, phnum, shentsize, shnum,
                                                shstrndx, body):
    header = struct.pack("<HHIQQQIHHHHHH", machine_type[1], machine_type[0], 1, 0, phoff, shoff, 0, 64, phentsize,
                         phnum, shentsize, shnum, shstrndx)
    _check(ELF_IDENT + header + body)


INTERESTING = (0, 1, 2, 3, 8, 24, 56, 64, 0x7F, 0xFF, 0xFFFF, 0xFF00, 0x7FFFFFFF, 0xFFFFFFFF, 1 << 63, (1 << 64) - 1)


@needs_clang
@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_mutated_code_objects_parse_or_raise_named_errors(draw):
    pristine, fields = draw.draw(st.sampled_from(_targets()))
    blob = bytearray(pristine)
    for _ in range(draw.draw(st.integers(1, 4))):
        kind = draw.draw(st.sampled_from(["flip", "field", "field", "truncate"]))
        if kind == "flip" and blob:
            i = draw.draw(st.integers(0, len(blob) - 1))
            blob[i] ^= 1 << draw.draw(st.integers(0, 7))
        elif kind == "field":
            at, width = draw.draw(st.sampled_from(fields))
            value = draw.draw(st.one_of(st.sampled_from(INTERESTING + (len(pristine), len(pristine) - 1)),
                                        st.integers(0, (1 << 8 * width) - 1)))
            blob[at:at + width] = (value & ((1 << 8 * width) - 1)).to_bytes(width, "little")
        elif kind == "truncate":
            blob = blob[:draw.draw(st.integers(0, len(blob)))]
    _check(bytes(blob))


def _with(data: bytes, at: int, fmt: str, *values: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, at, *values)
    return bytes(out)


@needs_clang
def test_malformed_tables_are_named():
    data = _compiled("gfx1100", "-O3")
    elf = Elf(data)
    h = elf.header
    sec = {s.name: s for s in elf.sections}
    text, rodata, symtab, strtab = sec[".text"], sec[".rodata"], sec[".symtab"], sec[".strtab"]
    assert rodata.size < text.size
    at = {s.name: h.e_shoff + 64 * s.index for s in elf.sections}  # section header offsets
    cases = [
        (_with(data, 58, "<H", 0), "section header table: entry size 0, not 64"),
        (_with(data, 60, "<H", 0xFF00), f"section header table [{h.e_shoff:#x}, {h.e_shoff + 64 * 0xFF00:#x}) "
                                        f"runs past the end of the file ({len(data):#x} bytes)"),
        (_with(data, 54, "<H", 8), "program header table: entry size 8, not 56"),
        (_with(data, 62, "<H", 900), f"e_shstrndx 900 is outside the section header table ({h.e_shnum} sections)"),
        (_with(data, at[".text"] + 32, "<Q", 1 << 40), f"section {text.index} '.text' [{text.offset:#x}, "
                                                       f"{text.offset + (1 << 40):#x}) runs past the end of the file"),
        (_with(data, at[".text"] + 24, "<Q", rodata.offset), f"section {text.index} '.text' at {rodata.offset:#x} "
                                                             f"overlaps section {rodata.index} '.rodata', which ends "
                                                             f"at {rodata.offset + rodata.size:#x}"),
        (_with(data, at[".text"], "<I", 1 << 20), f"section {text.index} name: offset 0x100000 lies outside the "
                                                  f"section-name string table (section {h.e_shstrndx})"),
        (_with(data, at[".symtab"] + 56, "<Q", 0), f"section {symtab.index} '.symtab': sh_entsize 0 is not the 24 "
                                                   "bytes of a symbol"),
        (_with(data, at[".symtab"] + 40, "<I", 99), f"section {symtab.index} '.symtab': sh_link 99 is not a string "
                                                    "table section"),
        (_with(data, symtab.offset + 24, "<I", 1 << 20), f"section {symtab.index} '.symtab' symbol 1 name: offset "
                                                         f"0x100000 lies outside section {strtab.index} '.strtab'"),
        (_with(data, strtab.offset + strtab.size - 1, "<B", 0x41), f"of section {strtab.index} '.strtab' has no "
                                                                   "terminating NUL"),
    ]
    for bad, message in cases:
        with pytest.raises(ElfError, match=re.escape(message)):
            elf = Elf(bad)
            for s in elf.sections:
                if s.type in (SHT_SYMTAB, SHT_DYNSYM):
                    elf.symbols(s)
        with pytest.raises(CodeObjectError, match=re.escape(message)):
            CodeObject.parse(bad)


@needs_clang
def test_overlapping_load_segments_are_refused():
    """PT_LOAD segments sharing memory are refused before their file data is copied (each could repeat the file)."""
    data = _compiled("gfx942", "-O3")
    elf = Elf(data)
    first, second = [i for i, p in enumerate(elf.segments) if p.type == PT_LOAD and p.memsz][:2]
    bad = _with(data, elf.header.e_phoff + 56 * second + 16, "<Q", elf.segments[first].vaddr)
    with pytest.raises(CodeObjectError, match=f"PT_LOAD segment {second} at {elf.segments[first].vaddr:#x} overlaps "
                                              f"PT_LOAD segment {first}, which ends at"):
        CodeObject.parse(bad)


def _loaded(image: bytes) -> list | None:
    """dynamic_symbols of `image` (None when it raised ElfError), each read checked to lie inside the image."""
    def read(at: int, n: int) -> bytes:
        assert 0 <= at <= at + n <= len(image), f"read of {n} bytes at {at:#x} outside {len(image):#x} bytes"
        return image[at:at + n]
    try:
        return dynamic_symbols(read, len(image))
    except ElfError as e:
        assert str(e)
        return None


@functools.cache
def _image(arch: str, opt: str) -> tuple[bytes, dict[int, int], int]:
    """The loaded image of a compiled code object, its dynamic tags and the vaddr of its PT_DYNAMIC segment."""
    data = _compiled(arch, opt)
    dyn = next(p for p in Elf(data).segments if p.type == PT_DYNAMIC)
    image = bytes(CodeObject.parse(data).image(0))
    tags = dict(struct.iter_unpack("<qQ", image[dyn.vaddr:dyn.vaddr + dyn.filesz]))
    return image, tags, dyn.vaddr


@needs_clang
@pytest.mark.parametrize("arch,opt", CONFIGS)
def test_loaded_image_symbols_are_the_files_dynsym(arch, opt):
    theirs = ELFFile(io.BytesIO(_compiled(arch, opt))).get_section_by_name(".dynsym").iter_symbols()
    got = _loaded(_image(arch, opt)[0])
    assert [(y.name, y.value, y.size, y.info & 0xF == STT_FUNC) for y in got] == \
        [(t.name, t["st_value"], t["st_size"], t["st_info"]["type"] == "STT_FUNC") for t in theirs]
    assert {"probe", "second"} <= {y.name for y in got if y.info & 0xF == STT_FUNC}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([ELF_IDENT, ELF32_IDENT]), st.integers(0, 4), st.sampled_from([0, 32, 56, 0xFFFF]),
       st.integers(0, 512), st.lists(st.tuples(st.sampled_from([0, 4, 5, 6, 10, 11, 99]), st.integers(0, 600)),
                                     max_size=8),
       st.binary(max_size=1024))
def test_random_loaded_images_read_or_raise_elf_error(ident, phnum, phentsize, dyn_at, tags, body):
    """An ELF header, one PT_DYNAMIC program header and dynamic entries pointing at small offsets of a random body."""
    image = bytearray(ident + struct.pack("<HHIQQQIHHHHHH", 3, 224, 1, 0, 64, 0, 0, 64, phentsize, phnum, 64, 0, 0))
    image += struct.pack("<IIQQQQQQ", PT_DYNAMIC, 6, dyn_at, dyn_at, dyn_at, 16 * len(tags), 16 * len(tags), 8)
    image += body
    dyn = b"".join(struct.pack("<qQ", t, v) for t, v in tags)
    image[dyn_at:dyn_at + len(dyn)] = dyn
    _loaded(bytes(image))


@needs_clang
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_mutated_loaded_images_read_or_raise_elf_error(draw):
    """Loaded images with their header, program header, dynamic, hash and symbol fields overwritten or cut short."""
    image, tags, dyn_at = _image(*draw.draw(st.sampled_from([("gfx1100", "-O3"), ("gfx942", "-O0")])))
    fields = [(16 + o, w) for o, w in ((28, 8), (38, 2), (40, 2))] + [(64 + 56 * i + o, 8) for i in range(8)
                                                                      for o in (0, 16, 32)]
    fields += [(dyn_at + 16 * i + o, 8) for i in range(len(tags)) for o in (0, 8)] + [(tags[DT_HASH] + 4, 4)]
    fields += [(tags[DT_SYMTAB] + 24 * i, 4) for i in range(4)]
    blob = bytearray(image)
    for _ in range(draw.draw(st.integers(1, 3))):
        at, width = draw.draw(st.sampled_from(fields))
        value = draw.draw(st.one_of(st.sampled_from(INTERESTING + (len(image),)), st.integers(0, 1 << 8 * width)))
        blob[at:at + width] = (value & ((1 << 8 * width) - 1)).to_bytes(width, "little")
    _loaded(bytes(blob[:draw.draw(st.integers(0, len(blob)))] if draw.draw(st.booleans()) else blob))


@needs_clang
def test_malformed_loaded_images_are_named():
    image, tags, dyn_at = _image("gfx1100", "-O3")
    entry = {tag: dyn_at + 16 * i for i, tag in enumerate(tags)}  # where each tag's entry lies
    phdr = 64 + 56 * [p.type for p in Elf(_compiled("gfx1100", "-O3")).segments].index(PT_DYNAMIC)
    end = len(image)
    cases = [
        (_with(image, phdr, "<I", PT_LOAD), "0 PT_DYNAMIC segments, not 1"),
        (_with(image, 16 + 38, "<H", 8), "program header table: entry size 8, not 56"),
        (_with(image, 16 + 40, "<H", 0x4000), f"the program header table [0x40, {0x40 + 56 * 0x4000:#x}) lies outside "
                                               f"the loaded image ({end:#x} bytes)"),
        (image[:dyn_at + 8], f"the PT_DYNAMIC segment [{dyn_at:#x}, {dyn_at + 16 * len(tags):#x}) lies outside the "
                             f"loaded image ({dyn_at + 8:#x} bytes)"),
        (_with(image, entry[DT_SYMTAB], "<q", 99), "the PT_DYNAMIC segment has no DT_SYMTAB"),
        (_with(image, entry[DT_SYMENT] + 8, "<Q", 16), "DT_SYMENT 16 is not the 24 bytes of a symbol"),
        (_with(image, entry[DT_HASH] + 8, "<Q", end - 4), f"the DT_HASH table [{end - 4:#x}, {end + 4:#x}) lies "
                                                          f"outside the loaded image ({end:#x} bytes)"),
        (_with(image, tags[DT_HASH] + 4, "<I", 1 << 20), "the DT_SYMTAB table: 0x1800000 bytes, more than"),
        (_with(image, entry[DT_STRTAB] + 8, "<Q", end), f"the DT_STRTAB table [{end:#x}, "),
        (_with(image, tags[DT_SYMTAB] + 24, "<I", 1 << 20), "DT_SYMTAB symbol 1 name: offset 0x100000 lies outside "
                                                            "the DT_STRTAB table"),
    ]
    for bad, message in cases:
        with pytest.raises(ElfError, match=re.escape(message)):
            dynamic_symbols(lambda at, n, bad=bad: bad[at:at + n], len(bad))
