"""HSA code objects (AMDGPU ELF, code object v4, v5 and v6): kernels, kernel descriptors, kernarg layouts (the
kernarg segment itself is packed by objfile.kernargs).

Facts from LLVM's AMDGPUUsage ("Code Object V4/V5 Metadata", "Kernel Descriptor"). The ELF is read with
objfile.elf, the NT_AMDGPU_METADATA note is msgpack. Any malformed input raises `CodeObjectError` naming what
is wrong and where.

  co = CodeObject.parse(data)
  co.arch ('gfx1100'), co.target ('amdgcn-amd-amdhsa--gfx1100'), co.version (4, 5 or 6)
  k = co.kernels['name']          # Kernel: descriptor (KernelDescriptor), args (KernArg), metadata fields,
                                  # entry (vaddr of the first instruction), descriptor_address, code (bytes)
  co.text, co.text_address         # the .text section and its vaddr
  co.image_size, co.image(base)   # the PT_LOAD segments placed at their vaddrs (+ base), relocations applied;
                                  # map it at page-aligned `base`: kernel code then starts at base + k.entry
  read_file(path)                 # a file's bytes, refusing files over MAX_CODE_OBJECT

Limits. Every size a code object or a launch gives is checked against one of these before anything is allocated;
a size beyond one raises `LimitError` (a ValueError; `CodeObjectLimitError` when a code object carries it) naming
the field, its value and the limit. The stack and the emulator's runner share them:

  MAX_CODE_OBJECT      256 MiB  code object file size (the largest real ones, Tensile libraries, are tens of MiB)
  MAX_IMAGE            256 MiB  span of the PT_LOAD segments, p_vaddr + p_memsz (the image is mapped whole)
  MAX_KERNARG_SEGMENT   64 KiB  descriptor kernarg_size, metadata .kernarg_segment_size, raw kernargs (HIP and
                                CUDA pass at most 4 KiB / 32 KiB of arguments; hidden arguments add 256 bytes)
  max_lds(arch)         64 KiB  group segment (LDS) per workgroup, fixed + dynamic; 160 KiB on gfx950
  max_wave_scratch(arch) ~8 MiB private memory of one wave (COMPUTE_TMPRING_SIZE.WAVESIZE: 13 bits of 1 KiB on
                                gfx9/gfx10, 15 bits of 256 bytes on gfx11; gfx12: 18 bits of 256 bytes, ~64 MiB);
                                a work-item's private segment is at most this / wave size
  MAX_WORKGROUP_SIZE    1024    work-items per workgroup (and the kernel's .max_flat_workgroup_size)
  MAX_GRID_ITEMS        2^32-1  work-items of a dispatch in each dimension (the AQL packet's 32-bit grid_size_*)
                                and in all (an emulator runs ~10^7 lane-instructions a second: more is hours)
  MAX_BUFFER            4 GiB   one buffer (host memory backs it; a buffer resource's NUM_RECORDS is 32 bits)
"""
from __future__ import annotations

import os
import stat
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field, fields

import msgpack

from objfile.elf import PT_LOAD, SHN_UNDEF, SHT_DYNSYM, SHT_NOTE, SHT_RELA, SHT_SYMTAB, Elf, ElfError, read_header

EM_AMDGPU = 224
ELFCLASS64 = 2
ELFOSABI_AMDGPU_HSA = 64
ABI_VERSION = {2: 4, 3: 5, 4: 6}  # e_ident[EI_ABIVERSION] -> code object version
# e_flags[7:0] EF_AMDGPU_MACH -> processor (LLVM's ELF.h / AMDGPUUsage numbering)
EF_AMDGPU_MACH = {0x2C: "gfx900", 0x2F: "gfx906", 0x30: "gfx908", 0x3F: "gfx90a", 0x40: "gfx940", 0x4B: "gfx941",
                  0x4C: "gfx942", 0x4F: "gfx950", 0x33: "gfx1010", 0x36: "gfx1030", 0x41: "gfx1100", 0x46: "gfx1101",
                  0x47: "gfx1102", 0x44: "gfx1103", 0x43: "gfx1150", 0x4A: "gfx1151", 0x55: "gfx1152",
                  0x48: "gfx1200", 0x4E: "gfx1201"}
# code object v4+ feature fields of e_flags: 0 unsupported, 1 any, 2 off, 3 on
EF_AMDGPU_FEATURES = (("sramecc", 10), ("xnack", 8))


