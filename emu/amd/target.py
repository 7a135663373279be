"""Every emulated chip, described once.

A `Generation` is what all chips of one ISA generation share: the vendor instruction tables they come from (`isa`),
the name of their instruction set (`name`: the tables' name where a generation has the whole table, else its own;
what the set lacks of and adds to the tables is emu.amd.isa.generations's data) and the facts of their encodings and
wave state. A `Target` is one chip: its generation, what it has beyond that, and the figures of a real product of
that chip that the KFD topology reports (gfx942 and gfx950 as one XCC of an MI300X / MI355X in CPX compute partition
mode, which the driver exposes as separate one-XCC GPU nodes).

Code that needs to know how a chip behaves asks its descriptor; nothing else compares arch or family names
(tests/test_layout.py checks it; the conversion of the vendor tables and pseudocode, emu.amd.isa and emu.pcode, is
keyed by the tables' names). A chip of a known generation is one `Target` here; a new generation is a `Generation`
and its vendor tables, or a `Generation` and the Delta of emu.amd.isa.generations that derives its set.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

GIB = 1 << 30


class UnknownArch(ValueError):
    pass


@dataclass(frozen=True)
class Generation:
    isa: str                     # the vendor tables' name for the instruction set: rdna3, rdna4, cdna
    gfx: int                     # the major of gfx_target_version
    wave_sizes: tuple[int, ...]  # the default first
    sgprs: int                   # SGPRs an operand can name (s0..)
    m0: int                      # operand code of M0
    null: int                    # operand code of NULL
    saddr_off: int               # the SADDR code a global access without a scalar base is written with
    agprs: int                   # accumulation VGPRs per lane
    simd_width: int              # lanes a SIMD executes per cycle
    lds_granule: int             # bytes per unit of the descriptor's LDS size and of LDS_ALLOC
    vgpr_size_shift: int         # position of GPR_ALLOC's VGPR_SIZE field
    sgpr_size_shift: int | None  # position of GPR_ALLOC's SGPR_SIZE field (gfx9: SGPRs are allocated per wave)
    hw_vmid: int                 # the VMID a wave's HW_ID reports
    smem_imm_bit: bool = False   # SMEM's IMM bit picks an immediate or an SGPR offset; SOFFSET_EN adds soffset
    flat_offset_unsigned: bool = False  # FLAT (not GLOBAL/SCRATCH) offsets are unsigned
    architected_ids: bool = False  # workgroup ids also in ttmp9 (x) and ttmp7 (y | z << 16)
    ieee_mode: bool = True       # MODE has the IEEE and DX10_CLAMP bits
    vgpr_halves: bool = True     # 16-bit operands name VGPR halves (v0.h: code 128+ in VOP1/2/C, op_sel in VOP3)
    zeroes_hi16: bool = False    # a 16-bit VALU result zeroes the high half of its VGPR
    dpp8: bool = True            # has DPP8
    dpp_broadcasts: bool = False  # DPP16 has wave shifts and row broadcasts (gfx9), not row_share / row_xmask
    sdwa: bool = False           # has SDWA
    gpr_indexing: bool = False   # has the VGPR indexing mode (s_set_gpr_idx_on)
    vgpr_align64: bool = False   # VGPR tuples of 64 bits and more start at an even register (gfx90a+)
    constant_bus: int = 2        # scalar values (SGPRs, literal) one VALU instruction may read
    cache_policy: str = "glc"    # memory instructions' cache bits: glc/slc/dlc, sc0/nt/sc1 (sc), th/scope (th)
    buffer_soffset_literal: bool = False  # a MUBUF/MTBUF SOFFSET of 255 names a literal after the instruction
    buffer_swizzle: bool = False  # buffer resources have the gfx9 swizzle fields (emu.amd.rsrc)
    architected_scratch: bool = True  # the CP gives each wave its scratch; else the kernel sets FLAT_SCRATCH from the
    # flat scratch init SGPRs and reaches buffer scratch through the private segment buffer and wave offset (gfx90a)
    mfma_f64_neg: bool = True    # the F64 MFMAs' BLGP bits negate their sources (gfx940+); gfx90a's are BLGP
    sqtt_layout: int = 0         # the thread trace's packet layout (LAYOUT_HEADER.layout: 3 gfx11, 4 gfx12; 0 none)
    fp8: str = "ocp"             # fp8 / bf8 formats: OCP E4M3 / E5M2, or "fnuz" (bias 8 / 16, no inf, no -0, NaN 0x80)
    name: str = ""               # its instruction set's name (default: the tables' name, `isa`)
    # S_WAITCNT's immediate: each counter's name and its (lo, width) pieces, low first
    waitcnt: tuple[tuple[str, tuple[tuple[int, int], ...]], ...] = ()
    mode_writable: int = 0       # the fields of HW_REG_MODE that s_setreg writes (SQ_WAVE_MODE__*_MASK)
    trapsts_writable: int = 0    # the fields of HW_REG_TRAPSTS that s_setreg writes (SQ_WAVE_TRAPSTS__*_MASK)

    def __post_init__(self):
        if not self.name:
            object.__setattr__(self, "name", self.isa)

    @property
    def wave_size(self) -> int:
        return self.wave_sizes[0]

    def lanes(self, wave32: bool) -> int:
        """The wave size a dispatch runs with when its descriptor or initiator asks for wave32 (or does not):
        wave32 where the generation has it, else wave64."""
        return 32 if wave32 and 32 in self.wave_sizes else 64

    @property
    def waitcnt_mask(self) -> int:
        """The bits of S_WAITCNT's immediate that its counters use."""
        return sum(((1 << w) - 1) << lo for _, pieces in self.waitcnt for lo, w in pieces)

    def no_saddr(self, code: int) -> bool:
        """Whether a global access's SADDR code means "no scalar base" (gfx9: only 0x7F, an SGPR below it)."""
        return code == 0x7F if self.smem_imm_bit else code in (124, 125)


