"""The amdgpu DRM render node's ioctls that a KFD client sends beside /dev/kfd: DRM_IOCTL_VERSION (libdrm's
drmGetVersion, which libdrm_amdgpu's device initialization asks first, as ROCm's libhsakmt does) and
DRM_IOCTL_AMDGPU_INFO with the queries QUERIES answers (tinygrad reads which WGPs are active from DEV_INFO's cu_bitmap
before it samples performance counters). The request numbers, the queries and the structures' layouts are the
kernel's (linux/amdgpu_drm.h, through emu.amd.hw). As in drm_ioctl(), a request is known by its type and number, and
its argument is copied in at the size the request says, zero-extended. Every other request is ENOTTY, every other
query EINVAL, as the driver answers them; a bad argument is EFAULT or EINVAL with a message naming it.
"""
from __future__ import annotations

import errno
import struct

from emu.amd import target
from emu.amd.hw import tables
from emu.amd.usermem import argument_bytes, copy_to_user, store_argument

_T = tables()["drm"]
_C, _S = _T["consts"], _T["structs"]
IOCTL_TYPE = ord("d")  # DRM_IOCTL_BASE
INFO = _S["struct_drm_amdgpu_info"]
INFO_BYTES = _T["sizes"]["struct_drm_amdgpu_info"]
DEVICE = _S["struct_drm_amdgpu_info_device"]
DEVICE_BYTES = _T["sizes"]["struct_drm_amdgpu_info_device"]
REQUEST_INFO = 1 << 30 | INFO_BYTES << 16 | IOCTL_TYPE << 8 | (_C["DRM_COMMAND_BASE"] + _C["DRM_AMDGPU_INFO"])  # _IOW
VERSION = _S["struct_drm_version"]
VERSION_BYTES = _T["sizes"]["struct_drm_version"]
REQUEST_VERSION = 3 << 30 | VERSION_BYTES << 16 | IOCTL_TYPE << 8 | 0x00  # _IOWR('d', 0x00): DRM_IOCTL_VERSION
# amdgpu's driver name, date and description (amdgpu_drv.c DRIVER_*) and a KMS version of its major 3, which
# libdrm_amdgpu requires
DRIVER = {"name": b"amdgpu", "date": b"20150101", "desc": b"AMD GPU"}
KMS_VERSION = (3, 49, 0)
_FORMATS = {"ctypes.c_uint32": "<I", "ctypes.c_uint64": "<Q"}


