"""The KFD ioctl interface (linux/kfd_ioctl.h) as the emulated driver serves it: request numbers, argument structs
and flags from the vendor header (through emu.amd.hw), the structs built as ctypes types from its layouts (fields at
one offset become an anonymous union) and checked against its sizes and offsets when built.

Names without the header's KFD_/KFD_IOC_ prefixes are the driver's view (ALLOC_VRAM, EVENT_SIGNAL, ...); the few
facts that are the kernel driver's own (mmap offsets, the smallest queue ring) are written here, each with its source.
"""
from __future__ import annotations

import ast
import ctypes

from emu.amd import hw

_T = hw.tables()["kfd"]
_C = _T["consts"]

# the interface this driver implements (the header describes a later minor: 1.17; nothing past 1.14 is served)
KFD_IOCTL_MAJOR_VERSION, KFD_IOCTL_MINOR_VERSION = _C["KFD_IOCTL_MAJOR_VERSION"], 14

QUEUE_TYPE_COMPUTE, QUEUE_TYPE_SDMA = _C["KFD_IOC_QUEUE_TYPE_COMPUTE"], _C["KFD_IOC_QUEUE_TYPE_SDMA"]
QUEUE_TYPE_COMPUTE_AQL, QUEUE_TYPE_SDMA_XGMI = _C["KFD_IOC_QUEUE_TYPE_COMPUTE_AQL"], _C["KFD_IOC_QUEUE_TYPE_SDMA_XGMI"]
MAX_QUEUE_PERCENTAGE, MAX_QUEUE_PRIORITY = _C["KFD_MAX_QUEUE_PERCENTAGE"], _C["KFD_MAX_QUEUE_PRIORITY"]
MIN_QUEUE_RING_SIZE = 1024  # kfd_chardev.c set_queue_properties_from_user: smaller rings are EINVAL
NUM_OF_SUPPORTED_GPUS = _C["NUM_OF_SUPPORTED_GPUS"]
SIGNAL_EVENT_LIMIT = _C["KFD_SIGNAL_EVENT_LIMIT"]

EVENT_SIGNAL, EVENT_NODECHANGE = _C["KFD_IOC_EVENT_SIGNAL"], _C["KFD_IOC_EVENT_NODECHANGE"]
EVENT_DEVICESTATECHANGE, EVENT_HW_EXCEPTION = _C["KFD_IOC_EVENT_DEVICESTATECHANGE"], _C["KFD_IOC_EVENT_HW_EXCEPTION"]
EVENT_SYSTEM_EVENT, EVENT_DEBUG_EVENT = _C["KFD_IOC_EVENT_SYSTEM_EVENT"], _C["KFD_IOC_EVENT_DEBUG_EVENT"]
EVENT_PROFILE_EVENT, EVENT_QUEUE_EVENT = _C["KFD_IOC_EVENT_PROFILE_EVENT"], _C["KFD_IOC_EVENT_QUEUE_EVENT"]
EVENT_MEMORY = _C["KFD_IOC_EVENT_MEMORY"]
WAIT_COMPLETE, WAIT_TIMEOUT = _C["KFD_IOC_WAIT_RESULT_COMPLETE"], _C["KFD_IOC_WAIT_RESULT_TIMEOUT"]
WAIT_FAIL = _C["KFD_IOC_WAIT_RESULT_FAIL"]
HW_EXCEPTION_PER_ENGINE_RESET, HW_EXCEPTION_GPU_HANG = (_C["KFD_HW_EXCEPTION_PER_ENGINE_RESET"],
                                                        _C["KFD_HW_EXCEPTION_GPU_HANG"])
MEM_ERR_NO_RAS = _C["KFD_MEM_ERR_NO_RAS"]

_A = "KFD_IOC_ALLOC_MEM_FLAGS_"
ALLOC_VRAM, ALLOC_GTT, ALLOC_USERPTR = _C[_A + "VRAM"], _C[_A + "GTT"], _C[_A + "USERPTR"]
ALLOC_DOORBELL, ALLOC_MMIO_REMAP = _C[_A + "DOORBELL"], _C[_A + "MMIO_REMAP"]
ALLOC_WRITABLE, ALLOC_EXECUTABLE, ALLOC_PUBLIC = _C[_A + "WRITABLE"], _C[_A + "EXECUTABLE"], _C[_A + "PUBLIC"]
ALLOC_NO_SUBSTITUTE, ALLOC_AQL_QUEUE_MEM = _C[_A + "NO_SUBSTITUTE"], _C[_A + "AQL_QUEUE_MEM"]
ALLOC_COHERENT, ALLOC_UNCACHED, ALLOC_EXT_COHERENT = _C[_A + "COHERENT"], _C[_A + "UNCACHED"], _C[_A + "EXT_COHERENT"]
ALLOC_PLACEMENT = ALLOC_VRAM | ALLOC_GTT | ALLOC_USERPTR | ALLOC_DOORBELL | ALLOC_MMIO_REMAP
ALLOC_ATTRIBUTES = ALLOC_WRITABLE | ALLOC_EXECUTABLE | ALLOC_PUBLIC | ALLOC_NO_SUBSTITUTE | ALLOC_AQL_QUEUE_MEM \
    | ALLOC_COHERENT | ALLOC_UNCACHED | ALLOC_EXT_COHERENT

