"""GRBM_GFX_INDEX: which shader engine, shader array (SH on gfx9) and block instance the CP's register accesses of
per-instance units go to. One per GPU, shared by the units it selects in (the thread trace, emu.amd.sqtt; the
performance counters, emu.amd.perfmon). A broadcast bit selects every engine, array or instance; an index past
the chip's selects nothing (writes go nowhere, reads give 0)."""
from __future__ import annotations

from emu.amd import target
from emu.amd.hw import pm4

BROADCAST = 0xE000_0000  # se, sa (sh) and instance broadcast writes: the value a driver leaves behind


class GfxIndex:
    """The GRBM_GFX_INDEX register of one GPU and what its value selects."""

    def __init__(self, chip: target.Target):
        gfx = chip.gen.gfx
        self.addr, f = pm4.REGS[gfx]["GRBM_GFX_INDEX"]
        sa = "sh" if "sh_index" in f else "sa"  # gfx9 names the shader array SH
        self._se, self._se_all = f["se_index"], f["se_broadcast_writes"]
        self._sa, self._sa_all = f[f"{sa}_index"], f[f"{sa}_broadcast_writes"]
        self._inst, self._inst_all = f["instance_index"], f["instance_broadcast_writes"]
        self.value = BROADCAST

    def _pick(self, index, broadcast, n: int) -> range:
        if broadcast.get(self.value):
            return range(n)
        i = index.get(self.value)
        return range(i, i + 1) if i < n else range(0)

    def engines(self, n: int) -> range:
        """The shader engines (of `n`) selected."""
        return self._pick(self._se, self._se_all, n)

    def arrays(self, n: int) -> range:
        """The shader arrays of an engine (of `n`) selected."""
        return self._pick(self._sa, self._sa_all, n)

    def instances(self, n: int, shift: int = 0) -> range:
        """The instances (of `n`) selected, their number in instance_index from bit `shift` on (the SQ of a WGP on
        gfx11+ is instance `wgp << 2`)."""
        if self._inst_all.get(self.value):
            return range(n)
        i = self._inst.get(self.value) >> shift
        return range(i, i + 1) if i < n else range(0)
