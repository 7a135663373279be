"""The wave's hardware registers and named status bits: one enumerated state model.

- MODE: float round / denormal modes, DX10_CLAMP, IEEE (bits per the ISA manuals); waves start with it from
  COMPUTE_PGM_RSRC1 (`initial_mode`), as the SPI programs it.
- `registers(gen)`: what s_getreg_b32 reads and s_setreg_b32 / s_setreg_imm32_b32 write, by the hwreg id of the
  instruction set's HWREG enum (the vendor tables'; LLVM assembles `hwreg(HW_REG_*)` to the same ids): a reader of
  the wave's state and the writable bits (0: read-only). MODE and TRAPSTS have the fields of SQ_WAVE_MODE /
  SQ_WAVE_TRAPSTS in the Linux amdgpu headers (the generation's `mode_writable`, `trapsts_writable`), every one of
  them writable; their other bits are reserved (ROCdbgapi's register_read_only_mask in architecture.cpp marks the
  same bits "0"): they read 0 and ignore writes. An id not listed reads 0 and ignores writes.
- `STATUS_BITS`: the dotted names the pseudocode uses (WAVE_STATUS.PRIV, TRAPSTS.INVALID, ...), each read from or
  written to that state; any other dotted name is an instruction the engine cannot run.
- HW_ID (gfx9) / HW_ID1, HW_ID2 (RDNA): where the wave runs, in the layouts of SQ_WAVE_HW_ID (Linux
  gc_9_4_3_sh_mask.h) and SQ_WAVE_HW_ID1 / HW_ID2 (gc_11_0_0, gc_12_0_0_sh_mask.h), filled from this placement
  model: a workgroup runs alone on the first CU (RDNA: WGP) of shader array 0 of shader engine 0; wave i of the
  workgroup (its index in dispatch order) on SIMD i % 4 (a gfx9 CU and an RDNA WGP both have four SIMDs) in wave
  slot i // 4 of that SIMD; workgroup slot (TG_ID / WG_ID) 0; sent from queue 0 of pipe 0 of ME 1 (the first
  compute micro engine; ME 0 is graphics), state id 0, in the first VMID amdkfd gives processes (amdgpu
  gmc_v9_0 / v11 / v12 first_kfd_vmid: 8 with graphics, 3 on the compute-only gfx 9.4.x parts); DP_RATE reads 0.
- `clock()`: the monotonic counter s_memtime / s_memrealtime / s_sendmsg_rtn / SHADER_CYCLES read.
"""
from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from emu.amd import isa, target
from emu.amd.hw.pm4 import LDS_SIZE_GRANULE

# MODE fields
FP_ROUND, FP_DENORM, DX10_CLAMP, IEEE = 0, 4, 8, 9
F32_KEEP_IN, F32_KEEP_OUT, F16_KEEP_IN, F16_KEEP_OUT = 1 << 4, 1 << 5, 1 << 6, 1 << 7  # FP_DENORM bits
DENORM_ALL = 0xF << FP_DENORM
# STATUS bits (gfx9 to gfx11; gfx12 moved SCC to STATE_PRIV[9] and added STATUS.WAVE64 [29]: the layout of
# SQ_WAVE_STATUS / SQ_WAVE_STATE_PRIV in the Linux driver's gc_12_0_0_sh_mask.h, which the CWSR trap handler reads)
STATUS_SCC, STATUS_EXECZ, STATUS_VCCZ, STATUS_VALID = 1 << 0, 1 << 9, 1 << 10, 1 << 16
STATUS_WAVE64_GFX12, STATE_PRIV_SCC_GFX12 = 1 << 29, 1 << 9
TRAPSTS_INVALID = 1 << 0  # TRAPSTS.EXCP[0] (gfx12: EXCP_FLAG_USER.ALU_INVALID, the same bit): invalid operation
# gfx12 EXCP_FLAG_USER (gc_12_0_0 SQ_WAVE_EXCP_FLAG_USER; ROCdbgapi gfx12: [29:7] reserved): ALU_* [6:0],
# BUFFER_OOB [30], LOD_CLAMPED [31]
EXCP_FLAG_USER_FIELDS = 0xC000007F

SHADER_CYCLES_BITS = 20  # HW_REG_SHADER_CYCLES: a 20-bit cycle counter