# mmap offsets of /dev/kfd (kfd_priv.h KFD_MMAP_TYPE_*, KFD_MMAP_GPU_ID_SHIFT): a type in bits 62-63, the gpu_id
MMAP_TYPE_SHIFT, MMAP_GPU_ID_SHIFT = 62, 46
MMAP_TYPE_MMIO, MMAP_TYPE_EVENTS, MMAP_TYPE_DOORBELL = 0, 2 << MMAP_TYPE_SHIFT, 3 << MMAP_TYPE_SHIFT
MMAP_TYPE_MASK = 3 << MMAP_TYPE_SHIFT

# -- argument structs -------------------------------------------------------------------------------------------------
_SCALARS = {"ctypes.c_uint32": ctypes.c_uint32, "ctypes.c_uint64": ctypes.c_uint64, "ctypes.c_int32": ctypes.c_int32,
            "ctypes.c_uint16": ctypes.c_uint16, "ctypes.c_uint8": ctypes.c_uint8, "ctypes.c_int64": ctypes.c_int64}
STRUCTS: dict[str, type] = {}


class _Args(ctypes.Structure):
    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{n}={getattr(self, n)!r}' for n, *_ in self._fields_)})"


def _ctype(text: str) -> type:
    node = ast.parse(text, mode="eval").body
    if isinstance(node, ast.Subscript):  # c.Array[T, Literal[N]]
        elt, n = node.slice.elts
        return _ctype(ast.unparse(elt)) * ast.literal_eval(n.slice)
    return _SCALARS[text] if text in _SCALARS else struct_type(text)


def struct_type(name: str) -> type:
    """The ctypes type of the header's struct `name`, built from its layout; RuntimeError when ctypes would lay it
    out otherwise than the header does."""
    if name in STRUCTS:
        return STRUCTS[name]
    rows = _T["structs"][name]
    by_offset: dict[int, list[tuple[str, type]]] = {}
    for field, typ, off in rows:
        by_offset.setdefault(off, []).append((field, _ctype(typ)))
    fields, anonymous = [], []
    for off, members in sorted(by_offset.items()):
        if len(members) == 1:
            fields.append(members[0])
        else:  # fields sharing an offset: the header's union
            u = type(f"{name}_u{off}", (ctypes.Union,), {"_fields_": members})
            fields.append((f"_u{off}", u))
            anonymous.append(f"_u{off}")
    t = type(name, (_Args,), {"_anonymous_": anonymous, "_fields_": fields})
    for field, _, off in rows:
        if getattr(t, field).offset != off:
            raise RuntimeError(f"kfd_ioctl.h {name}.{field}: ctypes puts it at {getattr(t, field).offset}, "
                               f"not {off}")
    if ctypes.sizeof(t) != _T["sizes"].get(name, ctypes.sizeof(t)):
        raise RuntimeError(f"kfd_ioctl.h {name}: {ctypes.sizeof(t)} bytes in ctypes, {_T['sizes'][name]} in the "
                           "header")
    STRUCTS[name] = t
    return t


ProcessDeviceApertures = struct_type("struct_kfd_process_device_apertures")
EventData = struct_type("struct_kfd_event_data")
MemoryExceptionData = struct_type("struct_kfd_hsa_memory_exception_data")
HwExceptionData = struct_type("struct_kfd_hsa_hw_exception_data")
WaitEvents = struct_type("struct_kfd_ioctl_wait_events_args")
EventId = struct_type("struct_kfd_ioctl_set_event_args")  # destroy / set / reset event share this layout

# -- request numbers: asm-generic/ioctl.h _IOC(dir, 'K', nr, size) ----------------------------------------------------
IOC_NONE, IOC_WRITE, IOC_READ = 0, 1, 2
IOCTL_BASE = ord("K")
_DIRECTIONS = {"IO": IOC_NONE, "IOR": IOC_READ, "IOW": IOC_WRITE, "IOWR": IOC_READ | IOC_WRITE}
SERVED = ("GET_VERSION", "CREATE_QUEUE", "DESTROY_QUEUE", "SET_MEMORY_POLICY", "GET_CLOCK_COUNTERS",
          "GET_PROCESS_APERTURES", "UPDATE_QUEUE", "CREATE_EVENT", "DESTROY_EVENT", "SET_EVENT", "RESET_EVENT",
          "WAIT_EVENTS", "SET_SCRATCH_BACKING_VA", "GET_TILE_CONFIG", "SET_TRAP_HANDLER", "GET_PROCESS_APERTURES_NEW",
          "ACQUIRE_VM", "ALLOC_MEMORY_OF_GPU", "FREE_MEMORY_OF_GPU", "MAP_MEMORY_TO_GPU", "UNMAP_MEMORY_FROM_GPU",
          "SET_XNACK_MODE", "AVAILABLE_MEMORY", "RUNTIME_ENABLE")


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


# nr -> (name, direction, argument struct), for the commands this driver serves
IOCTLS: dict[int, tuple[str, int, type]] = {}
for _name in SERVED:
    _kind, _nr, _struct = _T["ioctls"]["AMDKFD_IOC_" + _name]
    IOCTLS[_nr] = (_name, _DIRECTIONS[_kind], struct_type(_struct))
REQUEST: dict[str, int] = {name: ioc(d, nr, ctypes.sizeof(t)) for nr, (name, d, t) in IOCTLS.items()}
