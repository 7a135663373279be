"""What the KFD topology says about each emulated chip (emu.amd.target's figures of a real product of that arch): the
sysfs text amdkfd writes for them (`/sys/devices/virtual/kfd/kfd/topology/...`, the render node's ip_discovery)."""
from __future__ import annotations

import os
import zlib

from emu.amd import target
from emu.amd.target import Target

DEFAULT_ARCH = "gfx1100"  # the chip of a mock system that names none
TOPOLOGY = "/sys/devices/virtual/kfd/kfd/topology"
FIRST_RENDER_MINOR = 128
PERFORMANCE_LEVEL = "power_dpm_force_performance_level"
GC_HWID, SDMA0_HWID, NBIF_HWID = 11, 42, 108  # hardware ids of the IP blocks in the discovery table
HEAP_SYSTEM, HEAP_FB_PUBLIC = 0, 1  # mem_banks heap_type (HSA_HEAPTYPE_*)
CACHE_DATA, CACHE_INSTRUCTION, CACHE_HSACU = 1, 2, 8  # caches type bits (kfd_topology.h HSA_CACHE_TYPE_*)


def chip(arch: str) -> Target:
    """The chip whose figures the topology reports (a ValueError names the known ones)."""
    try:
        return target.get(arch)
    except target.UnknownArch:
        raise ValueError(f"no KFD topology for {arch!r}; emulated chips: {', '.join(target.TARGETS)}") from None


def gpu_id(c: Target, node: int) -> int:
    """A stable non-zero 16-bit id, as amdkfd derives one by hashing the device's properties."""
    return (zlib.crc32(f"{c.device_id}:{c.arch}:{node}".encode()) & 0xFFFF) or 1


def _text(props: dict[str, int]) -> str:
    return "".join(f"{k} {v}\n" for k, v in props.items())


