"""The state of one wave in flat arrays (the layout every execution tier works on), and what a step returns to
the run loop."""
from __future__ import annotations

from collections import deque

import numpy as np

from emu.amd import target
from emu.amd.exec.operands import mask_to_lanes
from emu.amd.memory import VM
from emu.amd.memspace import PRIVATE_APERTURE, SHARED_APERTURE
from emu.amd.regs import EXEC, INLINE_FLOAT, INLINE_INT, PRIVATE_LIMIT, SCC, SHARED_BASE, TTMP0, VCC, VGPR0

END, BARRIER = 1, 2  # a step's result: the wave finished / waits at a barrier (0: go on)
ACC = 256  # first row of the ACC VGPRs in WaveState.vgpr


def rows(agprs: int, vgprs: int = 256) -> int:
    """The rows of a wave's VGPR array: its VGPRs, or on a chip with ACC VGPRs the ACC VGPRs after row ACC."""
    return ACC + agprs if agprs else vgprs


# Slots of the scalar register file WaveState.sgpr: scalar operand codes (emu.amd.regs) index it directly; MODE
# and TRAPSTS come after the codes.
TTMP = TTMP0
MODE, TRAPSTS = VGPR0, VGPR0 + 1
SLOTS = TRAPSTS + 1
HISTORY = 64  # steps a wave's history keeps (emu.amd.debug.history)
CATEGORIES = ("SALU", "VALU", "VMEM", "SMEM", "LDS", "branch", "other")  # of WaveState.tally (emu.amd.exec.category)


def _constants() -> np.ndarray:
    """The slots of the inline constants and aperture registers, as a 32-bit source reads them."""
    c = np.zeros(SLOTS, np.uint32)
    c[INLINE_INT] = np.r_[np.arange(65), -np.arange(1, 17)].astype(np.uint32)
    c[INLINE_FLOAT] = [0x3F000000, 0xBF000000, 0x3F800000, 0xBF800000, 0x40000000, 0xC0000000, 0x40800000,
                       0xC0800000, 0x3E22F983]  # 0.5 -0.5 1 -1 2 -2 4 -4 1/(2*pi)
    shared, private = SHARED_APERTURE >> 32, PRIVATE_APERTURE >> 32
    c[SHARED_BASE:PRIVATE_LIMIT + 1] = [shared, shared, private, private]
    return c


CONSTANTS = _constants()


class _Register:
    """A register of the SGPR file read and written as an int; `slot` is its index, or the name of the state's
    attribute that holds it (M0's differs per family)."""

    def __init__(self, slot: int | str, mask: int = 0xFFFFFFFF):
        self.slot, self.mask = slot, mask

    def __get__(self, w, owner=None):
        return self if w is None else int(w.sgpr[self._index(w)])

    def __set__(self, w, value: int) -> None:
        w.sgpr[self._index(w)] = value & self.mask

    def _index(self, w) -> int:
        return getattr(w, self.slot) if isinstance(self.slot, str) else self.slot


class WaveState:
    """Registers and memory spaces of one wave.

    `sgpr` is the whole scalar state as one uint32 array indexed by operand code (SGPRs, VCC, TTMPs, M0, EXEC, the
    inline constants and aperture registers materialized, SCC) with MODE and TRAPSTS after it; `vgpr` is
    [register][lane] uint32 (CDNA: ACC VGPRs as rows ACC..). `exec`, `vcc`, `scc`, `m0`, `mode` and `trapsts` are
    views of their slots as ints; `active` caches EXEC as a bool array over lanes (every EXEC write goes through
    `set_exec`, which keeps it)."""

    def __init__(self, arch: str, lanes: int, vgprs: int = 256, agprs: int = 0):
        """`arch`: a gfx name, or a family name for its default generation."""
        self.gen, self.lanes = target.generation(arch), lanes
        self.family = self.gen.name  # its instruction set
        self.full = (1 << lanes) - 1
        self.sgpr = CONSTANTS.copy()
        self.sgpr64 = self.sgpr.view(np.uint64)  # the file as register pairs: sgpr64[k] is s[2k+1:2k]
        self.m0_slot = self.gen.m0
        # ACC VGPRs (CDNA) are rows ACC.. of the same array, so ACC operands are plain register numbers ACC + n
        self.vgpr = np.zeros((rows(agprs, vgprs), lanes), np.uint32)
        self.agpr = self.vgpr[ACC:] if agprs else None
        self.vgpr_f32, self.vgpr_i32 = self.vgpr.view(np.float32), self.vgpr.view(np.int32)  # the lean interpreter's
        self.active = np.zeros(lanes, bool)
        self.set_exec(self.full)
        self.pc = 0
        self.counters = None  # the LLVM tier's call counters (emu.amd.exec.jit.Counters), made on first use
        self.left = 0  # instructions the run loop's watchdog still allows
        self.gpr_idx = 0  # CDNA VGPR indexing mode enabled
        self.gpr_alloc = 0  # HW_REG_GPR_ALLOC: the registers the dispatch gave the wave (emu.amd.exec.hwreg)
        self.vm: VM | None = None
        self.lds = self.scratch = self.flat = None
        self.dispatch: int | None = None
        self.workgroup: tuple[int, int, int] | None = None
        self.wave_id: int | None = None
        self.executed = 0  # instructions executed (wave-instructions)
        self.lane_ops = 0  # lane-instructions: active lanes summed over vector instructions
        self.tally = [0] * len(CATEGORIES)  # interpreted wave-instructions by category, under HWEMU_STATS
        self.history: deque[int] = deque(maxlen=HISTORY)  # where its last steps started (emu.amd.debug.history)
        self.trace = None  # the wave trace selecting this wave (emu.amd.debug.wavetrace.Selection), or None

    def _pair(self, slot: int) -> int:
        return int(self.sgpr[slot]) | int(self.sgpr[slot + 1]) << 32

    def _set_pair(self, slot: int, value: int) -> None:
        self.sgpr[slot] = value & 0xFFFFFFFF
        self.sgpr[slot + 1] = value >> 32 & 0xFFFFFFFF

    @property
    def exec(self) -> int:
        return self._pair(EXEC)

    @exec.setter
    def exec(self, value: int) -> None:
        self.set_exec(value)

    def set_exec(self, value: int) -> None:
        value &= self.full
        self._set_pair(EXEC, value)
        self.active_mask = value
        self.active = mask_to_lanes(value, self.lanes)

    @property
    def vcc(self) -> int:
        return self._pair(VCC)

    @vcc.setter
    def vcc(self, value: int) -> None:
        self._set_pair(VCC, value)

    scc = _Register(SCC, 1)
    m0 = _Register("m0_slot")
    mode = _Register(MODE)
    trapsts = _Register(TRAPSTS)