# HW_REG_MODE's and HW_REG_TRAPSTS's fields, from the Linux amdgpu headers gc_9_4_3, gc_11_0_0 and
# gc_12_0_0_sh_mask.h. gfx9.4.3 MODE: FP_ROUND, FP_DENORM, DX10_CLAMP, IEEE, LOD_CLAMPED, DEBUG_EN, EXCP_EN [20:12],
# FP16_OVFL [23], POPS_PACKER0/1, DISABLE_PERF [26], GPR_IDX_EN [27], VSKIP [28], CSP [31:29]. gfx11 MODE: [10:0]
# as gfx9, TRAP_AFTER_INST_EN [11], EXCP_EN [20:12], WAVE_END [21], FP16_OVFL [23], DISABLE_PERF [27]. gfx12 MODE:
# FP_ROUND, FP_DENORM, FP16_OVFL [23], SCALAR_PREFETCH_EN [24], DISABLE_PERF [27]. gfx11 TRAPSTS: EXCP [8:0],
# SAVECTX, ILLEGAL_INST, EXCP_HI [14:12], BUFFER_OOB, HOST_TRAP, WAVESTART, WAVE_END, PERF_SNAPSHOT,
# TRAP_AFTER_INST [20], UTC_ERROR [28]. gfx9.4.3 TRAPSTS: EXCP, SAVECTX, ILLEGAL_INST, EXCP_HI, EXCP_CYCLE [21:16],
# HOST_TRAP [22], WAVE_END [24], TRAP_AFTER_INST, PERF_SNAPSHOT [26], XNACK_ERROR [28], DP_RATE [31:29], and
# WAVE_START [23], which the header lacks and ROCdbgapi's gfx940_t names. gfx12 has no TRAPSTS.
# S_WAITCNT's fields: LLVM's AMDGPUBaseInfo (VmcntLo [3:0] and VmcntHi [15:14], Expcnt [6:4], Lgkmcnt [11:8] on
# gfx9; Vmcnt [15:10], Expcnt [2:0], Lgkmcnt [9:4] on gfx11 and, as llvm-mc-19 reads it, gfx12).
_GFX11_WAITCNT = (("vmcnt", ((10, 6),)), ("expcnt", ((0, 3),)), ("lgkmcnt", ((4, 6),)))
RDNA3 = Generation("rdna3", 11, (32, 64), 106, m0=125, null=124, saddr_off=124, agprs=0, simd_width=32,
                   lds_granule=256, vgpr_size_shift=12, sgpr_size_shift=None, hw_vmid=8, buffer_soffset_literal=True,
                   sqtt_layout=3, waitcnt=_GFX11_WAITCNT, mode_writable=0x08BFFFFF, trapsts_writable=0x101FFDFF)
RDNA4 = Generation("rdna4", 12, (32, 64), 106, m0=125, null=124, saddr_off=124, agprs=0, simd_width=32,
                   lds_granule=512, vgpr_size_shift=12, sgpr_size_shift=None, hw_vmid=8,
                   architected_ids=True, ieee_mode=False, cache_policy="th", sqtt_layout=4, waitcnt=_GFX11_WAITCNT,
                   mode_writable=0x098000FF)