def initial_mode(family: str, rsrc1) -> int:
    """MODE at wave start from COMPUTE_PGM_RSRC1 (FLOAT_MODE [19:12] -> MODE [7:0]; DX10_CLAMP, IEEE_MODE, which
    RDNA4 no longer has: its RSRC1 bits 21 and 23 mean other things)."""
    mode = (rsrc1.value >> 12) & 0xFF
    if target.generation(family).ieee_mode:
        mode |= rsrc1.enable_dx10_clamp << DX10_CLAMP | rsrc1.enable_ieee_mode << IEEE
    return mode


def default_mode(family: str) -> int:
    """MODE of a free-standing wave: what a clang-19 kernel's descriptor asks for (denormals kept, IEEE and
    DX10_CLAMP on where they exist)."""
    return DENORM_ALL | (1 << DX10_CLAMP | 1 << IEEE if target.generation(family).ieee_mode else 0)


def clock() -> int:
    """A monotonic 64-bit counter (nanoseconds of the host's monotonic clock)."""
    return time.monotonic_ns() & 0xFFFFFFFFFFFFFFFF


def _zeros(w) -> int:
    return STATUS_EXECZ * (w.exec == 0) | STATUS_VCCZ * ((w.vcc & w.full) == 0) | STATUS_VALID


def _status(w) -> int:
    return _zeros(w) | (w.scc & 1)


def _status_gfx12(w) -> int:
    """gfx12 STATUS: SCC moved to STATE_PRIV; bit 13 says the wave runs 64 lanes."""
    return _zeros(w) | STATUS_WAVE64_GFX12 * (w.lanes == 64)


def _set_mode(w, v: int) -> None:
    w.mode = v


GPR_IDX_EN = 1 << 27  # gfx9 MODE.GPR_IDX_EN: the wave keeps it apart (`gpr_idx`, s_set_gpr_idx_on / _off)


def _gfx9_mode(w) -> int:
    return w.mode | GPR_IDX_EN * w.gpr_idx


def _set_gfx9_mode(w, v: int) -> None:
    w.mode, w.gpr_idx = v & ~GPR_IDX_EN, v >> 27 & 1


def _set_trapsts(w, v: int) -> None:
    w.trapsts = v


@dataclass(frozen=True)
class HwReg:
    name: str
    read: Callable[..., int]
    writable: int = 0
    write: Callable | None = None


# Allocation registers in the layouts of SQ_WAVE_GPR_ALLOC / SQ_WAVE_LDS_ALLOC (the headers above), as the CWSR
# trap handlers of the Linux amdkfd driver read them to save a wave (cwsr_trap_handler_gfx9.asm for ASIC_FAMILY >=
# CHIP_ALDEBARAN, cwsr_trap_handler_gfx10.asm for >= CHIP_PLUM_BONITO, cwsr_trap_handler_gfx12.asm):
# GPR_ALLOC.VGPR_SIZE at [11:6] (gfx90a and later CDNA: (VGPR_SIZE + 1) * 8 VGPRs and ACC VGPRs together),
# [19:12] (gfx11, gfx12: (VGPR_SIZE + 1) * 4 VGPRs); CDNA's SGPR_SIZE [27:24]: (SGPR_SIZE + 1) * 16 SGPRs.
# LDS_ALLOC.LDS_SIZE [20:12] counts 256-byte units (gfx12: 512). Bases are 0: one workgroup at a time has the CU,
# its LDS and registers from the start; CDNA's ACCV_OFFSET [17:12] (where the ACC VGPRs start) reads 0.
LDS_SIZE_SHIFT = 12
IB_STS2_WAVE64 = 1 << 11  # RDNA3 HW_REG_IB_STS2 (id 28): the wave runs 64 lanes


