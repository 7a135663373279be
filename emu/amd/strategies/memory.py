"""Memory forms of drawn instructions (emu.amd.strategies): image channels and dimensions, buffer and scratch
addressing, cache policies, atomics with and without return, GFX9 SMEM offsets."""
from __future__ import annotations

import re

from hypothesis import strategies as st

from emu.amd import isa
from emu.amd.strategies.fields import Fields

_NO_D16 = re.compile(r"_PCK|RESINFO|GET_LOD")  # image opcodes whose data is not formatted: no 16-bit data mode

# RDNA4 cache policy (th, scope) pairs by access: stores take all, loads all but th 7, atomics split by
# whether they return (th bit 0); cascade policies (th 4, 6) only with scope DEV / SYS, NT_RETURN not with SYS.
_TH_SCOPE = {
    "store": tuple((th, sc) for th in range(8) for sc in range(4)),
    "load": tuple((th, sc) for th in range(7) for sc in range(4)),
    "atomic": tuple((th, sc) for th in (0, 2) for sc in range(4)) + ((4, 2), (4, 3), (6, 2), (6, 3)),
    "atomic_return": tuple((1, sc) for sc in range(4)) + ((3, 0), (3, 1), (3, 2)),
}


class MemoryForms(Fields):
    """The rules across the fields of memory instructions."""

    def memory(self, draw, op: isa.Op, v: dict[str, int]) -> None:
        """Memory forms: image channels and dimensions, buffer/scratch addressing, cache policies, atomics
        with and without return, GFX9 SMEM offsets."""
        if "dmask" in v:  # image data: up to four channels (the table types some too narrow)
            v["vdata"] = self.vgpr(draw, 4)
            if "ATOMIC" in op.name:  # 32-bit data, two dwords for compare-swap
                v["dmask"] = 3 if "CMPSWAP" in op.name else 1
            else:
                one = "GATHER4" in op.name or "MSAA_LOAD" in op.name  # these take a single channel
                v["dmask"] = 1 << draw(st.integers(0, 3)) if one else draw(st.integers(1, 15))
                for name in ("a16", "d16", "unrm"):
                    if name in v and (name != "d16" or not _NO_D16.search(op.name)):
                        v[name] = draw(st.integers(0, 1))
                if "dim" in v:  # 1D .. 2D_ARRAY; 2D_MSAA(_ARRAY) for the MSAA loads
                    v["dim"] = draw(st.integers(6, 7) if "MSAA" in op.name else st.integers(0, 5))
        if v.get("offen") == v.get("idxen") == 0:  # buffer access without VGPR offset or index
            v["vaddr"] = 0
        if self.e.enc.base in ("SCRATCH", "VSCRATCH"):  # the VGPR address is used only with sve (where there is
            addr = "addr" if "addr" in v else "vaddr"  # one), on gfx90a only where SADDR is off
            if "sve" in v:
                v["sve"] = draw(st.integers(0, 1))
                v[addr] *= v["sve"]
            elif v.get("saddr") != self.gen.saddr_off:
                v[addr] = 0
        if "lds" in v and "vaddr" not in op.operands and "_LDS_" in op.name:
            v["lds"] = 1  # buffer_store_lds_dword (gfx90a): the lds bit is part of the opcode
        for pattern, name in self.zero:
            if pattern.fullmatch(op.name) and name in v:
                v[name] = 0
        if "th" in v and v["th"] | v["scope"]:
            access = "atomic" if "_ATOMIC_" in op.name else "store" if "_STORE_" in op.name else "load"
            if access == "atomic" and v["th"] & 1:
                access = "atomic_return"
            v["th"], v["scope"] = draw(st.sampled_from(_TH_SCOPE[access]))
            v["th"] &= (1 << self.e.enc.field("th").width) - 1  # SMEM has two th bits
        ret = next((n for n in ("glc", "sc0", "th") if n in v), None)
        if "_ATOMIC_" in op.name and "vdst" in op.operands and ret and not v[ret] & 1:
            v["vdst"] = 0  # an atomic without return (GLC / SC0 / TH_ATOMIC_RETURN clear) writes no VGPR
        if "acc" in v and self.e.enc.variant != "MFMA" and "VGPR_OR_ACCVGPR" in {o.kind for o in op.operands.values()}:
            v["acc"] = draw(st.integers(0, 1))  # GFX90A+: the data registers are AGPRs
        if "_LOAD_LDS_" in op.name:  # loads into LDS write no VGPR (or AGPR), though the table lists one
            v.update({k: 0 for k in ("vdst", "acc") if k in v})
        if "imm" in v and "sbase" in op.operands:  # GFX9 SMEM: the offset is an immediate or an SGPR number
            v["imm"] = draw(st.integers(0, 1))
            if not v["imm"]:
                v["offset"] = self.sgpr(draw, 1)
        if v.get("soffset_en") == 0:
            v["soffset"] = 0
