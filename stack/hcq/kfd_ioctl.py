"""The KFD user-space ABI (linux/kfd_ioctl.h, interface 1.14): argument structs, request numbers, flags.

This is the contract between a runtime and /dev/kfd, shared by both sides as the kernel's uapi header is:
stack/hcq issues these ioctls, emu/amd/kfd answers them. Struct layouts are the kernel's (natural alignment,
little-endian); tests/test_kfd_abi.py checks every size, offset and request number against the C header.
"""
from __future__ import annotations

import ctypes
from ctypes import c_int32, c_uint32, c_uint64

KFD_IOCTL_MAJOR_VERSION, KFD_IOCTL_MINOR_VERSION = 1, 14

# queue types
QUEUE_TYPE_COMPUTE, QUEUE_TYPE_SDMA, QUEUE_TYPE_COMPUTE_AQL, QUEUE_TYPE_SDMA_XGMI = 0, 1, 2, 3
MAX_QUEUE_PERCENTAGE, MAX_QUEUE_PRIORITY, MIN_QUEUE_RING_SIZE = 100, 15, 1024

# event types, wait results, exception codes
EVENT_SIGNAL, EVENT_NODECHANGE, EVENT_DEVICESTATECHANGE, EVENT_HW_EXCEPTION = 0, 1, 2, 3
EVENT_SYSTEM_EVENT, EVENT_DEBUG_EVENT, EVENT_PROFILE_EVENT, EVENT_QUEUE_EVENT, EVENT_MEMORY = 4, 5, 6, 7, 8
WAIT_COMPLETE, WAIT_TIMEOUT, WAIT_FAIL = 0, 1, 2
SIGNAL_EVENT_LIMIT = 4096
HW_EXCEPTION_WHOLE_GPU_RESET, HW_EXCEPTION_PER_ENGINE_RESET = 0, 1
HW_EXCEPTION_GPU_HANG, HW_EXCEPTION_ECC = 0, 1
MEM_ERR_NO_RAS, MEM_ERR_SRAM_ECC, MEM_ERR_POISON_CONSUMED, MEM_ERR_GPU_HANG = 0, 1, 2, 3

# RUNTIME_ENABLE mode_mask bits (without ENABLE the ioctl disables the runtime)
RUNTIME_ENABLE_MODE_ENABLE_MASK, RUNTIME_ENABLE_MODE_TTMP_SAVE_MASK = 1, 2

# allocation flags: placement (exactly one) and attributes
ALLOC_VRAM, ALLOC_GTT, ALLOC_USERPTR, ALLOC_DOORBELL, ALLOC_MMIO_REMAP = 1 << 0, 1 << 1, 1 << 2, 1 << 3, 1 << 4
ALLOC_WRITABLE, ALLOC_EXECUTABLE, ALLOC_PUBLIC, ALLOC_NO_SUBSTITUTE = 1 << 31, 1 << 30, 1 << 29, 1 << 28
ALLOC_AQL_QUEUE_MEM, ALLOC_COHERENT, ALLOC_UNCACHED, ALLOC_EXT_COHERENT = 1 << 27, 1 << 26, 1 << 25, 1 << 24
ALLOC_PLACEMENT = ALLOC_VRAM | ALLOC_GTT | ALLOC_USERPTR | ALLOC_DOORBELL | ALLOC_MMIO_REMAP
ALLOC_ATTRIBUTES = ALLOC_WRITABLE | ALLOC_EXECUTABLE | ALLOC_PUBLIC | ALLOC_NO_SUBSTITUTE | ALLOC_AQL_QUEUE_MEM \
    | ALLOC_COHERENT | ALLOC_UNCACHED | ALLOC_EXT_COHERENT

# mmap offsets of /dev/kfd and the render node: a type in bits 62-63, the gpu_id from bit 46
MMAP_TYPE_SHIFT, MMAP_GPU_ID_SHIFT = 62, 46
MMAP_TYPE_MMIO, MMAP_TYPE_RESERVED_MEM, MMAP_TYPE_EVENTS, MMAP_TYPE_DOORBELL = 0, 1 << 62, 2 << 62, 3 << 62
MMAP_TYPE_MASK = 3 << 62


class _Args(ctypes.Structure):
    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{n}={getattr(self, n)!r}' for n, *_ in self._fields_)})"


class GetVersion(_Args):
    _fields_ = [("major_version", c_uint32), ("minor_version", c_uint32)]