def target_of(e_flags: int) -> tuple[str, str]:
    """(processor, target id) from an AMDGPU ELF header's e_flags, as the ROCm loader reads them."""
    arch = EF_AMDGPU_MACH.get(e_flags & 0xFF)
    if arch is None:
        raise CodeObjectError(f"ELF e_flags {e_flags:#x}: EF_AMDGPU_MACH {e_flags & 0xFF:#x} is no known processor")
    feats = "".join(f":{name}{'-+'[v - 2]}" for name, at in EF_AMDGPU_FEATURES if (v := e_flags >> at & 3) >= 2)
    return arch, f"amdgcn-amd-amdhsa--{arch}{feats}"
NT_AMDGPU_METADATA = 32
R_AMDGPU_ABS64, R_AMDGPU_RELATIVE64 = 3, 13
KD_SIZE = 64

# -- limits (see the module docstring for the reasons) ---------------------------------------------------------------
KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
MAX_CODE_OBJECT = 256 * MIB
MAX_IMAGE = 256 * MIB
MAX_KERNARG_SEGMENT = 64 * KIB
MAX_WORKGROUP_SIZE = 1024
MAX_GRID_ITEMS = (1 << 32) - 1
MAX_BUFFER = 4 * GIB


def max_lds(arch: str) -> int:
    """Bytes of LDS one workgroup can allocate on `arch`."""
    return 160 * KIB if arch == "gfx950" else 64 * KIB


def max_wave_scratch(arch: str) -> int:
    """Bytes of private memory one wave can have: the largest COMPUTE_TMPRING_SIZE.WAVESIZE."""
    gen = _generation(arch)
    if gen == "gfx12":
        return ((1 << 18) - 1) * 256
    return ((1 << 15) - 1) * 256 if gen == "gfx11" else ((1 << 13) - 1) * KIB


class CodeObjectError(ValueError):
    """A code object that cannot be used; the message says what is wrong."""


class LimitError(ValueError):
    """A size beyond one of the documented limits; the message names the field, its value and the limit."""


class CodeObjectLimitError(CodeObjectError, LimitError):
    """A code object whose size field is beyond a limit."""


