"""The hardware's own definitions, converted once from the vendor headers of the pinned tinygrad wheel.

Kernel-descriptor layout (amdgpu_kd.py), PM4 opcodes and packet fields (am/pm4_soc15.py for gfx9,
am/pm4_nv.py for gfx10+), the offsets and fields of the compute, thread-trace and performance-counter registers
(am/regs.py, GC segment bases from am/{vega,navi}_offsets.py), the performance counters' select indices per block
(am/pmc.py, from ROCm's counter definitions), event types (am/soc_{9,11,12}.py), SDMA packets (am/sdma_{4,5,6}_0_0.py),
HSA/AMD queue structures (hsa.py), the KFD ioctl interface (kfd.py: the kernel's linux/kfd_ioctl.h) and the render
node's AMDGPU_INFO query (amdgpu_drm.py: linux/amdgpu_drm.h) are read as source text with `ast`
(emu.amd.hw.vendor; tinygrad is never imported), reduced to plain tables and cached on disk per wheel version and
SCHEMA. emu.amd.hw.{kd,pm4,sdma,aql,kfd} and emu.amd.drm present them under the hardware's names.
The host runtime (stack/) keeps its own definitions: tests/test_hw_crosscheck.py checks the two agree.
"""
from __future__ import annotations

import functools
from pathlib import Path

from emu import cache

SCHEMA = 6  # bump when the cached representation changes
GC_TABLES = {9: ("gc_9_4_3", "am/vega_offsets.py"), 11: ("gc_11_0_0", "am/navi_offsets.py"),
             12: ("gc_12_0_0", "am/navi_offsets.py")}  # gfx major -> register table, GC segment bases
SOC_HEADERS = {9: "am/soc_9.py", 11: "am/soc_11.py", 12: "am/soc_12.py"}
REG_PREFIXES = ("regCOMPUTE_", "regSQ_THREAD_TRACE_", "regGRBM_GFX_INDEX", "regSPI_CONFIG_CNTL", "regCP_PERFMON_CNTL",
                "regSQ_PERFCOUNTER", "regGRBM_PERFCOUNTER", "regGL2C_PERFCOUNTER")
PM4_HEADERS = {9: "am/pm4_soc15.py", 11: "am/pm4_nv.py", 12: "am/pm4_nv.py"}
SDMA_HEADERS = {4: "am/sdma_4_0_0.py", 5: "am/sdma_5_0_0.py", 6: "am/sdma_6_0_0.py", 7: "am/sdma_6_0_0.py"}
HSA_STRUCTS = ("struct_hsa_kernel_dispatch_packet_s", "struct_hsa_barrier_and_packet_s",
               "struct_hsa_barrier_or_packet_s", "struct_amd_queue_s", "struct_amd_signal_s")


def _cache_path() -> Path:
    from importlib.metadata import version  # reads dist-info, does not import tinygrad
    return cache.root() / f"hw-tinygrad{version('tinygrad')}-v{SCHEMA}.pickle"


def _kd() -> dict:
    from emu.amd.hw import vendor
    c = vendor.constants("amdgpu_kd.py")
    fields: dict[str, dict[str, tuple[int, int]]] = {}
    for prefix, reg in (("COMPUTE_PGM_RSRC1_", "rsrc1"), ("COMPUTE_PGM_RSRC2_", "rsrc2"),
                        ("COMPUTE_PGM_RSRC3_", "rsrc3"), ("KERNEL_CODE_PROPERTY_", "code_properties"),
                        ("KERNARG_PRELOAD_SPEC_", "kernarg_preload")):
        fields[reg] = {k[len(prefix):-6].lower(): (v, c[k[:-6] + "_WIDTH"]) for k, v in c.items()
                       if k.startswith(prefix) and k.endswith("_SHIFT") and k[:-6] + "_WIDTH" in c}
    layout = vendor.structs("amdgpu_kd.py")["llvm_amdhsa_kernel_descriptor_t"]
    return {"fields": fields, "layout": {name: (off, typ) for name, typ, off, *_ in layout},
            "size": vendor.struct_sizes("amdgpu_kd.py")["llvm_amdhsa_kernel_descriptor_t"]}


def _regs(gfx: int) -> dict:
    from emu.amd.hw import vendor
    table, offsets = GC_TABLES[gfx]
    bases = vendor.constants(offsets)
    return {name.removeprefix("reg"): (bases[f"GC_BASE__INST0_SEG{seg}"] + off,
                                       {f: (lo, hi - lo + 1) for f, (lo, hi) in fs.items()})
            for name, (off, seg, fs) in vendor.dict_display("am/regs.py", table).items()
            if name.startswith(REG_PREFIXES) and "_WORD_" not in name}  # _WORD_: trace packet layouts, not registers


