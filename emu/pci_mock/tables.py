"""The vendor data the PCI function is built from, converted once from the pinned tinygrad wheel's autogen headers
(parsed as data by emu.amd.hw.vendor, never imported) and cached on disk per wheel version and SCHEMA:

- pci.py (linux/pci_regs.h): config-space offsets, bits and capability ids;
- am/am.py (amdgpu's discovery.h): the IP discovery structs, flattened to their scalar fields; the binary's
  signatures, table ids and the IP blocks' hardware ids;
- am/navi_offsets.py: the register segment bases of each IP block (gfx10 and later);
- am/regs.py: each IP version's registers, name -> (dword offset in its segment, segment), and their fields,
  name -> field -> (lowest bit, highest bit);
- am/am.py (amdgpu's psp_gfx_if.h, amdgpu_psp.h): the PSP's bootloader commands, ring control commands, ring
  frame and command buffer layouts, command ids, firmware types and status codes;
- am/smu_*.py (amdgpu's SMU message headers): each SMU table's message ids, result codes and clock ids;
- am/am.py (amdgpu_vm.h): the page-table entry bits (AMDGPU_PTE_*, AMDGPU_PDE_*);
- am/am.py (soc15_ih_clientid.h, the ivsrcid headers): interrupt client and source ids.
"""
from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterable
from pathlib import Path

from emu import cache

SCHEMA = 3  # bump when the cached representation changes
STRUCTS = ("struct_binary_header", "struct_ip_discovery_header", "struct_die_header", "struct_ip_v4",
           "struct_gc_info_v1_0", "struct_gc_info_v1_1", "struct_gc_info_v1_2", "struct_gc_info_v1_3",
           "struct_gc_info_v2_0", "struct_gc_info_v2_1")
PSP_STRUCTS = ("struct_psp_gfx_rb_frame", "struct_psp_gfx_cmd_resp")
PSP_PREFIXES = ("GFX_CMD_ID_", "GFX_CTRL_CMD_ID_", "PSP_BL__", "PSP_RING_TYPE__", "TEE_", "PSP_ERR_", "GFX_FW_TYPE_",
                "PSP_FW_TYPE_", "PSP_1_MEG", "PSP_CMD_BUFFER_SIZE", "PSP_FENCE_BUFFER_SIZE", "PSP_TMR_ALIGNMENT")
SMU_TABLES = ("smu_13_0_0", "smu_14_0_2")  # the consumer SMUs' message tables (the others are datacenter parts')
REG_TABLES = ("gc", "mmhub", "nbio", "nbif", "mp", "hdp", "osssys", "sdma")  # regs.py's tables: <prefix>_<version>
IH_PREFIXES = ("SOC21_IH_CLIENTID_", "GFX_11_0_0__SRCID__", "GFX_12_0_0__SRCID__")
_SCALARS = {"c_uint8": 1, "c_ubyte": 1, "c_uint16": 2, "c_uint32": 4, "c_uint64": 8}
_BASE = re.compile(r"([A-Z0-9]+)_BASE__INST(\d+)_SEG(\d+)")

Field = tuple[int, int, int, int]  # byte offset, bytes, bit count (0: the whole scalar), lowest bit


def _aliases(rel: str) -> dict[str, str]:
    """`name: TypeAlias = target` of a module: name -> the target's text."""
    from emu.amd.hw import vendor
    return {st.target.id: ast.unparse(st.value) for st in vendor.parse(rel).body
            if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None
            and ast.unparse(st.annotation) == "TypeAlias"}


def _flatten(rel: str, name: str, prefix: str = "", base: int = 0) -> dict[str, Field]:
    """Every scalar field of struct `name`, nested structs and arrays unrolled: 'table_list[1].offset' -> Field."""
    from emu.amd.hw import vendor
    rows, aliases = vendor.structs(rel), _aliases(rel)
    out: dict[str, Field] = {}

    def scalar_or_struct(typ: str, path: str, off: int, bits: int = 0, bit: int = 0) -> None:
        typ = aliases.get(typ, typ)
        node = ast.parse(typ, mode="eval").body
        if isinstance(node, ast.Subscript) and ast.unparse(node.value) == "c.Array":
            elem, count = node.slice.elts
            n = ast.literal_eval(count.slice)
            size = _size(rel, ast.unparse(elem))
            for i in range(n):
                scalar_or_struct(ast.unparse(elem), f"{path}[{i}]", off + i * size)
        elif typ.startswith(("struct_", "union_")):
            out.update(_flatten(rel, typ, path + ".", off))
        else:
            out[path] = (off, _SCALARS[typ.removeprefix("ctypes.")], bits, bit)

    for field, typ, off, *bitfield in rows[name]:
        scalar_or_struct(typ, prefix + field, base + off, *bitfield)
    return out