# CDNA: the vendor tables are CDNA4's (gfx950), so its instruction set is the whole table; CDNA3 (gfx940-942) and
# CDNA2 (gfx90a) run a set derived from it (emu.amd.isa.generations)
CDNA = Generation("cdna", 9, (64,), 102, m0=124, null=125, saddr_off=0x7F, agprs=256, simd_width=16,
                  lds_granule=256, vgpr_size_shift=6, sgpr_size_shift=24, hw_vmid=3, smem_imm_bit=True,
                  flat_offset_unsigned=True, vgpr_halves=False, zeroes_hi16=True, dpp8=False, dpp_broadcasts=True,
                  sdwa=True, gpr_indexing=True, vgpr_align64=True, constant_bus=1,
                  cache_policy="sc", buffer_swizzle=True, mode_writable=0xFF9FFFFF, trapsts_writable=0xF7FF7DFF,
                  waitcnt=(("vmcnt", ((0, 4), (14, 2))), ("expcnt", ((4, 3),)), ("lgkmcnt", ((8, 4),))))
CDNA3 = dataclasses.replace(CDNA, name="cdna3", fp8="fnuz")  # gfx940-942: the FNUZ formats (CDNA4: OCP)
CDNA2 = dataclasses.replace(CDNA, name="cdna2", cache_policy="glc", architected_scratch=False, mfma_f64_neg=False)
GENERATIONS = {g.isa: g for g in (RDNA3, RDNA4, CDNA)}  # the generation a family name stands for (the whole table)
_NAMED = {g.name: g for g in (RDNA3, RDNA4, CDNA, CDNA3, CDNA2)}  # every generation by its instruction set's name


@dataclass(frozen=True)
class Target:
    arch: str
    gen: Generation
    product: str
    device_id: int
    gfx_target_version: int
    cus: int
    shader_engines: int
    arrays_per_engine: int       # shader arrays per engine
    simd_per_cu: int
    waves_per_simd: int
    vram: int                    # bytes
    engine_clock: int            # MHz
    memory_clock: int            # MHz
    gc: tuple[int, int, int]     # IP versions
    sdma: tuple[int, int, int]
    nbio: tuple[int, int, int]
    l2_kb: int
    packed_work_item_ids: bool = True  # v0 holds x | y << 10 | z << 20 (gfx90a+, gfx11+), else v0, v1, v2
    kernarg_preload: bool = False      # the firmware preloads kernel arguments into SGPRs (gfx940+)
    xnack: bool = False                # recoverable page faults can be enabled
    sdma_engines: int = 2
    lds_kb: int = 64
    workgroup_lds_kb: int = 64         # LDS one workgroup may allocate (the launch limit; 160 KiB on gfx950)
    scratch_slots_per_cu: int = 32
    # the other IP versions of the chip's discovery table (the MOCKPCI function, emu.pci_mock); None where hwemu
    # models no PCI function of the chip
    mmhub: tuple[int, int, int] | None = None
    mp0: tuple[int, int, int] | None = None   # PSP
    mp1: tuple[int, int, int] | None = None   # SMU
    hdp: tuple[int, int, int] | None = None
    osssys: tuple[int, int, int] | None = None  # IH

    @property
    def isa(self) -> str:
        return self.gen.isa

    @property
    def wave_size(self) -> int:
        return self.gen.wave_size

    @property
    def simd_count(self) -> int:
        return self.cus * self.simd_per_cu

    @property
    def arrays(self) -> int:
        return self.shader_engines * self.arrays_per_engine

    @property
    def sqtt_wptr_absolute(self) -> bool:
        """SQ_THREAD_TRACE_WPTR counts from address 0 (GC 11.0), not from the buffer's base (GC 11.5, 12)."""
        return self.gc[:2] == (11, 0)


_CDNA = dict(kernarg_preload=True, xnack=True)  # llc-19 preloads kernargs for gfx90a and gfx942


def _soc(mmhub: tuple[int, int, int], mp: tuple[int, int, int], hdp: tuple[int, int, int],
         osssys: tuple[int, int, int]) -> dict:
    """The SoC IP versions amdgpu's discovery reports for a chip (PSP and SMU share the MP version)."""
    return dict(mmhub=mmhub, mp0=mp, mp1=mp, hdp=hdp, osssys=osssys)


