"""Kernels of a loaded code object: the register values a dispatch programs, user SGPRs, kernargs, and the PM4
packets of one launch (the compute register sequence, DISPATCH_DIRECT, a partial flush).

The command processor never reads the kernel descriptor: the runtime copies what matters into the COMPUTE_*
registers, as here. That includes kernarg preloading (AMDGPUUsage, "Preloaded Kernel Arguments"): where AQL
firmware would load the kernarg dwords the descriptor names into the user SGPRs after the enabled ones and start
past the code's 256-byte compatibility prologue, a PM4 runtime writes those dwords into COMPUTE_USER_DATA and
points COMPUTE_PGM past the prologue itself.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from objfile.codeobj import MAX_GRID_ITEMS, Kernel, KernelDescriptor, check_limit, max_lds, max_wave_scratch
from stack.hcq import pm4
from stack.hcq.scratch import DYNAMIC_STACK

DISPATCH_PACKET_BYTES = 64
HSA_PACKET_TYPE_KERNEL_DISPATCH = 2
HSA_PACKET_HEADER_BARRIER = 1 << 8
HSA_FENCE_SCOPE_SYSTEM = 2
HSA_PACKET_HEADER_ACQUIRE_FENCE_SCOPE, HSA_PACKET_HEADER_RELEASE_FENCE_SCOPE = 9, 11
KERNARG_ALIGN = 64
PRELOAD_PROLOGUE_BYTES = 256  # code for firmware without kernarg preloading (LLVM 19: s_trap 2, then s_nop)
MAX_WORKGROUP_ITEMS = 1024


@dataclass(frozen=True)
class Registers:
    """What a dispatch of one kernel writes into COMPUTE_PGM_* (everything but scratch and user data)."""
    pgm: int  # the code address (256-byte aligned)
    rsrc1: int
    rsrc2: int
    rsrc3: int | None  # None: the family has no RSRC3
    wave32: bool


def kernel_registers(kernel: Kernel, code_base: int, gfx: int) -> Registers:
    kd = kernel.descriptor
    pgm = code_base + kernel.entry + (PRELOAD_PROLOGUE_BYTES if kd.kernarg_preload.length else 0)
    if pgm % (1 << pm4.PGM_ADDRESS_SHIFT):
        raise ValueError(f"kernel {kernel.name!r} starts at {pgm:#x}, not 256-byte aligned")
    rsrc1 = kd.rsrc1.value | (pm4.PGM_RSRC1_PRIV.put(1) if gfx == 11 else 0)
    lds = -(-kd.group_segment_fixed_size // pm4.LDS_SIZE_GRANULE)
    rsrc2 = kd.rsrc2.value & ~pm4.PGM_RSRC2_LDS_SIZE.mask | pm4.PGM_RSRC2_LDS_SIZE.put(lds)
    return Registers(pgm, rsrc1, rsrc2, kd.rsrc3.value if kd.rsrc3 is not None else None, kd.wave32)


def user_sgprs(kd: KernelDescriptor, kernarg: int, dispatch_ptr: int, queue_ptr: int, dispatch_id: int,
               scratch_vsharp: tuple[int, int, int, int], flat_scratch: int, private_bytes: int,
               kernargs: bytes | None = None) -> list[int]:
    """User SGPR values in AMDGPUUsage's order ("Initial Kernel Execution State"), those the descriptor enables,
    then the kernarg dwords it preloads (KERNARG_PRELOAD_SPEC_OFFSET / _LENGTH, in dwords) taken from `kernargs`
    (ValueError when the descriptor preloads and they are not given)."""
    p, out = kd.code_properties, []

    def put(value: int, ndwords: int) -> None:
        out.extend((value >> (32 * i)) & 0xFFFFFFFF for i in range(ndwords))
    if p.enable_sgpr_private_segment_buffer:
        out.extend(scratch_vsharp)
    for enabled, value, n in ((p.enable_sgpr_dispatch_ptr, dispatch_ptr, 2), (p.enable_sgpr_queue_ptr, queue_ptr, 2),
                              (p.enable_sgpr_kernarg_segment_ptr, kernarg, 2),
                              (p.enable_sgpr_dispatch_id, dispatch_id, 2),
                              (p.enable_sgpr_flat_scratch_init, flat_scratch, 2),
                              (p.enable_sgpr_private_segment_size, private_bytes, 1)):
        if enabled:
            put(value, n)
    pre = kd.kernarg_preload
    if pre.length:
        if kernargs is None:
            raise ValueError(f"the kernel preloads {pre.length} kernarg dwords into SGPRs: give the kernarg bytes")
        words = kernargs[4 * pre.offset:4 * (pre.offset + pre.length)].ljust(4 * pre.length, b"\0")
        out.extend(struct.unpack(f"<{pre.length}I", words))
    if len(out) > pm4.NUM_USER_DATA:
        raise ValueError(f"{len(out)} user SGPRs do not fit the {pm4.NUM_USER_DATA} COMPUTE_USER_DATA registers")
    return out


def dispatch_packet(groups: tuple[int, int, int], local: tuple[int, int, int], dims: int, private_bytes: int,
                    group_bytes: int, kernel_object: int, kernarg: int) -> bytes:
    """The hsa_kernel_dispatch_packet_t the dispatch pointer points at (grid sizes count work-items)."""
    header = HSA_PACKET_TYPE_KERNEL_DISPATCH | HSA_PACKET_HEADER_BARRIER \
        | HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_ACQUIRE_FENCE_SCOPE \
        | HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_RELEASE_FENCE_SCOPE
    grid = [g * n for g, n in zip(groups, local, strict=True)]
    return struct.pack("<HHHHHHIIIIIQQQQ", header, dims, *local, 0, *grid, private_bytes, group_bytes,
                       kernel_object, kernarg, 0, 0)


def grid_dims(groups: tuple[int, int, int], local: tuple[int, int, int]) -> int:
    """Dimensions of the grid: the highest one with more than one work-item."""
    return 3 if groups[2] * local[2] > 1 else 2 if groups[1] * local[1] > 1 else 1


def dispatch(gfx: int, regs: Registers, sgprs: list[int], tmpring_size: int, scratch_base: int,
             groups: tuple[int, int, int], local: tuple[int, int, int]) -> list[list[int]]:
    """The PM4 packets of one launch, after the caller's wait and before its signal."""
    shift = pm4.PGM_ADDRESS_SHIFT
    out = [pm4.acquire_mem(gfx), pm4.set_regs(pm4.COMPUTE_PGM_LO, regs.pgm >> shift, regs.pgm >> (32 + shift)),
           pm4.set_regs(pm4.COMPUTE_PGM_RSRC1, regs.rsrc1, regs.rsrc2)]
    if regs.rsrc3 is not None:
        out.append(pm4.set_regs(pm4.compute_pgm_rsrc3(gfx), regs.rsrc3))
    out += [pm4.set_regs(pm4.COMPUTE_TMPRING_SIZE, tmpring_size),
            pm4.set_regs(pm4.COMPUTE_DISPATCH_SCRATCH_BASE_LO, scratch_base >> pm4.SCRATCH_BASE_SHIFT,
                         scratch_base >> (32 + pm4.SCRATCH_BASE_SHIFT)),
            pm4.set_regs(pm4.COMPUTE_RESTART_X, 0, 0, 0)]
    if sgprs:
        out.append(pm4.set_regs(pm4.COMPUTE_USER_DATA_0, *sgprs))
    out += [pm4.set_regs(pm4.COMPUTE_RESOURCE_LIMITS, 0),
            pm4.set_regs(pm4.COMPUTE_START_X, 0, 0, 0, *local, 0, 0),  # START_XYZ, NUM_THREAD_XYZ, PIPELINESTAT, PERF
            pm4.dispatch_direct(groups, pm4.dispatch_initiator(gfx, regs.wave32)),
            pm4.event_write(pm4.CS_PARTIAL_FLUSH, pm4.EVENT_INDEX_CS_PARTIAL_FLUSH)]
    return out


