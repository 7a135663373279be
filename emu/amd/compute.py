"""The one way a compute dispatch starts: from the COMPUTE_* registers and a grid.

A PM4 queue's runtime programs the registers itself (SET_SH_REG, then DISPATCH_DIRECT: emu.amd.cp); for an AQL
packet the packet processor programs them from the packet, the kernel descriptor and the queue's amd_queue_t, as
the firmware does (emu.amd.aql); the runner API (emu.amd.gpu) submits AQL packets, and tinygrad's run_asm
(emu.os.tinygrad_emu) gives registers directly. Here, once for all of them: the launch limits, the wave size, the
LDS and scratch the registers describe, the decoded code, the run and its statistics, the thread trace
(emu.amd.sqtt) and the performance counters (emu.amd.perfmon) of its waves.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from emu.amd import target, timeline
from emu.amd.debug import fault
from emu.amd.dispatch import Dispatch, Stats, run_dispatch
from emu.amd.exec.wave import Cancel
from emu.amd.hw import pm4
from emu.amd.hw.kd import Rsrc1, Rsrc2
from emu.amd.icache import InstructionCache
from emu.amd.limits import MAX_WORKGROUP_SIZE, check_work
from emu.amd.memory import VM
from emu.amd.perfmon import PerfMonitor
from emu.amd.queue import CPError
from emu.amd.sqtt import ThreadTrace
from emu.amd.symbols import kernel_name

_LDS_SIZE = Rsrc2.FIELDS["granulated_lds_size"]


@dataclass
class ComputeRegisters:
    """The registers of a dispatch, decoded where the hardware gives them meaning."""
    pgm: int  # COMPUTE_PGM_LO/HI: address of the first instruction
    rsrc1: Rsrc1  # COMPUTE_PGM_RSRC1
    rsrc2: Rsrc2  # COMPUTE_PGM_RSRC2
    user_data: tuple[int, ...]  # COMPUTE_USER_DATA_0.. (RSRC2.USER_SGPR of them are loaded; missing ones read 0)
    block: tuple[int, int, int]  # COMPUTE_NUM_THREAD_X/Y/Z
    wave32: bool = False  # DISPATCH_INITIATOR.CS_W32_EN
    tmpring: int = 0  # COMPUTE_TMPRING_SIZE: scratch waves and bytes per wave
    scratch_base: int = 0  # COMPUTE_DISPATCH_SCRATCH_BASE_LO/HI as an address
    start: tuple[int, int, int] = (0, 0, 0)  # COMPUTE_START_X/Y/Z: the first workgroup's ids
    thread_trace: bool = False  # COMPUTE_THREAD_TRACE_ENABLE: the thread trace records its waves
    perfcount: bool = False  # COMPUTE_PERFCOUNT_ENABLE: the SQ's performance counters count its waves


def with_lds(rsrc2: Rsrc2, nbytes: int) -> Rsrc2:
    """`rsrc2` with LDS_SIZE covering `nbytes` (what the firmware programs for an AQL packet's group segment)."""
    return Rsrc2(rsrc2.value & ~_LDS_SIZE.mask | _LDS_SIZE.put(-(-nbytes // pm4.LDS_SIZE_GRANULE)))


def tmpring(chip: target.Target, waves: int, wave_bytes: int) -> int:
    """COMPUTE_TMPRING_SIZE for `waves` scratch slots of at least `wave_bytes` each (rounded up to the chip's
    granule); ValueError when they do not fit its fields."""
    gfx = chip.gen.gfx
    size = -(-wave_bytes // pm4.SCRATCH_WAVESIZE_GRANULE[gfx])
    return pm4.TMPRING_SIZE_WAVES.put(waves) | pm4.TMPRING_SIZE_WAVESIZE[gfx].put(size)


def scratch_slots(chip: target.Target, tmpring: int) -> tuple[int, int]:
    """The scratch slots COMPUTE_TMPRING_SIZE `tmpring` describes: (waves, bytes per wave)."""
    gfx = chip.gen.gfx
    return (pm4.TMPRING_SIZE_WAVES.get(tmpring),
            pm4.TMPRING_SIZE_WAVESIZE[gfx].get(tmpring) * pm4.SCRATCH_WAVESIZE_GRANULE[gfx])


class Device(Protocol):
    """What a dispatch runs on: the GPU's VM, its chip, its instruction cache, thread-trace and performance-counter
    units (if any)."""
    vm: VM
    chip: target.Target
    code: InstructionCache
    sqtt: ThreadTrace | None
    perfmon: PerfMonitor | None


class CountingDevice(Device, Protocol):
    """A Device the packet processors give dispatches to: it numbers them and collects their statistics."""
    dispatches: int

    def add_stats(self, s: Stats) -> None: ...


def launch(gpu: Device, regs: ComputeRegisters, grid: tuple[int, int, int], where: str, *, dispatch_id: int = 0,
           cancel: Cancel | None = None, kernel: fault.Kernel | None = None, timeout: float | None = None) -> Stats:
    """Run the dispatch of `grid` workgroups that `regs` describe on `gpu`; `where` names the packet or call in the
    CPError or LimitError a dispatch the hardware could not run raises (before anything runs), and a fault
    propagates as GPUFault (emu.amd.dispatch.run_dispatch, which also says what `timeout` is)."""
    block = regs.block
    if not all(block) or math.prod(block) > MAX_WORKGROUP_SIZE:
        raise CPError(f"{where}: workgroup of {block} work-items (1 to {MAX_WORKGROUP_SIZE} in all)")
    chip = gpu.chip
    lds = regs.rsrc2.granulated_lds_size * pm4.LDS_SIZE_GRANULE
    check_work(where, math.prod(grid) * math.prod(block), f"(grid {grid} x block {block})", lds,
               "COMPUTE_PGM_RSRC2.LDS_SIZE", chip.arch)
    lanes = chip.gen.lanes(regs.wave32)
    counting = gpu.perfmon.counting(regs.perfcount, lanes) if gpu.perfmon is not None else None
    prog = gpu.code.program(regs.pgm, lanes, stats=counting is not None)
    waves, wave_bytes = scratch_slots(chip, regs.tmpring)
    view = counting.view(prog) if counting is not None else prog  # what traced waves build their steps from
    trace = gpu.sqtt.recording(view, lanes, grid, regs.start) \
        if regs.thread_trace and gpu.sqtt is not None else None
    if trace is None:
        trace = timeline.recording(chip, view, lanes, lambda: kernel.name if kernel is not None else
                                   kernel_name(gpu.vm, prog, regs.pgm), dispatch_id)
    d = Dispatch(prog, regs.pgm, grid, block, lanes, regs.rsrc2, regs.user_data, lds, regs.scratch_base, wave_bytes,
                 waves, regs.start, dispatch_id, regs.rsrc1, kernel, cancel, trace, counting)
    try:
        return run_dispatch(gpu.vm, d, chip.arch, timeout)
    finally:
        gpu.code.seal(regs.pgm, prog)
        if trace is not None:
            trace.close()
        if counting is not None:
            counting.close()