def _size(rel: str, typ: str) -> int:
    from emu.amd.hw import vendor
    typ = _aliases(rel).get(typ, typ)
    if typ.startswith(("struct_", "union_")):
        return vendor.struct_sizes(rel)[typ]
    return _SCALARS[typ.removeprefix("ctypes.")]


def _discovery() -> dict:
    from emu.amd.hw import vendor
    c = vendor.constants("am/am.py")
    return {"structs": {n: {"size": vendor.struct_sizes("am/am.py")[n], "fields": _flatten("am/am.py", n)}
                        for n in STRUCTS},
            "consts": {k: v for k, v in c.items() if k.endswith(("_HWID", "_SIGNATURE", "_TABLE_ID"))
                       or k in ("IP_DISCOVERY", "GC", "HARVEST_INFO", "TOTAL_TABLES")}}


def _bases() -> dict[str, dict[int, list[int]]]:
    """IP block name (GC, MP0, NBIO, ...) -> instance -> its segment bases (dword addresses)."""
    from emu.amd.hw import vendor
    out: dict[str, dict[int, list[int]]] = {}
    for k, v in vendor.constants("am/navi_offsets.py").items():
        m = _BASE.fullmatch(k)
        if m:
            segs = out.setdefault(m[1], {}).setdefault(int(m[2]), [])
            segs.extend([0] * (int(m[3]) + 1 - len(segs)))
            segs[int(m[3])] = v
    return {ip: {i: segs for i, segs in insts.items() if any(segs)} for ip, insts in out.items()}


def _reg_tables() -> dict[str, dict[str, tuple]]:
    """regs.py's tables by name ('gc_11_0_0', ...): register -> (dword offset, segment, fields)."""
    from emu.amd.hw import vendor
    names = next(ast.literal_eval(st.value) for st in vendor.parse("am/regs.py").body
                 if isinstance(st, ast.Assign) and getattr(st.targets[0], "id", None) == "__all__")
    return {t: vendor.dict_display("am/regs.py", t) for t in names if t.split("_")[0] in REG_TABLES}


def _psp() -> dict:
    from emu.amd.hw import vendor
    return {"structs": {n: {"size": vendor.struct_sizes("am/am.py")[n], "fields": _flatten("am/am.py", n)}
                        for n in PSP_STRUCTS},
            "consts": {k: v for k, v in vendor.constants("am/am.py").items() if k.startswith(PSP_PREFIXES)}}


def _smu() -> dict[str, dict[str, int]]:
    from emu.amd.hw import vendor
    return {t: {k: v for k, v in vendor.constants(f"am/{t}.py").items()
                if k.startswith(("PPSMC_MSG_", "PPSMC_Result_", "PPCLK_"))} for t in SMU_TABLES}


def convert() -> dict:
    from emu.amd.hw import vendor
    regs, c = _reg_tables(), vendor.constants("am/am.py")
    return {"pci": dict(vendor.constants("pci.py")), "discovery": _discovery(), "bases": _bases(),
            "regs": {t: {r: (off, seg) for r, (off, seg, _f) in rs.items()} for t, rs in regs.items()},
            "fields": {t: {r: f for r, (_o, _s, f) in rs.items() if f} for t, rs in regs.items()},
            "psp": _psp(), "smu": _smu(),
            "vm": {k: v for k, v in c.items() if k.startswith(("AMDGPU_PTE_", "AMDGPU_PDE_"))},
            "ih": {k: v for k, v in c.items() if k.startswith(IH_PREFIXES)}}


def _cache_path() -> Path:
    from importlib.metadata import version  # reads dist-info, does not import tinygrad
    return cache.root() / f"pci-tinygrad{version('tinygrad')}-v{SCHEMA}.pickle"


@functools.cache
def tables() -> dict:
    """The converted tables: from the cache, or converted now and cached."""
    return cache.pickled(_cache_path(), convert)


def vendor_table(prefixes: Iterable[str], version: tuple[int, int, int], kind: str = "regs") -> dict | None:
    """The am/regs.py table describing an IP of `version`: the one of the same major version at or below it (minor
    revisions share their register headers), else None. `kind` "regs": register -> (dword offset, segment);
    "fields": register -> field -> (lowest bit, highest bit)."""
    found = []
    for name, regs in tables()[kind].items():
        prefix, *ver = name.split("_")
        v = tuple(map(int, ver))
        if prefix in prefixes and v[0] == version[0] and v <= version:
            found.append((v, regs))
    return max(found, key=lambda f: f[0])[1] if found else None
