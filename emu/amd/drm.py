"""The amdgpu DRM render node's ioctls that a KFD client sends beside /dev/kfd: DRM_IOCTL_AMDGPU_INFO with the
AMDGPU_INFO_DEV_INFO query (tinygrad reads which WGPs are active from its cu_bitmap before it samples performance
counters). The request number, the query and the structures' layouts are the kernel's (linux/amdgpu_drm.h, through
emu.amd.hw). Every other request is ENOTTY, every other query EINVAL, as the driver answers them; a bad argument
is EFAULT or EINVAL with a message naming it.
"""
from __future__ import annotations

import errno
import struct

from emu.amd import target
from emu.amd.hw import tables
from emu.amd.usermem import argument_bytes, copy_to_user

_T = tables()["drm"]
_C, _S = _T["consts"], _T["structs"]
IOCTL_TYPE = ord("d")  # DRM_IOCTL_BASE
INFO = _S["struct_drm_amdgpu_info"]
INFO_BYTES = _T["sizes"]["struct_drm_amdgpu_info"]
DEVICE = _S["struct_drm_amdgpu_info_device"]
DEVICE_BYTES = _T["sizes"]["struct_drm_amdgpu_info_device"]
REQUEST_INFO = 1 << 30 | INFO_BYTES << 16 | IOCTL_TYPE << 8 | (_C["DRM_COMMAND_BASE"] + _C["DRM_AMDGPU_INFO"])  # _IOW
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


def ioctl(chip: target.Target, request: int, arg) -> int:
    """A render node's ioctl for a GPU of `chip`: OSError with the driver's errno for what it does not serve."""
    if request != REQUEST_INFO:
        raise OSError(errno.ENOTTY, f"render node: ioctl {request:#x} is not supported (DRM_IOCTL_AMDGPU_INFO "
                                    f"{REQUEST_INFO:#x} is)")
    raw = argument_bytes(arg, INFO_BYTES, "DRM_IOCTL_AMDGPU_INFO")
    ptr, = struct.unpack_from("<Q", raw, INFO["return_pointer"][0])
    size, = struct.unpack_from("<I", raw, INFO["return_size"][0])
    query, = struct.unpack_from("<I", raw, INFO["query"][0])
    if query != _C["AMDGPU_INFO_DEV_INFO"]:
        raise OSError(errno.EINVAL, f"DRM_IOCTL_AMDGPU_INFO: query {query:#x} is not supported (AMDGPU_INFO_DEV_INFO "
                                    f"{_C['AMDGPU_INFO_DEV_INFO']:#x} is)")
    if size and ptr:  # the driver copies at most return_size bytes
        copy_to_user(ptr, device_info(chip)[:size], "DRM_IOCTL_AMDGPU_INFO return_pointer")
    return 0
