"""VALU rules of drawn instructions (emu.amd.strategies): source and result modifiers, the literal, the constant
bus, VOPD register banks."""
from __future__ import annotations

import re

from hypothesis import strategies as st

from emu.amd import isa
from emu.amd.regs import DPP8, DPP8FI, DPP16, LITERAL, SDWA, VGPR0
from emu.amd.strategies.fields import ACCEPTS, Fields, regs

_SHIFT64 = re.compile(r"V_(LSHL|LSHR|ASHR)REV_[BI]64")  # GFX10+: one scalar value only
_FLOAT = re.compile(r"F16|F32|F64")  # float operand formats (NUM_F32, NUM_PK2_F16, NUM_BF16, ...)
_INT_SRC1 = re.compile(r"_CLASS_|_LDEXP_")  # src1 is a class mask / an exponent, though typed as a float


class ValuRules(Fields):
    """The rules across the fields of VALU instructions."""

    def literal(self, draw, ops: dict[str, isa.Op], v: dict[str, int]) -> None:
        """_LIT variants: a source selects the literal (unless the opcode's K is implicit)."""
        fields = self.literal_fields(ops)
        implicit = [op for op in ops.values() if op.name in self.e.literal_only]
        if not implicit and not any(v[f] == LITERAL for f in fields):
            v[draw(st.sampled_from(fields))] = LITERAL
        users = [self.operand(ops, f)[1] for f in fields if v[f] == LITERAL]
        users += [op.operands["vdst"] for op in implicit if "vdst" in op.operands]
        if all(o.bits == 16 for o in users) or self.e.enc.base == "VOP3P":
            v["literal"] &= 0xFFFF  # a 16-bit operand's literal: LLVM keeps the low half only
        for i, f in enumerate(("src0", "src1", "src2")):
            if v.get(f) == LITERAL and self.operand(ops, f)[1].bits == 64:
                for m in ("neg", "abs"):  # no modifiers on a 64-bit literal
                    if m in v:
                        v[m] &= ~(1 << i)

    def constant_bus(self, draw, ops: dict[str, isa.Op], v: dict[str, int]) -> None:
        """A VALU instruction reads at most 2 scalar values (1 on GFX9, and for 64-bit shifts): distinct SGPRs,
        special registers, the literal, and VCC where the 32-bit form reads it implicitly. Sources over the
        limit that may be VGPRs become VGPRs."""
        limit = 1 if self.gen.constant_bus == 1 or any(_SHIFT64.fullmatch(op.name) for op in ops.values()) else 2
        used: set = set()
        if any(self.reads_vcc(op) for op in ops.values()):
            used.add("vcc")
        if any(op.name in self.e.literal_only for op in ops.values()):
            used.add("lit")  # FMAMK / FMAAK's K
        fields = []
        for f in self.e.enc.fields:
            x = v.get(f.name)
            if f.kind != "src" or x is None or x >= VGPR0 or x in (DPP16, DPP8, DPP8FI, SDWA):
                continue
            operand = self.operand(ops, f.name)[1]
            if operand is None or (x != LITERAL and (x >= 128 or x == self.gen.null)):
                continue  # unused, inline constant, null
            takes_v = "v" in ACCEPTS.get(operand.kind, "")
            fields.append((takes_v, x != LITERAL, f.name, operand, "lit" if x == LITERAL else x))
        for takes_v, _, name, operand, key in sorted(fields, key=lambda t: t[:2]):  # must-be-scalar, literal first
            if key in used or len(used) < limit:
                used.add(key)
            elif takes_v:
                v[name] = VGPR0 + self.vgpr(draw, regs(operand.bits))

    def reads_vcc(self, op: isa.Op) -> bool:
        """Whether the opcode reads VCC without a source field naming it (V_CNDMASK_B32 and carry-in adds in
        their 32-bit forms, V_DIV_FMAS); a VOPD component's pseudocode is its VOP2 twin's."""
        twin = self.t.by_name.get(("VOP2", op.name.replace("V_DUAL_", "V_")))
        code = re.sub(r"//.*", "", op.pcode or (twin.pcode if twin is not None else None) or "")
        explicit = any(o.fmt == "NUM_M64" for n, o in op.operands.items() if n.startswith("src"))
        return not explicit and bool(re.search(r"VCC(?!\.u64\[laneId\] = )", code))

    def vopd_banks(self, ops: dict[str, isa.Op], v: dict[str, int]) -> None:
        """VOPD register banks: X's and Y's src0 differ in reg % 4, so do their src1, and their src2 (the
        accumulator: vdst of FMAC / DOT2ACC, the VGPR after K of FMAMK) differ in reg % 2."""
        for x, y, base in (("srcx0", "srcy0", VGPR0), ("vsrcx1", "vsrcy1", 0)):
            rx, ry = v[x] - base, v[y] - base
            used = self.operand(ops, x)[1] is not None and self.operand(ops, y)[1] is not None
            if used and rx >= 0 and ry >= 0 and rx % 4 == ry % 4:
                v[y] = base + ry - ry % 4 + (rx + 1) % 4

        def src2(c: str) -> str | None:
            name = ops[f"op{c}"].name
            return f"vdst{c}" if re.search("FMAC|DOT2ACC", name) else f"vsrc{c}1" if "FMAMK" in name else None

        def reg(name: str) -> int:
            return v[name] << 1 | (v["vdstx"] & 1 ^ 1) if name == "vdsty" else v[name]

        sx, sy = src2("x"), src2("y")
        if sx and sy and reg(sx) % 2 == reg(sy) % 2:  # one of them is an FMAMK's vsrc1: move that one
            movable, other1 = (sy, "vsrcx1") if sy == "vsrcy1" else (sx, "vsrcy1")
            for flip in (1, 3):  # change parity, keep clear of the other component's src1 bank
                r = v[movable] ^ flip
                if self.operand(ops, other1)[1] is None or r % 4 != v[other1] % 4:
                    v[movable] = r
                    break

    def modifiers(self, draw, op: isa.Op, v: dict[str, int]) -> None:
        """Source/result modifiers where the operand types take them: neg/abs on float sources, clamp and
        omod on float results, op_sel on 16-bit operands, SDWA selects."""
        def mask(pred) -> int:
            return sum(1 << i for i in range(3) if (o := self.operand({"op": op}, f"src{i}")[1]) and pred(o))

        def some(m: int) -> int:
            return draw(st.integers(0, 7)) & m

        vdst = op.operands.get("vdst")
        fres = vdst is not None and vdst.fmt.startswith("NUM_") and bool(_FLOAT.search(vdst.fmt))
        fsrc = mask(lambda o: bool(_FLOAT.search(o.fmt))) & (1 if _INT_SRC1.search(op.name) else 7)
        isrc = mask(lambda o: bool(re.match(r"NUM_[IU]\d", o.fmt)))
        base = self.e.enc.base
        packed = mask(lambda o: o.fmt.startswith("NUM_PK2"))
        if base == "VOP3P" and self.gen.gfx == 9 and not re.match(r"V_PK_|V_(FMA|MAD)_MIX", op.name):
            packed = 0  # GFX9 dot products take no op_sel / neg
        if base == "VOP3P":
            for name in ("neg", "neg_hi"):
                if name in v:
                    v[name] = some(fsrc & packed)
            if "opsel" in v:
                v["opsel"] = some(packed)
                v["opsel_hi"] = (v["opsel_hi"] & ~packed) | (some(packed) & 3)
                v["opsel_hi2"] = (v["opsel_hi2"] & ~(packed >> 2)) | (some(packed) >> 2)
        elif base in ("VOP3", "VOP3SD", "VINTERP"):
            for name, m in (("neg", fsrc), ("abs", 0 if packed else fsrc)):  # packed operations have no abs
                if name in v:
                    v[name] = some(m)
            if base == "VINTERP":  # op_sel picks the high half of 16-bit operands (LLVM 19 has none in VOP3)
                v["opsel"] = some(mask(lambda o: o.bits == 16)) | draw(st.integers(0, vdst.bits == 16)) << 3
        elif self.dpp and base in ("VOP1", "VOP2", "VOPC") or self.e.enc.variant.startswith("SDWA"):
            sdwa = self.e.enc.variant.startswith("SDWA")
            for i in range(2):  # the DPP16 / SDWA dword's per-source modifiers, for the sources the opcode has
                if self.operand({"op": op}, f"src{i}")[1] is None:
                    continue
                fs = fsrc & ~packed
                for name, value in (("neg", fs >> i & 1), ("abs", fs >> i & 1), ("sext", isrc >> i & 1),
                                    ("sel", 6 if sdwa else 0)):  # sel: BYTE_0 .. DWORD
                    if f"src{i}_{name}" in v:
                        v[f"src{i}_{name}"] = draw(st.integers(0, value))
            for name, hi in (("dst_sel", 6), ("dst_unused", 2)):
                if name in v:
                    v[name] = draw(st.integers(0, hi))
        fp8 = mask(lambda o: bool(re.search(r"FP8|BF8", o.fmt)))
        if fres and (base == "VOP3P") == bool(packed) and not fp8:  # clamp/omod: VOP3P packed, other plain float math
            for name, hi in (("clmp", 1), ("omod", 3)):
                if name in v:
                    v[name] = draw(st.integers(0, hi))

    def literal_fields(self, ops: dict[str, isa.Op]) -> list[str]:
        """Source fields that may select the literal."""
        return [f.name for f in self.e.enc.fields if f.kind in ("src", "ssrc") and f.name != "vdst"
                and "l" in ACCEPTS.get(getattr(self.operand(ops, f.name)[1], "kind", ""), "")]