TARGETS = {t.arch: t for t in (
    Target("gfx1100", RDNA3, "AMD Radeon RX 7900 XTX", 0x744C, 110000, 96, 6, 2, 2, 16, 24 * GIB, 2500, 1250,
           (11, 0, 0), (6, 0, 0), (4, 3, 0), 6144, **_soc((3, 0, 0), (13, 0, 0), (6, 0, 0), (6, 0, 0))),
    Target("gfx1101", RDNA3, "AMD Radeon RX 7800 XT", 0x747E, 110001, 60, 3, 2, 2, 16, 16 * GIB, 2430, 1219,
           (11, 0, 3), (6, 0, 3), (4, 3, 0), 4096, **_soc((3, 0, 0), (13, 0, 10), (6, 0, 0), (6, 0, 0))),
    Target("gfx1102", RDNA3, "AMD Radeon RX 7600", 0x7480, 110002, 32, 2, 2, 2, 16, 8 * GIB, 2655, 1125,
           (11, 0, 2), (6, 0, 2), (4, 3, 0), 2048, **_soc((3, 0, 2), (13, 0, 7), (6, 0, 0), (6, 0, 0))),
    Target("gfx1103", RDNA3, "AMD Radeon 780M", 0x15BF, 110003, 12, 1, 2, 2, 16, 2 * GIB, 2700, 2800,
           (11, 0, 1), (6, 0, 1), (7, 7, 0), 2048, **_soc((3, 0, 1), (13, 0, 4), (6, 0, 0), (6, 0, 0))),
    Target("gfx1150", RDNA3, "AMD Radeon 890M", 0x150E, 110500, 16, 1, 2, 2, 16, 2 * GIB, 2900, 2800,
           (11, 5, 0), (6, 1, 0), (7, 11, 0), 2048, **_soc((3, 3, 0), (14, 0, 0), (6, 1, 0), (6, 1, 0))),
    Target("gfx1151", RDNA3, "AMD Radeon 8060S", 0x1586, 110501, 40, 2, 2, 2, 16, 32 * GIB, 2900, 4000,
           (11, 5, 1), (6, 1, 1), (7, 11, 1), 2048, **_soc((3, 3, 1), (14, 0, 1), (6, 1, 0), (6, 1, 0))),
    Target("gfx1200", RDNA4, "AMD Radeon RX 9060 XT", 0x7590, 120000, 32, 2, 2, 2, 16, 16 * GIB, 3130, 1250,
           (12, 0, 0), (7, 0, 0), (6, 3, 1), 4096, **_soc((4, 1, 0), (14, 0, 2), (7, 0, 0), (7, 0, 0))),
    Target("gfx1201", RDNA4, "AMD Radeon RX 9070 XT", 0x7550, 120001, 64, 4, 2, 2, 16, 16 * GIB, 2970, 1258,
           (12, 0, 1), (7, 0, 1), (6, 3, 1), 8192, **_soc((4, 1, 0), (14, 0, 3), (7, 0, 0), (7, 0, 0))),
    Target("gfx90a", CDNA2, "AMD Instinct MI210", 0x740F, 90010, 104, 8, 1, 4, 8, 64 * GIB, 1700, 1600,
           (9, 4, 2), (4, 4, 0), (7, 4, 0), 8192, **_CDNA),
    Target("gfx942", CDNA3, "AMD Instinct MI300X (CPX partition)", 0x74A1, 90402, 38, 4, 1, 4, 8, 24 * GIB, 2100,
           1300, (9, 4, 3), (4, 4, 2), (7, 9, 0), 4096, **_CDNA),
    Target("gfx950", CDNA, "AMD Instinct MI355X (CPX partition)", 0x75A3, 90500, 32, 4, 1, 4, 8, 36 * GIB, 2400,
           2000, (9, 5, 0), (4, 4, 5), (7, 9, 1), 4096, workgroup_lds_kb=160, **_CDNA),
)}
DEFAULT = {"rdna3": "gfx1100", "rdna4": "gfx1201", "cdna": "gfx942"}  # the chip a family name stands for


def get(arch: str) -> Target:
    """The chip named by a gfx name, or the default chip of a family name (rdna3, rdna4, cdna)."""
    if not isinstance(arch, str):
        raise UnknownArch(f"arch must be a gfx name or a family name, not {arch!r}")
    a = arch.lower()
    t = TARGETS.get(DEFAULT.get(a, a))
    if t is None:
        raise UnknownArch(f"unknown arch {arch!r}; known: {', '.join([*TARGETS, *GENERATIONS])}")
    return t


def generation(arch: str) -> Generation:
    """The generation of a gfx name, of a family name (its instruction tables' name: the generation that has the
    whole table) or of an instruction set's name (`Generation.name`: cdna3, cdna2, ...)."""
    g = _NAMED.get(arch.lower()) if isinstance(arch, str) else None
    return g or get(arch).gen