def size_text(n: int, count: bool = False) -> str:
    """A limit as the docstring writes it: '64 KiB', '256 MiB' (bytes, unless `count`), '2^32 - 1', or the number."""
    for unit, name in ((GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")):
        if not count and n >= unit and n % unit == 0:
            return f"{n // unit} {name}"
    return f"2^{n.bit_length()} - 1" if n > 1024 and not n & (n + 1) else str(n)


def check_limit(where: str, name: str, value: int, limit: int, error: type[LimitError] = LimitError,
                count: bool = False) -> None:
    """Raise `error` ("WHERE: NAME VALUE exceeds the LIMIT limit") unless 0 <= value <= limit; `count` when the
    limit counts things rather than bytes."""
    if value < 0:
        raise error(f"{where}: {name} {value} is negative")
    if value > limit:
        raise error(f"{where}: {name} {value} exceeds the {size_text(limit, count)} limit")


def read_file(path, limit: int = MAX_CODE_OBJECT, what: str = "a code object",
              error: type[LimitError] = CodeObjectLimitError) -> bytes:
    """The bytes of the file at `path`; OSError when unreadable, `error` when longer than `limit` (devices and
    pipes included: at most limit + 1 bytes are read, so /dev/zero is refused too)."""
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        big = stat.S_ISREG(st.st_mode) and st.st_size > limit
        data = b"" if big else f.read(limit + 1)
    if big or len(data) > limit:
        raise error(f"{path}: larger than the {size_text(limit)} limit of {what}")
    return data


# -- bit-field registers of the kernel descriptor --------------------------------------------------------------------
def bits(lo: int, width: int = 1):
    return field(default=0, metadata={"lo": lo, "width": width})


class Register:
    """A 32-bit register value with named bit fields (declared with `bits(lo, width)`)."""

    value: int

    @classmethod
    def decode(cls, value: int):
        named = {f.name: (value >> f.metadata["lo"]) & ((1 << f.metadata["width"]) - 1)
                 for f in fields(cls) if f.metadata}
        return cls(value=value, **named)


@dataclass(frozen=True)
class Rsrc1(Register):
    """COMPUTE_PGM_RSRC1."""
    value: int = 0
    granulated_workitem_vgpr_count: int = bits(0, 6)
    granulated_wavefront_sgpr_count: int = bits(6, 4)  # gfx9 only; 0 on gfx10+
    priority: int = bits(10, 2)
    float_round_mode_32: int = bits(12, 2)
    float_round_mode_16_64: int = bits(14, 2)
    float_denorm_mode_32: int = bits(16, 2)
    float_denorm_mode_16_64: int = bits(18, 2)
    priv: int = bits(20)
    enable_dx10_clamp: int = bits(21)  # gfx12: enable_wg_rr_en
    debug_mode: int = bits(22)
    enable_ieee_mode: int = bits(23)  # gfx12: disable_perf
    bulky: int = bits(24)
    cdbg_user: int = bits(25)
    fp16_ovfl: int = bits(26)
    wgp_mode: int = bits(29)  # gfx10+
    mem_ordered: int = bits(30)  # gfx10+
    fwd_progress: int = bits(31)  # gfx10+


@dataclass(frozen=True)
class Rsrc2(Register):
    """COMPUTE_PGM_RSRC2."""
    value: int = 0
    enable_private_segment: int = bits(0)
    user_sgpr_count: int = bits(1, 5)
    enable_trap_handler: int = bits(6)
    enable_sgpr_workgroup_id_x: int = bits(7)
    enable_sgpr_workgroup_id_y: int = bits(8)
    enable_sgpr_workgroup_id_z: int = bits(9)
    enable_sgpr_workgroup_info: int = bits(10)
    enable_vgpr_workitem_id: int = bits(11, 2)  # 0: x, 1: x y, 2: x y z
    enable_exception_address_watch: int = bits(13)
    enable_exception_memory: int = bits(14)
    granulated_lds_size: int = bits(15, 9)
    enable_exception_fp_invalid: int = bits(24)
    enable_exception_fp_denormal_source: int = bits(25)
    enable_exception_fp_div_zero: int = bits(26)
    enable_exception_fp_overflow: int = bits(27)
    enable_exception_fp_underflow: int = bits(28)
    enable_exception_fp_inexact: int = bits(29)
    enable_exception_int_div_zero: int = bits(30)


@dataclass(frozen=True)
class Rsrc3Gfx90a(Register):
    """COMPUTE_PGM_RSRC3 on gfx90a/gfx94x/gfx950 (cdna)."""
    value: int = 0
    accum_offset: int = bits(0, 6)  # first ACC VGPR = (accum_offset + 1) * 4
    tg_split: int = bits(16)


@dataclass(frozen=True)
class Rsrc3Gfx11(Register):
    """COMPUTE_PGM_RSRC3 on gfx10/gfx11."""
    value: int = 0
    shared_vgpr_count: int = bits(0, 4)
    inst_pref_size: int = bits(4, 6)  # gfx11
    trap_on_start: int = bits(10)
    trap_on_end: int = bits(11)
    image_op: int = bits(31)


@dataclass(frozen=True)
class Rsrc3Gfx12(Register):
    """COMPUTE_PGM_RSRC3 on gfx12."""
    value: int = 0
    inst_pref_size: int = bits(4, 8)
    glg_en: int = bits(13)
    image_op: int = bits(31)


@dataclass(frozen=True)
class CodeProperties(Register):
    """kernel_code_properties (16 bits): which user SGPRs the kernel expects, wave size, dynamic stack."""
    value: int = 0
    enable_sgpr_private_segment_buffer: int = bits(0)
    enable_sgpr_dispatch_ptr: int = bits(1)
    enable_sgpr_queue_ptr: int = bits(2)
    enable_sgpr_kernarg_segment_ptr: int = bits(3)
    enable_sgpr_dispatch_id: int = bits(4)
    enable_sgpr_flat_scratch_init: int = bits(5)
    enable_sgpr_private_segment_size: int = bits(6)
    enable_wavefront_size32: int = bits(10)
    uses_dynamic_stack: int = bits(11)


@dataclass(frozen=True)
class KernargPreload(Register):
    """kernarg_preload (16 bits, gfx90a/gfx942): kernarg dwords preloaded into user SGPRs."""
    value: int = 0
    length: int = bits(0, 7)  # in dwords
    offset: int = bits(7, 9)  # in dwords from the kernarg segment start


@dataclass(frozen=True)
class KernelDescriptor:
    """The 64-byte kernel descriptor (symbol NAME.kd) the command processor reads at dispatch."""
    group_segment_fixed_size: int
    private_segment_fixed_size: int
    kernarg_size: int
    kernel_code_entry_byte_offset: int  # signed, from the descriptor's own address
    rsrc1: Rsrc1
    rsrc2: Rsrc2
    rsrc3: Rsrc3Gfx90a | Rsrc3Gfx11 | Rsrc3Gfx12 | None  # None on gfx9 parts without rsrc3
    code_properties: CodeProperties
    kernarg_preload: KernargPreload
    arch: str

    @property
    def wave32(self) -> bool:
        return bool(self.code_properties.enable_wavefront_size32)

    @property
    def vgprs(self) -> int:
        """VGPRs allocated per lane (on gfx90a+ the unified VGPR+AGPR file): (granulated count + 1) * granule."""
        gen = _generation(self.arch)
        granule = 8 if gen == "gfx90a" or (gen != "gfx9" and self.wave32) else 4
        return (self.rsrc1.granulated_workitem_vgpr_count + 1) * granule

    @property
    def sgprs(self) -> int:
        """(granulated_wavefront_sgpr_count + 1) * 8, as LLVM's disassembler shows it (.amdhsa_next_free_sgpr).

        Only gfx9 uses the field (gfx10+ give every wave 106 SGPRs and require it to be 0)."""
        return (self.rsrc1.granulated_wavefront_sgpr_count + 1) * 8

    @property
    def accum_offset(self) -> int | None:
        """First ACC VGPR in the unified register file (cdna), None elsewhere."""
        return (self.rsrc3.accum_offset + 1) * 4 if isinstance(self.rsrc3, Rsrc3Gfx90a) else None

    @classmethod
    def parse(cls, data: bytes, arch: str) -> KernelDescriptor:
        if len(data) != KD_SIZE:
            raise CodeObjectError(f"kernel descriptor is {len(data)} bytes, not {KD_SIZE}")
        group, private, kernarg, _, entry = struct.unpack_from("<IIIIq", data, 0)
        r3, r1, r2, props, preload = struct.unpack_from("<IIIHH", data, 44)
        gen = _generation(arch)
        rsrc3 = {"gfx90a": Rsrc3Gfx90a, "gfx11": Rsrc3Gfx11, "gfx10": Rsrc3Gfx11, "gfx12": Rsrc3Gfx12}.get(gen)
        return cls(group, private, kernarg, entry, Rsrc1.decode(r1), Rsrc2.decode(r2),
                   rsrc3.decode(r3) if rsrc3 else None, CodeProperties.decode(props), KernargPreload.decode(preload),
                   arch)


def _generation(arch: str) -> str:
    """'gfx9', 'gfx90a' (gfx9 with ACC VGPRs and rsrc3: gfx90a, gfx94x, gfx950), 'gfx10', 'gfx11', 'gfx12'."""
    num = arch.removeprefix("gfx")
    if len(num) == 4:
        return "gfx" + num[:2]
    return "gfx90a" if num in ("90a", "940", "941", "942", "950") else "gfx9"


# -- metadata ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class KernArg:
    """One kernarg as the metadata describes it. Hidden arguments have value_kind 'hidden_*'."""
    offset: int
    size: int
    value_kind: str
    name: str = ""
    type_name: str = ""
    address_space: str = ""

    @property
    def hidden(self) -> bool:
        return self.value_kind.startswith("hidden_")


@dataclass(frozen=True)
class Kernel:
    name: str
    symbol: str  # NAME.kd
    descriptor_address: int  # vaddr of the descriptor in the image
    descriptor: KernelDescriptor
    entry: int  # vaddr of the first instruction: descriptor_address + kernel_code_entry_byte_offset
    code: bytes  # the kernel function's bytes (from its symbol size; to the end of its section if unsized)
    args: tuple[KernArg, ...]
    kernarg_segment_size: int
    kernarg_segment_align: int
    wavefront_size: int
    sgpr_count: int
    vgpr_count: int
    agpr_count: int
    group_segment_fixed_size: int
    private_segment_fixed_size: int
    max_flat_workgroup_size: int
    uses_dynamic_stack: bool
    metadata: dict = field(repr=False, compare=False)  # the kernel's raw metadata map

    @property
    def explicit_args(self) -> tuple[KernArg, ...]:
        return tuple(a for a in self.args if not a.hidden)


@dataclass(frozen=True)
class Segment:
    vaddr: int
    memsz: int
    data: bytes  # filesz bytes; the rest up to memsz is zero
    flags: int  # PF_X=1, PF_W=2, PF_R=4


@dataclass(frozen=True)
class CodeObject:
    arch: str  # 'gfx1100'
    target: str  # 'amdgcn-amd-amdhsa--gfx1100' (with feature suffixes like ':xnack-' when present)
    version: int  # code object version 4, 5 or 6
    e_flags: int
    kernels: dict[str, Kernel]
    segments: tuple[Segment, ...]
    relocations: tuple[tuple[int, int, int], ...]  # (vaddr, type, addend + symbol value)
    text: bytes  # the .text section (all kernels' and functions' code)
    text_address: int  # its vaddr
    metadata: dict = field(repr=False, compare=False)

    @property
    def image_size(self) -> int:
        return max((s.vaddr + s.memsz for s in self.segments), default=0)

    def image(self, base: int = 0) -> bytearray:
        """The loaded image: every PT_LOAD segment at its vaddr, relocated for a load address of `base`."""
        out = bytearray(self.image_size)
        for vaddr, data in self.image_writes(base):
            out[vaddr:vaddr + len(data)] = data
        return out

    def image_writes(self, base: int = 0) -> Iterator[tuple[int, bytes]]:
        """The writes (vaddr, bytes) that turn zeroed memory of image_size bytes into the image relocated for
        `base`: the file data of each segment, then the relocated words. Memory beyond them stays untouched."""
        for s in self.segments:
            yield s.vaddr, s.data
        for where, _, value in self.relocations:
            yield where, struct.pack("<Q", (base + value) & (2**64 - 1))

    @classmethod
    def parse(cls, data: bytes) -> CodeObject:
        data = bytes(memoryview(data))  # TypeError for what is not bytes-like (bytes(n) would make n zero bytes)
        try:
            return _parse(data)
        except ElfError as e:
            raise CodeObjectError(str(e)) from e


def _parse(data: bytes) -> CodeObject:
    check_limit("code object", "size", len(data), MAX_CODE_OBJECT, CodeObjectLimitError)
    h = read_header(data)  # magic, little-endian
    if data[4] != ELFCLASS64:
        raise CodeObjectError(f"ELF class is {data[4]}, not ELFCLASS64 ({ELFCLASS64}): code objects are 64-bit")
    if data[7] != ELFOSABI_AMDGPU_HSA:
        raise CodeObjectError(f"ELF OS/ABI is {data[7]}, not AMDGPU HSA ({ELFOSABI_AMDGPU_HSA})")
    version = ABI_VERSION.get(data[8])
    if version is None:
        raise CodeObjectError(f"ELF ABI version {data[8]} is not code object v4, v5 or v6 (2, 3 or 4)")
    if h.e_machine != EM_AMDGPU:
        raise CodeObjectError(f"ELF machine is {h.e_machine}, not EM_AMDGPU ({EM_AMDGPU})")
    elf = Elf(data)  # checks the header tables and every section against the file
    meta = _metadata(elf)
    arch, target = target_of(h.e_flags)
    named = meta.get("amdhsa.target")  # optional; where present it must name the same processor
    if named is not None and (not isinstance(named, str) or named.split("--")[-1].split(":")[0] != arch):
        raise CodeObjectError(f"metadata amdhsa.target {named!r} disagrees with the ELF header's processor {arch}")
    symbols = {}
    for s in elf.sections:
        if s.type in (SHT_SYMTAB, SHT_DYNSYM):
            for sym in elf.symbols(s):
                symbols.setdefault(sym.name, sym)
    loads = []
    for i, p in enumerate(elf.segments):
        if p.type == PT_LOAD:
            if p.offset + p.filesz > len(data) or p.filesz > p.memsz:
                raise CodeObjectError(f"PT_LOAD segment {i} lies outside the file or has filesz > memsz")
            check_limit(f"PT_LOAD segment {i}", "p_vaddr + p_memsz", p.vaddr + p.memsz, MAX_IMAGE, CodeObjectLimitError)
            loads.append((p.vaddr, p.vaddr + p.memsz, i))
    # disjoint in memory, so that their file data together fits the image limit before any of it is copied
    for (_, end, i), (start, _, j) in zip(sorted(loads), sorted(loads)[1:], strict=False):
        if start < end:
            raise CodeObjectError(f"PT_LOAD segment {j} at {start:#x} overlaps PT_LOAD segment {i}, which ends at "
                                  f"{end:#x}")
    segments = tuple(Segment(p.vaddr, p.memsz, data[p.offset:p.offset + p.filesz], p.flags)
                     for p in (elf.segments[i] for _, _, i in loads))
    kernels = {}
    for km in _field(meta, "amdhsa.kernels", list, "metadata"):
        k = _kernel(km, symbols, segments, arch)
        kernels[k.name] = k
    relocs = tuple(_relocations(elf, max((s.vaddr + s.memsz for s in segments), default=0)))
    text = next((s for s in elf.sections if s.name == ".text"), None)
    return CodeObject(arch, target, version, h.e_flags, kernels, segments, relocs,
                      elf.data(text) if text else b"", text.addr if text else 0, meta)


def _metadata(elf: Elf) -> dict:
    for s in elf.sections:
        if s.type != SHT_NOTE:
            continue
        buf, pos = elf.data(s), 0
        while pos + 12 <= len(buf):
            namesz, descsz, ntype = struct.unpack_from("<III", buf, pos)
            name_at = pos + 12
            desc_at = name_at + _align4(namesz)
            if desc_at + descsz > len(buf):
                raise CodeObjectError(f"note in {s.name!r} at offset {pos:#x} runs past the end of its section")
            name = buf[name_at:name_at + namesz].rstrip(b"\0")
            if name == b"AMDGPU" and ntype == NT_AMDGPU_METADATA:
                try:
                    meta = msgpack.unpackb(buf[desc_at:desc_at + descsz], raw=False, strict_map_key=False)
                except Exception as e:
                    raise CodeObjectError(f"NT_AMDGPU_METADATA note is not valid msgpack: {e}") from e
                if not isinstance(meta, dict):
                    raise CodeObjectError("NT_AMDGPU_METADATA note is not a msgpack map")
                return meta
            pos = desc_at + _align4(descsz)
    raise CodeObjectError("no NT_AMDGPU_METADATA note (AMDGPU, type 32): not a code object v3+ ?")


def _align4(n: int) -> int:
    return (n + 3) & ~3


def _field(m: dict, key: str, typ: type, where: str, default=None):
    v = m.get(key, default)
    if v is None:
        raise CodeObjectError(f"{where}: metadata lacks {key}")
    if typ is int and isinstance(v, bool) or not isinstance(v, typ):
        raise CodeObjectError(f"{where}: metadata {key} is {v!r}, not {typ.__name__}")
    return v


def _kernel(km, symbols, segments, arch) -> Kernel:
    if not isinstance(km, dict):
        raise CodeObjectError("amdhsa.kernels holds a non-map entry")
    name = _field(km, ".name", str, "kernel")
    where = f"kernel {name!r}"
    symbol = _field(km, ".symbol", str, where)
    kd = symbols.get(symbol)
    if kd is None:
        raise CodeObjectError(f"{where}: descriptor symbol {symbol!r} not found in the symbol table")
    kd_addr = kd.value
    desc = KernelDescriptor.parse(_read(segments, kd_addr, KD_SIZE, f"{where} descriptor {symbol}"), arch)
    entry = kd_addr + desc.kernel_code_entry_byte_offset
    fn = symbols.get(name)
    size = fn.size if fn is not None and fn.value == entry else 0
    if not size:  # unsized: up to the end of the segment holding the entry
        seg = next((s for s in segments if s.vaddr <= entry < s.vaddr + len(s.data)), None)
        size = seg.vaddr + len(seg.data) - entry if seg else 0
    code = _read(segments, entry, size, f"{where} code at {entry:#x}")
    args = []
    for i, a in enumerate(_field(km, ".args", list, where, [])):
        aw = f"{where} argument {i}"
        if not isinstance(a, dict):
            raise CodeObjectError(f"{aw}: not a map")
        args.append(KernArg(_field(a, ".offset", int, aw), _field(a, ".size", int, aw),
                            _field(a, ".value_kind", str, aw), _field(a, ".name", str, aw, ""),
                            _field(a, ".type_name", str, aw, ""), _field(a, ".address_space", str, aw, "")))
    ints = {k: _field(km, k, int, where, 0) for k in (
        ".kernarg_segment_size", ".kernarg_segment_align", ".wavefront_size", ".sgpr_count", ".vgpr_count",
        ".agpr_count", ".group_segment_fixed_size", ".private_segment_fixed_size", ".max_flat_workgroup_size")}
    ints[".wavefront_size"] = ints[".wavefront_size"] or (32 if desc.wave32 else 64)  # a minimal metadata
    ints[".kernarg_segment_size"] = ints[".kernarg_segment_size"] or desc.kernarg_size  # may leave these out
    if ints[".wavefront_size"] not in (32, 64):
        raise CodeObjectError(f"{where}: .wavefront_size is {ints['.wavefront_size']}, not 32 or 64")
    _check_sizes(where, desc, ints)
    for a in args:
        if a.offset < 0 or a.size <= 0 or a.offset + a.size > ints[".kernarg_segment_size"]:
            raise CodeObjectError(f"{where}: argument {a.name or a.value_kind} [{a.offset}, +{a.size}) lies outside "
                                  f"the {ints['.kernarg_segment_size']}-byte kernarg segment")
    return Kernel(name, symbol, kd_addr, desc, entry, code, tuple(args), *ints.values(),
                  uses_dynamic_stack=bool(km.get(".uses_dynamic_stack", False)), metadata=km)


def _check_sizes(where: str, desc: KernelDescriptor, ints: dict[str, int]) -> None:
    """The descriptor's and the metadata's segment sizes against the limits (the metadata may disagree with the
    descriptor; each is checked)."""
    private = max_wave_scratch(desc.arch) // (32 if desc.wave32 else 64)
    lds = max_lds(desc.arch)
    for name, value, limit in (
            ("descriptor kernarg_size", desc.kernarg_size, MAX_KERNARG_SEGMENT),
            ("metadata .kernarg_segment_size", ints[".kernarg_segment_size"], MAX_KERNARG_SEGMENT),
            ("descriptor group_segment_fixed_size", desc.group_segment_fixed_size, lds),
            ("metadata .group_segment_fixed_size", ints[".group_segment_fixed_size"], lds),
            ("descriptor private_segment_fixed_size", desc.private_segment_fixed_size, private),
            ("metadata .private_segment_fixed_size", ints[".private_segment_fixed_size"], private),
            ("metadata .max_flat_workgroup_size", ints[".max_flat_workgroup_size"], MAX_WORKGROUP_SIZE)):
        check_limit(where, name, value, limit, CodeObjectLimitError, count=name.endswith("workgroup_size"))


def _read(segments, vaddr: int, n: int, what: str) -> bytes:
    for s in segments:
        if s.vaddr <= vaddr and vaddr + n <= s.vaddr + len(s.data):
            return s.data[vaddr - s.vaddr:vaddr - s.vaddr + n]
    raise CodeObjectError(f"{what}: [{vaddr:#x}, {vaddr + n:#x}) is not inside the file data of a PT_LOAD segment")


def _relocations(elf: Elf, image_size: int):
    """Dynamic relocations as (vaddr, type, value relative to the load base)."""
    for s in elf.sections:
        if s.type != SHT_RELA or not s.flags & 2:  # SHF_ALLOC: the dynamic ones
            continue
        link = s.link
        symtab = elf.sections[link] if 0 < link < len(elf.sections) and \
            elf.sections[link].type in (SHT_SYMTAB, SHT_DYNSYM) else None
        symbols = elf.symbols(symtab) if symtab is not None else []
        for i, r in enumerate(elf.relocations(s)):
            where, typ, addend = r.offset, r.type, r.addend
            if not 0 <= where <= image_size - 8:
                raise CodeObjectError(f"relocation at {where:#x} in {s.name!r} lies outside the loaded image")
            if typ == R_AMDGPU_RELATIVE64:
                yield where, typ, addend
            elif typ == R_AMDGPU_ABS64 and symtab is not None:
                if r.sym >= len(symbols):
                    raise CodeObjectError(f"relocation {i} at {where:#x} in {s.name!r} names symbol {r.sym}, outside "
                                          f"the {len(symbols)} symbols of {symtab.where}")
                sym = symbols[r.sym]
                if sym.shndx == SHN_UNDEF:
                    raise CodeObjectError(f"relocation at {where:#x} needs undefined symbol {sym.name!r}")
                yield where, typ, sym.value + addend
            else:
                raise CodeObjectError(f"unsupported relocation type {typ} at {where:#x} in {s.name!r}")