def device_info(chip: target.Target) -> bytes:
    """struct drm_amdgpu_info_device for `chip`: ids, shader engines and arrays, every CU active, clocks (kHz)."""
    out = bytearray(DEVICE_BYTES)
    per_array = chip.cus // chip.arrays
    family = _C.get("AMDGPU_FAMILY_GC_{}_{}_{}".format(*chip.gc), _C.get("AMDGPU_FAMILY_AI", 0) if chip.gen.gfx == 9
                    else 0)
    for name, value in (("device_id", chip.device_id), ("family", family),
                        ("num_shader_engines", chip.shader_engines),
                        ("num_shader_arrays_per_engine", chip.arrays_per_engine), ("gpu_counter_freq", 100_000),
                        ("max_engine_clock", chip.engine_clock * 1000), ("max_memory_clock", chip.memory_clock * 1000),
                        ("cu_active_number", chip.cus), ("wave_front_size", chip.wave_size),
                        ("num_cu_per_sh", per_array)):
        off, typ = DEVICE[name]
        struct.pack_into(_FORMATS[typ], out, off, value)
    bitmap = DEVICE["cu_bitmap"][0]
    for se in range(chip.shader_engines):  # the kernel's layout: [se % 4][sa + se // 4 * 2]
        for sa in range(chip.arrays_per_engine):
            struct.pack_into("<I", out, bitmap + 4 * (4 * (se % 4) + sa + se // 4 * 2), (1 << per_array) - 1)
    return bytes(out)


# struct drm_amdgpu_info's union after `query` (linux/amdgpu_drm.h; the table from the wheel stops at `query`):
# read_mmr_reg's dword_offset and count
MMR_REG_AT, INFO_KERNEL_BYTES, MAX_MMR_REGS = 16, 32, 128
GB_ADDR_CONFIG_DWORD = 0x263E  # mmGB_ADDR_CONFIG as libdrm_amdgpu reads it
GB_ADDR_CONFIG = 0x545  # the value the model reports (also KFD's GET_TILE_CONFIG's)


def _read_mmr_reg(chip: target.Target, raw: bytes) -> bytes:
    """The registers amdgpu lets a client read that the model has: GB_ADDR_CONFIG (EINVAL for the rest, as the
    driver answers a register outside its allowed list)."""
    offset, count = struct.unpack_from("<II", raw, MMR_REG_AT)
    if not 1 <= count <= MAX_MMR_REGS:
        raise OSError(errno.EINVAL, f"DRM_IOCTL_AMDGPU_INFO READ_MMR_REG: count {count} (1 to {MAX_MMR_REGS})")
    if (offset, count) != (GB_ADDR_CONFIG_DWORD, 1):
        raise OSError(errno.EINVAL, f"DRM_IOCTL_AMDGPU_INFO READ_MMR_REG: register {offset:#x} (x{count}) cannot be "
                                    f"read (GB_ADDR_CONFIG {GB_ADDR_CONFIG_DWORD:#x} can)")
    return struct.pack("<I", GB_ADDR_CONFIG)


QUERIES = {"AMDGPU_INFO_ACCEL_WORKING": lambda chip, raw: struct.pack("<I", 1),
           "AMDGPU_INFO_DEV_INFO": lambda chip, raw: device_info(chip),
           "AMDGPU_INFO_READ_MMR_REG": _read_mmr_reg}
_QUERY = {_C[name]: answer for name, answer in QUERIES.items()}


def ioctl(chip: target.Target, request: int, arg) -> int:
    """A render node's ioctl for a GPU of `chip`: OSError with the driver's errno for what it does not serve."""
    if request == REQUEST_VERSION:
        return _version(arg)
    if request & 0xFFFF != REQUEST_INFO & 0xFFFF or request >> 30 != REQUEST_INFO >> 30:
        raise OSError(errno.ENOTTY, f"render node: ioctl {request:#x} is not supported (DRM_IOCTL_VERSION "
                                    f"{REQUEST_VERSION:#x} and DRM_IOCTL_AMDGPU_INFO {REQUEST_INFO:#x} are)")
    raw = argument_bytes(arg, (request >> 16) & 0x3FFF, "DRM_IOCTL_AMDGPU_INFO").ljust(INFO_KERNEL_BYTES, b"\0")
    ptr, = struct.unpack_from("<Q", raw, INFO["return_pointer"][0])
    size, = struct.unpack_from("<I", raw, INFO["return_size"][0])
    query, = struct.unpack_from("<I", raw, INFO["query"][0])
    if query not in _QUERY:
        raise OSError(errno.EINVAL, f"DRM_IOCTL_AMDGPU_INFO: query {query:#x} is not supported ({', '.join(QUERIES)} "
                                    "are)")
    answer = _QUERY[query](chip, raw)
    if size and ptr:  # the driver copies at most return_size bytes
        copy_to_user(ptr, answer[:size], "DRM_IOCTL_AMDGPU_INFO return_pointer")
    return 0


def _version(arg) -> int:
    """DRM_IOCTL_VERSION as drm_version() answers it: the version, and each string copied up to the length the caller
    gave (drm_copy_field), that length then set to the string's."""
    raw = bytearray(argument_bytes(arg, VERSION_BYTES, "DRM_IOCTL_VERSION"))
    for name, value in zip(("version_major", "version_minor", "version_patchlevel"), KMS_VERSION, strict=True):
        struct.pack_into("<i", raw, VERSION[name][0], value)
    for name, text in DRIVER.items():
        ptr, = struct.unpack_from("<Q", raw, VERSION[name][0])
        room, = struct.unpack_from("<Q", raw, VERSION[f"{name}_len"][0])
        if ptr and min(room, len(text)):
            copy_to_user(ptr, text[:room], f"DRM_IOCTL_VERSION {name}")
        struct.pack_into("<Q", raw, VERSION[f"{name}_len"][0], len(text))
    store_argument(arg, bytes(raw), "DRM_IOCTL_VERSION")
    return 0
