"""HSA architected queuing language (AQL) packets and the AMD queue and signal structures, from the vendor's
hsa.h / amd_hsa_queue.h / amd_hsa_signal.h (through emu.amd.hw): packet types, header fields, and the byte
offsets of the fields the packet processor reads.
"""
from __future__ import annotations

from emu.amd import hw

_T = hw.tables()["hsa"]
_C, _S = _T["consts"], _T["structs"]


def offset(struct: str, field: str) -> int:
    """Byte offset of `field` in the vendor struct `struct` (e.g. 'struct_amd_queue_s')."""
    return _S[struct][field][0]


PACKET_BYTES = _T["sizes"]["struct_hsa_kernel_dispatch_packet_s"]
TYPE_VENDOR_SPECIFIC, TYPE_INVALID = _C["HSA_PACKET_TYPE_VENDOR_SPECIFIC"], _C["HSA_PACKET_TYPE_INVALID"]
TYPE_KERNEL_DISPATCH = _C["HSA_PACKET_TYPE_KERNEL_DISPATCH"]
TYPE_BARRIER_AND, TYPE_BARRIER_OR = _C["HSA_PACKET_TYPE_BARRIER_AND"], _C["HSA_PACKET_TYPE_BARRIER_OR"]
HEADER_TYPE_WIDTH = _C["HSA_PACKET_HEADER_WIDTH_TYPE"]
HEADER_BARRIER = _C["HSA_PACKET_HEADER_BARRIER"]
HEADER_ACQUIRE_FENCE_SCOPE = _C["HSA_PACKET_HEADER_ACQUIRE_FENCE_SCOPE"]
HEADER_RELEASE_FENCE_SCOPE = _C["HSA_PACKET_HEADER_RELEASE_FENCE_SCOPE"]
FENCE_SCOPE_SYSTEM = _C["HSA_FENCE_SCOPE_SYSTEM"]

_D = "struct_hsa_kernel_dispatch_packet_s"
DISPATCH = {f: offset(_D, f) for f in _S[_D]}  # header, setup, workgroup_size_x, ..., completion_signal
BARRIER_DEP_SIGNAL = offset("struct_hsa_barrier_and_packet_s", "dep_signal")
BARRIER_DEP_SIGNALS = 5  # c.Array[hsa_signal_t, 5] (the struct's 40 bytes from dep_signal)
COMPLETION_SIGNAL = offset(_D, "completion_signal")

_Q = "struct_amd_queue_s"
QUEUE_WRITE_DISPATCH_ID = offset(_Q, "write_dispatch_id")
QUEUE_COMPUTE_TMPRING_SIZE = offset(_Q, "compute_tmpring_size")
QUEUE_SCRATCH_RESOURCE_DESCRIPTOR = offset(_Q, "scratch_resource_descriptor")
QUEUE_SCRATCH_BACKING_MEMORY_LOCATION = offset(_Q, "scratch_backing_memory_location")
QUEUE_BYTES = 256  # AMD_QUEUE_ALIGN_BYTES-aligned amd_queue_t (the fields above lie within it)

_G = "struct_amd_signal_s"
SIGNAL_VALUE, SIGNAL_MAILBOX = offset(_G, "value"), offset(_G, "event_mailbox_ptr")
SIGNAL_EVENT_ID, SIGNAL_END_TS = offset(_G, "event_id"), offset(_G, "end_ts")
AMD_AQL_FORMAT_PM4_IB = 1  # hsa_ext_amd.h: AMD vendor packet format of a PM4 indirect buffer
