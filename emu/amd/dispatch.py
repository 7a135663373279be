"""Kernel dispatch: workgroups, their waves, LDS, barriers, scratch and the initial register state.

The initial state follows LLVM AMDGPUUsage "Initial Kernel Execution State": enabled user SGPRs in order
(private segment buffer, dispatch ptr, queue ptr, kernarg segment ptr, dispatch id, flat scratch init, private
segment size), then from `user_sgpr_count` the system SGPRs (workgroup id x/y/z, workgroup info, private
segment wave offset without architected flat scratch; on gfx12 the workgroup ids are also in ttmp9 and
ttmp7, its architected SGPRs); work-item ids packed 10:10:10 in v0 (gfx90a+, gfx11+) or
in v0..v2. All three families here have architected flat scratch: each wave's private memory is its slot of the scratch
buffer (COMPUTE_DISPATCH_SCRATCH_BASE + slot * TMPRING_SIZE.WAVESIZE), which scratch instructions (and flat
accesses to the private aperture) reach through the VM (emu.amd.memspace).

Workgroups run one after another; the waves of a workgroup run round-robin, each until it reaches s_barrier
or s_endpgm; a barrier releases when every wave still running has reached it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from emu.amd.exec.hwreg import initial_mode
from emu.amd.exec.wave import BARRIER, Program, WaveState, run
from emu.amd.memory import VM
from emu.amd.memspace import LDS, Flat, Scratch
from stack.hcq.codeobj import (
    MAX_GRID_ITEMS,
    MAX_WORKGROUP_SIZE,
    Kernel,
    LimitError,
    Rsrc1,
    Rsrc2,
    check_limit,
    max_lds,
    max_wave_scratch,
)

PACKED_IDS = ("gfx90a", "gfx940", "gfx941", "gfx942", "gfx950")
DISPATCH_PACKET_SIZE = 64
TTMP = 108  # operand code of ttmp0
DYNAMIC_STACK = 16384  # bytes per lane added for kernels whose stack size is not known at compile time


@dataclass
class Dispatch:
    """One dispatch as the command processor starts it: everything comes from the compute registers a runtime
    programmed (the kernel descriptor is not consulted), plus the grid of DISPATCH_DIRECT."""
    program: Program
    entry: int  # COMPUTE_PGM_LO/HI: address of the first instruction
    grid: tuple[int, int, int]  # workgroups per dimension
    block: tuple[int, int, int]  # COMPUTE_NUM_THREAD_X/Y/Z
    lanes: int  # 32 with DISPATCH_INITIATOR.CS_W32_EN on gfx10+, else 64
    rsrc2: Rsrc2
    user_sgprs: tuple[int, ...]  # COMPUTE_USER_DATA_0.. (RSRC2.USER_SGPR of them are loaded)
    lds_size: int  # bytes (RSRC2.LDS_SIZE granules)
    scratch_base: int = 0  # COMPUTE_DISPATCH_SCRATCH_BASE
    scratch_wave_bytes: int = 0  # TMPRING_SIZE.WAVESIZE in bytes
    scratch_waves: int = 0  # TMPRING_SIZE.WAVES
    start: tuple[int, int, int] = (0, 0, 0)  # COMPUTE_START_X/Y/Z: first workgroup id
    dispatch_id: int = 0
    rsrc1: Rsrc1 = field(default_factory=lambda: Rsrc1.decode(0))  # COMPUTE_PGM_RSRC1 (float modes at wave start)


@dataclass
class Stats:
    """Work done by a dispatch."""
    waves: int = 0
    wave_instructions: int = 0
    lane_instructions: int = 0


def run_dispatch(vm: VM, d: Dispatch, arch: str) -> Stats:
    """Run every workgroup of `d`; a fault propagates as GPUFault (the dispatch stops there)."""
    nitems = d.block[0] * d.block[1] * d.block[2]
    slots = _WaveSlots(vm, d, arch, -(-nitems // d.lanes), nitems)
    stats = Stats()
    gx, gy, gz = d.grid
    sx, sy, sz = d.start
    for wz in range(sz, sz + gz):
        for wy in range(sy, sy + gy):
            for wx in range(sx, sx + gx):
                _run_workgroup(slots.start((wx, wy, wz)), d.program, stats)
    return stats


def _run_workgroup(waves: list[WaveState], program: Program, stats: Stats) -> None:
    live = list(waves)
    try:
        while live:
            at_barrier = []
            for w in live:
                if run(w, program) == BARRIER:
                    at_barrier.append(w)
            live = at_barrier  # every running wave reached the barrier (or ended): release it
    finally:
        for w in waves:
            stats.waves += 1
            stats.wave_instructions += w.executed
            stats.lane_instructions += w.lane_ops


class _WaveSlots:
    """The waves of a workgroup, made once per dispatch and reset for each workgroup it runs: their register
    arrays, LDS, scratch slots and native-call counters are reused; only the workgroup ids and the state the
    previous workgroup left change."""

    def __init__(self, vm: VM, d: Dispatch, arch: str, nwaves: int, nitems: int):
        self.d = d
        self.lds = LDS(d.lds_size)
        self.waves, self.initial = [], []
        for i in range(nwaves):
            w = _initial_wave(d, i, nitems, arch)
            w.vm, w.lds = vm, self.lds
            slot = i % d.scratch_waves if d.scratch_waves else 0  # the scratch wave slot the wave is given
            w.scratch = Scratch(vm, d.scratch_base + slot * d.scratch_wave_bytes, d.lanes,
                                d.scratch_wave_bytes // d.lanes)
            w.flat = Flat(vm, self.lds, w.scratch)
            w.dispatch, w.wave_id = d.dispatch_id, i
            self.waves.append(w)
            self.initial.append((w.sgpr.copy(), w.vgpr[:3].copy(), w.exec, w.active))
        self.fresh = True

    def start(self, wg: tuple[int, int, int]) -> list[WaveState]:
        if not self.fresh:  # the previous workgroup's waves: back to the initial state
            self.lds.mem.fill(0)
            for w, (sgpr, v012, exec_, active) in zip(self.waves, self.initial, strict=True):
                w.sgpr[:] = sgpr
                w.vgpr.fill(0)
                w.vgpr[:3] = v012
                w.active, w.active_mask = active, exec_
                w.pc, w.executed, w.lane_ops, w.gpr_idx = self.d.entry, 0, 0, 0
        self.fresh = False
        for w in self.waves:
            _set_workgroup(w, self.d, wg)
        return self.waves


def _initial_wave(d: Dispatch, index: int, nitems: int, arch: str) -> WaveState:
    """Wave `index` of a workgroup at its start, but for the workgroup ids (_set_workgroup)."""
    fam = d.program.family
    lanes = d.lanes
    w = WaveState(fam, lanes, agprs=256 if fam == "cdna" else 0)
    w.mode = initial_mode(fam, d.rsrc1)  # FP_ROUND, FP_DENORM, DX10_CLAMP, IEEE from COMPUTE_PGM_RSRC1
    n = d.rsrc2.user_sgpr_count
    w.sgpr[:n] = (list(d.user_sgprs[:n]) + [0] * n)[:n]  # USER_DATA registers a runtime did not write read as 0
    # work-item ids of each lane
    t = index * lanes + np.arange(lanes)
    bx, by, _ = d.block
    x, y, z = t % bx, (t // bx) % by, t // (bx * by)
    ndims = d.rsrc2.enable_vgpr_workitem_id
    ids = [x, y if ndims >= 1 else 0 * y, z if ndims >= 2 else 0 * z]
    if arch in PACKED_IDS or fam in ("rdna3", "rdna4"):
        w.vgpr[0] = (ids[0] | ids[1] << 10 | ids[2] << 20).astype(np.uint32)
    else:
        for dim in range(ndims + 1):
            w.vgpr[dim] = ids[dim].astype(np.uint32)
    w.set_exec((1 << max(0, min(lanes, nitems - index * lanes))) - 1)  # the lanes that hold work-items
    w.pc = d.entry
    return w


def _set_workgroup(w: WaveState, d: Dispatch, wg: tuple[int, int, int]) -> None:
    """The system SGPRs of workgroup `wg` after the user SGPRs (and gfx12's architected ttmp7 / ttmp9)."""
    r2 = d.rsrc2
    s = r2.user_sgpr_count
    for axis in range(3):
        if getattr(r2, f"enable_sgpr_workgroup_id_{'xyz'[axis]}"):
            w.sgpr[s] = wg[axis]
            s += 1
    if r2.enable_sgpr_workgroup_info:
        w.sgpr[s] = 0
    if w.family == "rdna4":  # architected SGPRs: workgroup ids in ttmp9 (x) and ttmp7 (y | z << 16)
        w.sgpr[TTMP + 9] = wg[0]
        w.sgpr[TTMP + 7] = wg[1] | wg[2] << 16
    w.workgroup = wg


def check_launch(kernel: Kernel, grid, block, dynamic_lds: int = 0) -> None:
    """Reject, before anything is allocated, launches the hardware could not run or that pass the limits of
    stack.hcq.codeobj (ValueError, LimitError for sizes, naming what is wrong)."""
    where = f"kernel {kernel.name!r}"
    for what, v in (("grid", grid), ("block", block)):
        if any(not isinstance(x, (int, np.integer)) or isinstance(x, bool) or not 1 <= x < 1 << 32 for x in v):
            raise ValueError(f"{what} {tuple(v)}: every dimension must be a positive 32-bit integer")
    n = block[0] * block[1] * block[2]
    limit = min(kernel.max_flat_workgroup_size or MAX_WORKGROUP_SIZE, MAX_WORKGROUP_SIZE)
    if n > limit:
        raise LimitError(f"block {tuple(block)} has {n} work-items; {where} allows at most {limit}")
    items = [int(g) * int(b) for g, b in zip(grid, block, strict=True)]
    for axis, g, b, total in zip("xyz", grid, block, items, strict=True):
        check_limit(where, f"work-items in {axis} (grid {g} x block {b})", total, MAX_GRID_ITEMS)
    check_limit(where, f"work-items (grid {tuple(grid)} x block {tuple(block)})", items[0] * items[1] * items[2],
                MAX_GRID_ITEMS)
    if not isinstance(dynamic_lds, (int, np.integer)) or isinstance(dynamic_lds, bool) or dynamic_lds < 0:
        raise ValueError(f"{where}: dynamic_lds must be a non-negative int, not {dynamic_lds!r}")
    kd = kernel.descriptor
    check_limit(where, "LDS bytes (group_segment_fixed_size + dynamic_lds)", kd.group_segment_fixed_size + dynamic_lds,
                max_lds(kd.arch))
    lanes = 32 if kd.wave32 else 64
    private = kd.private_segment_fixed_size + (DYNAMIC_STACK if kernel.uses_dynamic_stack else 0)
    check_limit(where, f"private segment bytes per work-item (wave{lanes})", private,
                max_wave_scratch(kd.arch) // lanes)