def gpr_alloc(family: str, lanes: int, rsrc1) -> int:
    """GPR_ALLOC of a wave COMPUTE_PGM_RSRC1 starts: its VGPRS field counts granules of 4 VGPRs (gfx9, wave64),
    8 (wave32; CDNA3/4: 8 of the unified VGPR + ACC VGPR file), its SGPRS field 8 SGPRs allocated by 16 (gfx9)."""
    gen = target.generation(family)
    unified = gen.agprs > 0  # VGPRs and ACC VGPRs share one file, allocated by 8
    vgprs = (rsrc1.granulated_workitem_vgpr_count + 1) * (8 if unified or lanes == 32 else 4)
    value = (vgprs // (8 if unified else 4) - 1) << gen.vgpr_size_shift
    if gen.sgpr_size_shift is not None:
        sgprs = (rsrc1.granulated_wavefront_sgpr_count + 1) * 8
        value |= (-(-sgprs // 16) - 1) << gen.sgpr_size_shift
    return value


def lds_alloc(family: str, lds_bytes: int) -> int:
    """LDS_ALLOC of a wave whose workgroup asked for lds_bytes of LDS: the SPI allocates whole COMPUTE_PGM_RSRC2
    LDS_SIZE granules (512 bytes), LDS_SIZE counts them in the SQ's unit."""
    granted = -(-lds_bytes // LDS_SIZE_GRANULE) * LDS_SIZE_GRANULE
    return granted // target.generation(family).lds_granule << LDS_SIZE_SHIFT


# HW_ID / HW_ID1 / HW_ID2: the placement model of the module docstring
SIMDS = 4
HW_ME = 1


def _slot(w) -> tuple[int, int]:
    """(wave slot in its SIMD, SIMD id) of wave `w` in the placement model."""
    i = w.wave_id or 0
    return i // SIMDS, i % SIMDS


def hw_id(w) -> int:
    """gfx9 HW_ID: WAVE_ID [3:0], SIMD_ID [5:4], PIPE_ID [7:6], CU_ID [11:8], SH_ID [12], SE_ID [15:13],
    TG_ID [19:16], VM_ID [23:20], QUEUE_ID [26:24], STATE_ID [29:27], ME_ID [31:30]."""
    wave, simd = _slot(w)
    return (wave & 0xF) | simd << 4 | w.gen.hw_vmid << 20 | HW_ME << 30


def hw_id1(w) -> int:
    """RDNA HW_ID1: WAVE_ID [4:0], SIMD_ID [9:8], WGP_ID [13:10], SA_ID [16], SE_ID [20:18], DP_RATE [31:29]."""
    wave, simd = _slot(w)
    return (wave & 0x1F) | simd << 8


def hw_id2(w) -> int:
    """RDNA HW_ID2: QUEUE_ID [3:0], PIPE_ID [5:4], ME_ID [9:8], STATE_ID [14:12], WG_ID [20:16], VM_ID [27:24]."""
    return HW_ME << 8 | w.gen.hw_vmid << 24


def _mode(gen: target.Generation) -> HwReg:
    """MODE; where the generation indexes VGPRs (s_set_gpr_idx_on), GPR_IDX_EN is the wave's `gpr_idx`."""
    if gen.gpr_indexing:
        return HwReg("MODE", _gfx9_mode, gen.mode_writable, _set_gfx9_mode)
    return HwReg("MODE", lambda w: w.mode, gen.mode_writable, _set_mode)


_GPR_ALLOC = HwReg("GPR_ALLOC", lambda w: w.gpr_alloc)
_LDS_ALLOC = HwReg("LDS_ALLOC", lambda w: lds_alloc(w.family, w.lds.size) if w.lds is not None else 0)
# What each hardware register the vendor tables name (their HWREG enum, per instruction set: gfx12 spells them
# HW_REG_WAVE_*) reads and writes, given the generation
_REGISTERS: dict[str, Callable[[target.Generation], HwReg]] = {
    "HW_REG_MODE": _mode, "HW_REG_WAVE_MODE": _mode,
    "HW_REG_STATUS": lambda gen: HwReg("STATUS", _status),
    "HW_REG_WAVE_STATUS": lambda gen: HwReg("STATUS", _status_gfx12),
    "HW_REG_WAVE_STATE_PRIV": lambda gen: HwReg("STATE_PRIV", lambda w: STATE_PRIV_SCC_GFX12 * (w.scc & 1)),
    "HW_REG_TRAPSTS": lambda gen: HwReg("TRAPSTS", lambda w: w.trapsts, gen.trapsts_writable, _set_trapsts),
    "HW_REG_WAVE_EXCP_FLAG_USER": lambda gen: HwReg("EXCP_FLAG_USER", lambda w: w.trapsts, EXCP_FLAG_USER_FIELDS,
                                                    _set_trapsts),
    "HW_REG_HW_ID": lambda gen: HwReg("HW_ID", hw_id),
    "HW_REG_HW_ID1": lambda gen: HwReg("HW_ID1", hw_id1), "HW_REG_WAVE_HW_ID1": lambda gen: HwReg("HW_ID1", hw_id1),
    "HW_REG_HW_ID2": lambda gen: HwReg("HW_ID2", hw_id2), "HW_REG_WAVE_HW_ID2": lambda gen: HwReg("HW_ID2", hw_id2),
    "HW_REG_GPR_ALLOC": lambda gen: _GPR_ALLOC, "HW_REG_WAVE_GPR_ALLOC": lambda gen: _GPR_ALLOC,
    "HW_REG_LDS_ALLOC": lambda gen: _LDS_ALLOC, "HW_REG_WAVE_LDS_ALLOC": lambda gen: _LDS_ALLOC,
    # the counters of outstanding memory accesses, VALU ops and replays: the engine retires every instruction
    # before the next one issues, so none is outstanding when s_getreg reads them
    "HW_REG_IB_STS": lambda gen: HwReg("IB_STS", lambda w: 0),
    "HW_REG_IB_STS2": lambda gen: HwReg("IB_STS2", lambda w: IB_STS2_WAVE64 if w.lanes == 64 else 0),
    "HW_REG_SHADER_CYCLES": lambda gen: HwReg("SHADER_CYCLES", lambda w: clock() & ((1 << SHADER_CYCLES_BITS) - 1)),
    "HW_REG_SHADER_CYCLES_LO": lambda gen: HwReg("SHADER_CYCLES_LO", lambda w: clock() & 0xFFFFFFFF),
    "HW_REG_SHADER_CYCLES_HI": lambda gen: HwReg("SHADER_CYCLES_HI", lambda w: clock() >> 32 & 0xFFFFFFFF),
}


@functools.cache
def registers(gen: target.Generation) -> dict[int, HwReg]:
    """The hardware registers of a generation by hwreg id: those of its instruction set's HWREG enum that the wave
    models (any other id reads 0 and ignores writes)."""
    names = isa.load(gen.name).enums["HWREG"]
    return {i: _REGISTERS[n](gen) for i, n in names.items() if n in _REGISTERS}


def snapshot(w) -> np.ndarray:
    """The hardware registers of wave `w` as the array the pcode indexes (HW_REGISTERS[id])."""
    regs = np.zeros(64, np.uint32)
    for i, r in registers(w.gen).items():
        regs[i] = r.read(w) & 0xFFFFFFFF
    return regs


def commit(w, regs: np.ndarray) -> None:
    """Write back what s_setreg changed (the pcode already kept read-only bits through `write_mask`)."""
    for i, r in registers(w.gen).items():
        if r.write is not None and int(regs[i]) != r.read(w) & 0xFFFFFFFF:
            r.write(w, int(regs[i]))


def write_mask(family: str) -> Callable[[int, int], int]:
    """HwRegWriteMask(reg, priv): the bits of hardware register `reg` s_setreg may change."""
    regs = registers(target.generation(family))
    return lambda reg, priv: regs[reg].writable if reg in regs else 0


def _trapsts_invalid(w, v) -> None:
    if int(np.any(v)) if isinstance(v, np.ndarray) else int(v):
        w.trapsts |= TRAPSTS_INVALID


# dotted names in the pcode: (reader or None, writer or None); a missing side is not allowed
STATUS_BITS: dict[str, tuple[Callable | None, Callable | None]] = {
    "WAVE_STATUS.PRIV": (lambda w: 0, None),  # user waves; writing it (s_rfe) is a trap handler's business
    "WAVE_STATUS.COND_DBG_SYS": (lambda w: 0, None),  # no debugger attached
    "WAVE_STATUS.COND_DBG_USER": (lambda w: 0, None),
    "TRAPSTS.INVALID": (lambda w: w.trapsts & TRAPSTS_INVALID, _trapsts_invalid),
    "WAVE_MODE.GPR_IDX_EN": (lambda w: w.gpr_idx, lambda w, v: setattr(w, "gpr_idx", int(v) & 1)),
}
