"""Kernel dispatch: workgroups, their waves, LDS, barriers, scratch and the initial register state.

The initial state follows LLVM AMDGPUUsage "Initial Kernel Execution State": enabled user SGPRs in order
(private segment buffer, dispatch ptr, queue ptr, kernarg segment ptr, dispatch id, flat scratch init, private
segment size), then from `user_sgpr_count` the system SGPRs (workgroup id x/y/z, workgroup info, private
segment wave offset without architected flat scratch; on gfx12 the workgroup ids are also in ttmp9 and
ttmp7, its architected SGPRs); work-item ids packed 10:10:10 in v0 (gfx90a+, gfx11+) or
in v0..v2. All three families here have architected flat scratch: each wave's private memory is a region of
the VM that scratch instructions (and flat accesses to the private aperture) reach through emu.amd.memspace.

Workgroups run one after another; the waves of a workgroup run round-robin, each until it reaches s_barrier
or s_endpgm; a barrier releases when every wave still running has reached it.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from stack.hcq.codeobj import Kernel
from emu.amd.memory import VM
from emu.amd.memspace import LDS, Flat, Scratch
from emu.amd.wave import BARRIER, Program, WaveState, run

PACKED_IDS = ("gfx90a", "gfx940", "gfx941", "gfx942", "gfx950")
DISPATCH_PACKET_SIZE = 64
TTMP = 108  # operand code of ttmp0
DYNAMIC_STACK = 16384  # bytes per lane added for kernels whose stack size is not known at compile time
MAX_LDS = 65536  # bytes of LDS a workgroup can allocate
MAX_PRIVATE = 1 << 20  # bytes of scratch per work-item the emulator accepts


@dataclass
class Launch:
    """One dispatch: what to run and where its inputs live."""
    kernel: Kernel
    program: Program
    entry: int  # address of the first instruction
    grid: tuple[int, int, int]  # workgroups per dimension
    block: tuple[int, int, int]  # work-items per workgroup dimension
    lanes: int
    kernarg_addr: int
    dispatch_ptr: int
    queue_ptr: int
    dispatch_id: int
    dynamic_lds: int = 0


@dataclass
class Stats:
    """Work done by a dispatch."""
    waves: int = 0
    wave_instructions: int = 0
    lane_instructions: int = 0


def dispatch_packet(launch: Launch, kernel_object: int, private_size: int, group_size: int) -> bytes:
    """An HSA kernel_dispatch_packet (64 bytes) describing the launch."""
    (gx, gy, gz), (bx, by, bz) = launch.grid, launch.block
    dims = 3 if gz * bz > 1 else 2 if gy * by > 1 else 1
    header = 2 | (1 << 8)  # HSA_PACKET_TYPE_KERNEL_DISPATCH, barrier bit
    return struct.pack("<HHHHHHIIIIIQQQQ", header, dims, bx, by, bz, 0, gx * bx, gy * by, gz * bz, private_size,
                       group_size, kernel_object, launch.kernarg_addr, 0, 0)


def run_dispatch(vm: VM, launch: Launch, dispatch_no: int, arch: str) -> Stats:
    k, kd = launch.kernel, launch.kernel.descriptor
    lanes = launch.lanes
    nitems = launch.block[0] * launch.block[1] * launch.block[2]
    nwaves = -(-nitems // lanes)
    private = kd.private_segment_fixed_size + (DYNAMIC_STACK if k.uses_dynamic_stack else 0)
    private = -(-private // 4) * 4
    scratch_va = vm.alloc(nwaves * lanes * private, name="scratch") if private else None
    lds_size = kd.group_segment_fixed_size + launch.dynamic_lds
    stats = Stats()
    try:
        gx, gy, gz = launch.grid
        for wz in range(gz):
            for wy in range(gy):
                for wx in range(gx):
                    _run_workgroup(vm, launch, (wx, wy, wz), nwaves, nitems, private, scratch_va, lds_size,
                                   dispatch_no, arch, stats)
    finally:
        if scratch_va is not None:
            vm.unmap(scratch_va)
    return stats


def _run_workgroup(vm, launch: Launch, wg, nwaves, nitems, private, scratch_va, lds_size, dispatch_no, arch,
                   stats: Stats) -> None:
    lds = LDS(lds_size)
    waves = []
    for i in range(nwaves):
        w = _initial_wave(launch, wg, i, nitems, arch)
        w.vm, w.lds = vm, lds
        w.scratch = Scratch(vm, scratch_va + i * launch.lanes * private, launch.lanes, private) if private else None
        w.flat = Flat(vm, lds, w.scratch)
        w.dispatch, w.workgroup, w.wave_id = dispatch_no, wg, i
        waves.append(w)
    live = list(waves)
    while live:
        at_barrier = []
        for w in live:
            if run(w, launch.program) == BARRIER:
                at_barrier.append(w)
        live = at_barrier  # every running wave reached the barrier (or ended): release it
    for w in waves:
        stats.waves += 1
        stats.wave_instructions += w.executed
        stats.lane_instructions += w.lane_ops


def _initial_wave(launch: Launch, wg, index: int, nitems: int, arch: str) -> WaveState:
    kd = launch.kernel.descriptor
    fam = launch.program.family
    lanes = launch.lanes
    w = WaveState(fam, lanes, agprs=256 if fam == "cdna" else 0)
    props, r2 = kd.code_properties, kd.rsrc2
    s = 0

    def put(value: int, n: int) -> None:
        nonlocal s
        for j in range(n):
            w.sgpr[s + j] = (value >> (32 * j)) & 0xFFFFFFFF
        s += n
    if props.enable_sgpr_private_segment_buffer:
        put(0, 4)  # architected flat scratch: no buffer resource is used
    if props.enable_sgpr_dispatch_ptr:
        put(launch.dispatch_ptr, 2)
    if props.enable_sgpr_queue_ptr:
        put(launch.queue_ptr, 2)
    if props.enable_sgpr_kernarg_segment_ptr:
        put(launch.kernarg_addr, 2)
    if props.enable_sgpr_dispatch_id:
        put(launch.dispatch_id, 2)
    if props.enable_sgpr_flat_scratch_init:
        put(0, 2)
    if props.enable_sgpr_private_segment_size:
        put(kd.private_segment_fixed_size, 1)
    s = max(s, r2.user_sgpr_count)
    for axis in range(3):
        if getattr(r2, f"enable_sgpr_workgroup_id_{'xyz'[axis]}"):
            put(wg[axis], 1)
    if r2.enable_sgpr_workgroup_info:
        put(0, 1)
    if fam == "rdna4":  # architected SGPRs: workgroup ids in ttmp9 (x) and ttmp7 (y | z << 16)
        w.sgpr[TTMP + 9] = wg[0]
        w.sgpr[TTMP + 7] = wg[1] | wg[2] << 16
    # work-item ids of each lane
    t = index * lanes + np.arange(lanes)
    bx, by, _ = launch.block
    x, y, z = t % bx, (t // bx) % by, t // (bx * by)
    ndims = r2.enable_vgpr_workitem_id
    ids = [x, y if ndims >= 1 else 0 * y, z if ndims >= 2 else 0 * z]
    if arch in PACKED_IDS or fam in ("rdna3", "rdna4"):
        w.vgpr[0] = (ids[0] | ids[1] << 10 | ids[2] << 20).astype(np.uint32)
    else:
        for d in range(ndims + 1):
            w.vgpr[d] = ids[d].astype(np.uint32)
    w.set_exec(sum(1 << i for i in range(lanes) if t[i] < nitems))
    w.pc = launch.entry
    return w


def check_launch(kernel: Kernel, grid, block, dynamic_lds: int = 0) -> None:
    """Reject launches the hardware could not run (ValueError naming what is wrong)."""
    for what, v in (("grid", grid), ("block", block)):
        if any(not isinstance(x, (int, np.integer)) or not 1 <= x < 1 << 32 for x in v):
            raise ValueError(f"{what} {tuple(v)}: every dimension must be a positive 32-bit integer")
    n = block[0] * block[1] * block[2]
    limit = min(kernel.max_flat_workgroup_size or 1024, 1024)
    if n > limit:
        raise ValueError(f"block {tuple(block)} has {n} work-items; kernel {kernel.name!r} allows at most {limit}")
    kd = kernel.descriptor
    lds = kd.group_segment_fixed_size + dynamic_lds
    if dynamic_lds < 0 or lds > MAX_LDS:
        raise ValueError(f"kernel {kernel.name!r} needs {lds} bytes of LDS; a workgroup has at most {MAX_LDS}")
    if kd.private_segment_fixed_size > MAX_PRIVATE:
        raise ValueError(f"kernel {kernel.name!r} needs {kd.private_segment_fixed_size} bytes of private memory "
                         f"per work-item; at most {MAX_PRIVATE} are supported")