class CreateQueue(_Args):
    _fields_ = [("ring_base_address", c_uint64), ("write_pointer_address", c_uint64),
                ("read_pointer_address", c_uint64), ("doorbell_offset", c_uint64), ("ring_size", c_uint32),
                ("gpu_id", c_uint32), ("queue_type", c_uint32), ("queue_percentage", c_uint32),
                ("queue_priority", c_uint32), ("queue_id", c_uint32), ("eop_buffer_address", c_uint64),
                ("eop_buffer_size", c_uint64), ("ctx_save_restore_address", c_uint64),
                ("ctx_save_restore_size", c_uint32), ("ctl_stack_size", c_uint32), ("sdma_engine_id", c_uint32),
                ("pad", c_uint32)]


class DestroyQueue(_Args):
    _fields_ = [("queue_id", c_uint32), ("pad", c_uint32)]


class UpdateQueue(_Args):
    _fields_ = [("ring_base_address", c_uint64), ("queue_id", c_uint32), ("ring_size", c_uint32),
                ("queue_percentage", c_uint32), ("queue_priority", c_uint32)]


class SetMemoryPolicy(_Args):
    _fields_ = [("alternate_aperture_base", c_uint64), ("alternate_aperture_size", c_uint64), ("gpu_id", c_uint32),
                ("default_policy", c_uint32), ("alternate_policy", c_uint32), ("pad", c_uint32)]


class GetClockCounters(_Args):
    _fields_ = [("gpu_clock_counter", c_uint64), ("cpu_clock_counter", c_uint64),
                ("system_clock_counter", c_uint64), ("system_clock_freq", c_uint64), ("gpu_id", c_uint32),
                ("pad", c_uint32)]


class ProcessDeviceApertures(_Args):
    _fields_ = [("lds_base", c_uint64), ("lds_limit", c_uint64), ("scratch_base", c_uint64),
                ("scratch_limit", c_uint64), ("gpuvm_base", c_uint64), ("gpuvm_limit", c_uint64),
                ("gpu_id", c_uint32), ("pad", c_uint32)]


NUM_OF_SUPPORTED_GPUS = 7


class GetProcessApertures(_Args):
    _fields_ = [("process_apertures", ProcessDeviceApertures * NUM_OF_SUPPORTED_GPUS), ("num_of_nodes", c_uint32),
                ("pad", c_uint32)]


class GetProcessAperturesNew(_Args):
    _fields_ = [("kfd_process_device_apertures_ptr", c_uint64), ("num_of_nodes", c_uint32), ("pad", c_uint32)]


class CreateEvent(_Args):
    _fields_ = [("event_page_offset", c_uint64), ("event_trigger_data", c_uint32), ("event_type", c_uint32),
                ("auto_reset", c_uint32), ("node_id", c_uint32), ("event_id", c_uint32),
                ("event_slot_index", c_uint32)]


class EventId(_Args):  # destroy / set / reset event
    _fields_ = [("event_id", c_uint32), ("pad", c_uint32)]


class MemoryExceptionFailure(_Args):
    _fields_ = [("NotPresent", c_uint32), ("ReadOnly", c_uint32), ("NoExecute", c_uint32), ("imprecise", c_uint32)]


class MemoryExceptionData(_Args):
    _fields_ = [("failure", MemoryExceptionFailure), ("va", c_uint64), ("gpu_id", c_uint32), ("ErrorType", c_uint32)]


class HwExceptionData(_Args):
    _fields_ = [("reset_type", c_uint32), ("reset_cause", c_uint32), ("memory_lost", c_uint32), ("gpu_id", c_uint32)]


class _EventDataUnion(ctypes.Union):
    _fields_ = [("memory_exception_data", MemoryExceptionData), ("hw_exception_data", HwExceptionData)]


class EventData(_Args):
    _anonymous_ = ("u",)
    _fields_ = [("u", _EventDataUnion), ("kfd_event_data_ext", c_uint64), ("event_id", c_uint32), ("pad", c_uint32)]


class WaitEvents(_Args):
    _fields_ = [("events_ptr", c_uint64), ("num_events", c_uint32), ("wait_for_all", c_uint32), ("timeout", c_uint32),
                ("wait_result", c_uint32)]


class SetScratchBackingVa(_Args):
    _fields_ = [("va_addr", c_uint64), ("gpu_id", c_uint32), ("pad", c_uint32)]


class GetTileConfig(_Args):
    _fields_ = [("tile_config_ptr", c_uint64), ("macro_tile_config_ptr", c_uint64), ("num_tile_configs", c_uint32),
                ("num_macro_tile_configs", c_uint32), ("gpu_id", c_uint32), ("gb_addr_config", c_uint32),
                ("num_banks", c_uint32), ("num_ranks", c_uint32)]