def check_private(kernel: Kernel) -> int:
    """A work-item's private segment bytes (the descriptor's, plus DYNAMIC_STACK when the compiler could not size
    the stack), checked against a wave's largest scratch (objfile.codeobj.max_wave_scratch): LimitError naming
    the kernel, the size and the limit."""
    kd = kernel.descriptor
    lanes = 32 if kd.wave32 else 64
    private = kd.private_segment_fixed_size + (DYNAMIC_STACK if kernel.uses_dynamic_stack else 0)
    check_limit(f"kernel {kernel.name!r}", f"private segment bytes per work-item (wave{lanes})", private,
                max_wave_scratch(kd.arch) // lanes)
    return private


def check_grid(kernel: Kernel, groups: tuple[int, int, int], local: tuple[int, int, int], dynamic_lds: int = 0) -> None:
    """A dispatch's work-items (per dimension and in all; the AQL packet's grid sizes are 32 bits) and LDS against
    the limits of objfile.codeobj, before anything is allocated: LimitError naming the field and the limit."""
    where = f"kernel {kernel.name!r}"
    items = [int(g) * int(n) for g, n in zip(groups, local, strict=True)]
    for axis, g, n, total in zip("xyz", groups, local, items, strict=True):
        check_limit(where, f"work-items in {axis} (grid {g} x block {n})", total, MAX_GRID_ITEMS)
    kd = kernel.descriptor
    check_work(where, items[0] * items[1] * items[2], f"(grid {tuple(groups)} x block {tuple(local)})",
               kd.group_segment_fixed_size + dynamic_lds, "group_segment_fixed_size + dynamic_lds", kd.arch)


def check_work(where: str, items: int, shape: str, lds: int, lds_field: str, arch: str) -> None:
    """A dispatch's work-items in all (`shape` says how they were given) and its LDS bytes (from `lds_field`)
    against MAX_GRID_ITEMS and max_lds(arch), before anything is allocated: LimitError naming them and the limit.
    The runtimes check launches with it, the emulated command processors the sizes a packet gives."""
    check_limit(where, f"work-items {shape}", items, MAX_GRID_ITEMS)
    check_limit(where, f"LDS bytes ({lds_field})", lds, max_lds(arch))


def shape(v, what: str) -> tuple[int, int, int]:
    """A 1- to 3-dimensional size as 3 positive ints; ValueError/TypeError naming `what` otherwise."""
    t = (v,) if isinstance(v, int) else tuple(v) if isinstance(v, (tuple, list)) else None
    if t is None:
        raise TypeError(f"{what} must be an int or a tuple of 1 to 3 ints, not {type(v).__name__}")
    if not 1 <= len(t) <= 3:
        raise ValueError(f"{what} {v!r}: give 1 to 3 dimensions")
    for x in t:
        if not hasattr(x, "__index__") or isinstance(x, bool):
            raise TypeError(f"{what} {v!r}: {x!r} is not an integer")
        if not 1 <= int(x) < 1 << 32:
            raise ValueError(f"{what} {v!r}: every dimension must be a positive 32-bit integer")
    return tuple(int(x) for x in t) + (1,) * (3 - len(t))