def _events(gfx: int) -> dict:
    from emu.amd.hw import vendor
    return {k: v for k, v in vendor.constants(SOC_HEADERS[gfx]).items()
            if k.startswith(("THREAD_TRACE_", "CS_PARTIAL_FLUSH"))}


def _pmc() -> dict:
    """Counter name -> {target ('gfx11', 'gfx12', 'gfx942', ...) -> (block, select index)}."""
    from emu.amd.hw import vendor
    return vendor.dict_display("am/pmc.py", "counters")


def _pm4(rel: str) -> dict:
    from emu.amd.hw import vendor
    return {"consts": dict(vendor.constants(rel)), "fields": vendor.field_macros(rel)}


def _sdma(rel: str) -> dict:
    from emu.amd.hw import vendor
    c = vendor.constants(rel)
    packets = sorted({k[len("SDMA_PKT_"):-len("_HEADER_op_offset")] for k in c
                      if k.startswith("SDMA_PKT_") and k.endswith("_HEADER_op_offset")}, key=len, reverse=True)
    out: dict[str, dict[str, tuple[int, int, int]]] = {}
    for k, dw in c.items():
        if not (k.startswith("SDMA_PKT_") and k.endswith("_offset")):
            continue
        stem = k[len("SDMA_PKT_"):-len("_offset")]
        pkt = next((p for p in packets if stem.startswith(p + "_")), None)
        if pkt is None:
            continue
        rest = stem[len(pkt) + 1:]  # DWORDNAME_field
        i = next((j for j in range(len(rest)) if rest[j].islower()), None)
        if i is None:
            continue
        name, mask, shift = rest[i:], c.get(f"SDMA_PKT_{stem}_mask"), c.get(f"SDMA_PKT_{stem}_shift")
        if mask is None or shift is None or mask & (mask + 1):
            continue
        out.setdefault(pkt, {})[name] = (shift, mask.bit_length(), dw)
    return {"consts": {k: v for k, v in c.items() if k.startswith(("SDMA_OP_", "SDMA_SUBOP_"))}, "packets": out}


def _hsa() -> dict:
    from emu.amd.hw import vendor
    s, sizes = vendor.structs("hsa.py"), vendor.struct_sizes("hsa.py")
    c = vendor.constants("hsa.py")
    return {"structs": {n: {f: (off, typ) for f, typ, off, *_ in s[n]} for n in HSA_STRUCTS},
            "sizes": {n: sizes[n] for n in HSA_STRUCTS},
            "consts": {k: v for k, v in c.items() if k.startswith(("HSA_PACKET_", "HSA_FENCE_SCOPE_"))}}


def _kfd() -> dict:
    from emu.amd.hw import vendor
    s, sizes = vendor.structs("kfd.py"), vendor.struct_sizes("kfd.py")
    return {"consts": {k: v for k, v in vendor.constants("kfd.py").items() if k.isupper()},
            "structs": {n: [(f, typ, off) for f, typ, off, *_ in rows] for n, rows in s.items()}, "sizes": sizes,
            "ioctls": {k: v for k, v in vendor.ioctl_requests("kfd.py").items() if k.startswith("AMDKFD_IOC_")}}


def _drm() -> dict:
    from emu.amd.hw import vendor
    s = vendor.structs("amdgpu_drm.py")
    names = ("struct_drm_amdgpu_info", "struct_drm_amdgpu_info_device", "struct_drm_version")
    return {"consts": {k: v for k, v in vendor.constants("amdgpu_drm.py").items()
                       if k.startswith(("AMDGPU_INFO_", "AMDGPU_FAMILY_", "DRM_AMDGPU_")) or k == "DRM_COMMAND_BASE"},
            "structs": {n: {f: (off, typ) for f, typ, off, *_ in s[n]} for n in names},
            "sizes": {n: vendor.struct_sizes("amdgpu_drm.py")[n] for n in names}}


def convert() -> dict:
    """Every table emu.amd.hw presents, from the vendor headers (a few seconds: am/regs.py is large)."""
    return {"kd": _kd(), "regs": {g: _regs(g) for g in GC_TABLES}, "events": {g: _events(g) for g in SOC_HEADERS},
            "pm4": {g: _pm4(r) for g, r in PM4_HEADERS.items()},
            "sdma": {v: _sdma(r) for v, r in SDMA_HEADERS.items()}, "hsa": _hsa(), "kfd": _kfd(), "drm": _drm(),
            "pmc": _pmc()}


@functools.cache
def tables() -> dict:
    """The converted tables: from the cache, or converted now and cached."""
    return cache.pickled(_cache_path(), convert)