class SetTrapHandler(_Args):
    _fields_ = [("tba_addr", c_uint64), ("tma_addr", c_uint64), ("gpu_id", c_uint32), ("pad", c_uint32)]


class AcquireVm(_Args):
    _fields_ = [("drm_fd", c_uint32), ("gpu_id", c_uint32)]


class AllocMemoryOfGpu(_Args):
    _fields_ = [("va_addr", c_uint64), ("size", c_uint64), ("handle", c_uint64), ("mmap_offset", c_uint64),
                ("gpu_id", c_uint32), ("flags", c_uint32)]


class FreeMemoryOfGpu(_Args):
    _fields_ = [("handle", c_uint64)]


class MapMemoryToGpu(_Args):  # also UNMAP_MEMORY_FROM_GPU
    _fields_ = [("handle", c_uint64), ("device_ids_array_ptr", c_uint64), ("n_devices", c_uint32),
                ("n_success", c_uint32)]


class SetXnackMode(_Args):
    _fields_ = [("xnack_enabled", c_int32)]


class GetAvailableMemory(_Args):
    _fields_ = [("available", c_uint64), ("gpu_id", c_uint32), ("pad", c_uint32)]


class RuntimeEnable(_Args):
    _fields_ = [("r_debug", c_uint64), ("mode_mask", c_uint32), ("capabilities_mask", c_uint32)]


# -- request numbers: _IOC(dir, 'K', nr, size) ------------------------------------------------------------------
IOC_NONE, IOC_WRITE, IOC_READ = 0, 1, 2
IOCTL_BASE = ord("K")


def ioc(direction: int, nr: int, size: int) -> int:
    return direction << 30 | size << 16 | IOCTL_BASE << 8 | nr


def ioc_nr(request: int) -> int:
    return request & 0xFF


def ioc_size(request: int) -> int:
    return (request >> 16) & 0x3FFF


def ioc_type(request: int) -> int:
    return (request >> 8) & 0xFF


def ioc_dir(request: int) -> int:
    return request >> 30 & 3


_R, _W, _WR = IOC_READ, IOC_WRITE, IOC_READ | IOC_WRITE
# nr -> (name, direction, argument struct)
IOCTLS: dict[int, tuple[str, int, type[ctypes.Structure]]] = {
    0x01: ("GET_VERSION", _R, GetVersion),
    0x02: ("CREATE_QUEUE", _WR, CreateQueue),
    0x03: ("DESTROY_QUEUE", _WR, DestroyQueue),
    0x04: ("SET_MEMORY_POLICY", _W, SetMemoryPolicy),
    0x05: ("GET_CLOCK_COUNTERS", _WR, GetClockCounters),
    0x06: ("GET_PROCESS_APERTURES", _R, GetProcessApertures),
    0x07: ("UPDATE_QUEUE", _W, UpdateQueue),
    0x08: ("CREATE_EVENT", _WR, CreateEvent),
    0x09: ("DESTROY_EVENT", _W, EventId),
    0x0A: ("SET_EVENT", _W, EventId),
    0x0B: ("RESET_EVENT", _W, EventId),
    0x0C: ("WAIT_EVENTS", _WR, WaitEvents),
    0x11: ("SET_SCRATCH_BACKING_VA", _WR, SetScratchBackingVa),
    0x12: ("GET_TILE_CONFIG", _WR, GetTileConfig),
    0x13: ("SET_TRAP_HANDLER", _W, SetTrapHandler),
    0x14: ("GET_PROCESS_APERTURES_NEW", _WR, GetProcessAperturesNew),
    0x15: ("ACQUIRE_VM", _W, AcquireVm),
    0x16: ("ALLOC_MEMORY_OF_GPU", _WR, AllocMemoryOfGpu),
    0x17: ("FREE_MEMORY_OF_GPU", _W, FreeMemoryOfGpu),
    0x18: ("MAP_MEMORY_TO_GPU", _WR, MapMemoryToGpu),
    0x19: ("UNMAP_MEMORY_FROM_GPU", _WR, MapMemoryToGpu),
    0x21: ("SET_XNACK_MODE", _WR, SetXnackMode),
    0x23: ("AVAILABLE_MEMORY", _WR, GetAvailableMemory),
    0x25: ("RUNTIME_ENABLE", _WR, RuntimeEnable),
}
REQUEST: dict[str, int] = {name: ioc(d, nr, ctypes.sizeof(t)) for nr, (name, d, t) in IOCTLS.items()}