def gpu_properties(c: Target, node: int, render_minor: int) -> str:
    return _text({
        "cpu_cores_count": 0, "simd_count": c.simd_count, "mem_banks_count": 1, "caches_count": 3,
        "io_links_count": 1, "p2p_links_count": 0, "cpu_core_id_base": 0, "simd_id_base": 0x80000000 + node * 0x1000,
        "max_waves_per_simd": c.waves_per_simd, "lds_size_in_kb": c.lds_kb, "gds_size_in_kb": 0, "num_gws": 64,
        "wave_front_size": c.wave_size, "array_count": c.arrays, "simd_arrays_per_engine": c.arrays_per_engine,
        "cu_per_simd_array": -(-c.cus // c.arrays), "simd_per_cu": c.simd_per_cu,
        "max_slots_scratch_cu": c.scratch_slots_per_cu, "gfx_target_version": c.gfx_target_version,
        "vendor_id": 0x1002, "device_id": c.device_id, "location_id": (node + 2) << 8, "domain": 0,
        "drm_render_minor": render_minor, "hive_id": 0, "num_sdma_engines": c.sdma_engines,
        "num_sdma_xgmi_engines": 0, "num_sdma_queues_per_engine": 6, "num_cp_queues": 8,
        "max_engine_clk_fcompute": c.engine_clock, "local_mem_size": c.vram, "fw_version": 2000,
        "capability": 0x2880, "debug_prop": 0, "sdma_fw_version": 20, "unique_id": gpu_id(c, node) * 0x1F3D5B79,
        "num_xcc": 1, "max_engine_clk_ccompute": 3000})


def cpu_properties(cpu_cores: int) -> str:
    return _text({
        "cpu_cores_count": cpu_cores, "simd_count": 0, "mem_banks_count": 1, "caches_count": 0, "io_links_count": 0,
        "p2p_links_count": 0, "cpu_core_id_base": 0, "simd_id_base": 0, "max_waves_per_simd": 0,
        "lds_size_in_kb": 0, "gds_size_in_kb": 0, "num_gws": 0, "wave_front_size": 0, "array_count": 0,
        "simd_arrays_per_engine": 0, "cu_per_simd_array": 0, "simd_per_cu": 0, "max_slots_scratch_cu": 0,
        "gfx_target_version": 0, "vendor_id": 0, "device_id": 0, "location_id": 0, "domain": 0,
        "drm_render_minor": 0, "hive_id": 0, "num_sdma_engines": 0, "num_sdma_xgmi_engines": 0,
        "num_sdma_queues_per_engine": 0, "num_cp_queues": 0, "max_engine_clk_ccompute": 3000})


def gpu_mem_bank(c: Target) -> str:
    return _text({"heap_type": HEAP_FB_PUBLIC, "size_in_bytes": c.vram, "flags": 0, "width": 256,
                  "mem_clk_max": c.memory_clock})


def cpu_mem_bank(size: int) -> str:
    """The CPU node's memory: the system heap (a runtime's system memory region: ROCr's allocations of host memory
    come from it), as amdkfd reports the host's RAM."""
    return _text({"heap_type": HEAP_SYSTEM, "size_in_bytes": size, "flags": 0, "width": 0, "mem_clk_max": 0})


def gpu_caches(c: Target) -> list[str]:
    """L1 data, L1 instruction and L2 of one CU's view (processor_id_low is the node's simd_id_base)."""
    def cache(level: int, kb: int, kind: int, line: int) -> str:
        return _text({"processor_id_low": 0, "level": level, "size": kb, "cache_line_size": line,
                      "cache_lines_per_tag": 1, "association": 16, "latency": 1, "type": kind | CACHE_HSACU})
    return [cache(1, 16 if c.wave_size == 64 else 32, CACHE_DATA, 128), cache(1, 64, CACHE_INSTRUCTION, 128),
            cache(2, c.l2_kb, CACHE_DATA, 128)]


def io_link(node_from: int, node_to: int) -> str:
    return _text({"type": 2, "version_major": 0, "version_minor": 0, "node_from": node_from, "node_to": node_to,
                  "weight": 20, "min_latency": 0, "max_latency": 0, "min_bandwidth": 312, "max_bandwidth": 64000,
                  "recommended_transfer_size": 0, "flags": 1})


def ip_versions(c: Target) -> dict[int, tuple[int, int, int]]:
    return {GC_HWID: c.gc, SDMA0_HWID: c.sdma, NBIF_HWID: c.nbio}


def sysfs_files(arch: str, ngpus: int) -> dict[str, str | None]:
    """path -> text of every file amdkfd and amdgpu show for `ngpus` GPUs of `arch` (None for device nodes; directories
    are implied by the paths): the KFD topology (node 0 the CPU, this machine's cores and memory; node i + 1 GPU i
    with render minor 128 + i), the render nodes' sysfs."""
    c, top = chip(arch), TOPOLOGY
    f: dict[str, str | None] = {"/dev/kfd": None, f"{top}/generation_id": "1\n",
                                f"{top}/system_properties": "platform_oem 0\nplatform_id 0\nplatform_rev 0\n"}
    cpu = f"{top}/nodes/0"
    f.update({f"{cpu}/gpu_id": "0\n", f"{cpu}/name": "\n", f"{cpu}/properties": cpu_properties(os.cpu_count() or 1),
              f"{cpu}/mem_banks/0/properties": cpu_mem_bank(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))})
    for i in range(ngpus):
        node, minor = i + 1, FIRST_RENDER_MINOR + i
        n = f"{top}/nodes/{node}"
        f.update({f"{n}/gpu_id": f"{gpu_id(c, node)}\n", f"{n}/name": f"{c.arch}\n",
                  f"{n}/properties": gpu_properties(c, node, minor), f"{n}/mem_banks/0/properties": gpu_mem_bank(c),
                  f"{n}/io_links/0/properties": io_link(node, 0)})
        f.update({f"{n}/caches/{j}/properties": t for j, t in enumerate(gpu_caches(c))})
        dev = f"/sys/class/drm/renderD{minor}/device"
        f.update({f"/dev/dri/renderD{minor}": None, f"{dev}/vendor": "0x1002\n",
                  f"{dev}/device": f"{c.device_id:#06x}\n", f"{dev}/{PERFORMANCE_LEVEL}": "auto\n"})
        for hwid, (major, minor_, rev) in ip_versions(c).items():
            ip = f"{dev}/ip_discovery/die/0/{hwid}/0"
            f.update({f"{ip}/major": f"{major}\n", f"{ip}/minor": f"{minor_}\n", f"{ip}/revision": f"{rev}\n",
                      f"{ip}/base_addr": "0x00001260\n"})
    return f
