"""LLVM assembly text of a decoded AMD instruction (what llvm-objdump-19 / llvm-mc-19 --disassemble print).

Printing is per encoding and per operand kind; opcodes are never special-cased by name except in the small
`asm_syntax` tables (symbolic immediates, LLVM spellings that differ from the vendor's)."""
from __future__ import annotations

import struct

from emu.amd import asm_syntax as syn
from emu.amd.asm_operands import INLINE_FLOAT, Operand, op_info
from emu.amd.decode import Inst, decoder


def reg(prefix: str, i: int, n: int) -> str:
    return f"{prefix}{i}" if n == 1 else f"{prefix}[{i}:{i + n - 1}]"


def _float(bits: int, width: int) -> str | None:
    if width == 64:
        f = struct.unpack("<d", struct.pack("<Q", bits))[0]
    elif width == 16:
        f = struct.unpack("<e", struct.pack("<H", bits & 0xFFFF))[0]
    else:
        f = struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]
    if f in INLINE_FLOAT.values():
        return repr(f)
    return None


def literal_text(v: int, bits: int = 32) -> str:
    """A 32-bit literal as LLVM prints it: as the inline constant it equals, else in hex."""
    sv = v - (1 << 32) if v >> 31 else v
    if -16 <= sv <= 64:
        return str(sv)
    f = _float(v, 32)
    return f if f is not None else f"0x{v:x}"


def operand_text(inst: Inst, o: Operand, info=None) -> str:
    k = o.kind
    if k == "vgpr":
        return reg("v", o.index, o.count)
    if k == "agpr":
        return reg("a", o.index, o.count)
    if k == "sgpr":
        return reg("s", o.index, o.count)
    if k == "ttmp":
        return reg("ttmp", o.index, o.count)
    if k == "special":
        return o.name
    fmt = info.fmt if info is not None else "NUM_B32"
    bits = info.bits if info is not None else 32
    if k == "inline":
        if 128 <= o.index <= 208:
            return str(o.index - 128 if o.index <= 192 else 192 - o.index)
        if o.index == 248:
            return syn.INV2PI.get(64 if bits == 64 else 16 if bits == 16 and "F" in fmt else 32)
        return repr(INLINE_FLOAT[o.index])
    if k == "literal":
        return literal_text(o.value or 0, bits)
    return f"<invalid operand {o.index}>"


def render(inst: Inst) -> str:
    if inst.op is None:
        return syn.UNKNOWN
    d = decoder(inst.family)
    base = inst.base
    fn = _RENDER.get(base, _generic)
    return fn(inst, d).rstrip()


def _src(inst: Inst, d, name: str, mods: bool = True) -> str | None:
    o = inst.operands.get(name)
    if o is None:
        return None
    enc = d.isa.encodings[inst.enc]
    info = op_info(d, enc, inst.op, inst.fields, name)
    t = operand_text(inst, o, info)
    if mods:
        i = {"src0": 0, "src1": 1, "src2": 2}.get(name)
        f = inst.fields
        if i is not None:
            if (f.get("abs", 0) >> i) & 1 or f.get(f"src{i}_abs", 0):
                t = f"|{t}|"
            if (f.get("neg", 0) >> i) & 1 or f.get(f"src{i}_neg", 0):
                t = f"-{t}"
    return t


def _join(name: str, ops: list[str | None], mods: list[str] = ()) -> str:
    s = name
    ops = [o for o in ops if o is not None]
    if ops:
        s += " " + ", ".join(ops)
    mods = [m for m in mods if m]
    if mods:
        s += " " + " ".join(mods)
    return s


def _generic(inst: Inst, d) -> str:
    return _join(inst.name, [_src(inst, d, n, False) for n in inst.operands])


def _sop(inst: Inst, d) -> str:
    ops = [_src(inst, d, n, False) for n in ("sdst", "ssrc0", "ssrc1")]
    info = inst.op.operands.get("ssrc1")
    if info is not None and info.kind == "SIMM4":
        ops[2] = syn.gpr_idx(inst.fields["ssrc1"])
    return _join(inst.name, ops)


def _sopk(inst: Inst, d) -> str:
    info = inst.op.operands.get("simm16")
    imm = syn.simm16(inst, info.kind if info else "SIMM16")
    dst = _src(inst, d, "sdst", False)
    if info is not None and info.kind == "HWREG" and "setreg" in inst.name:
        return _join(inst.name, [imm, dst])
    return _join(inst.name, [dst, imm])


def _sopp(inst: Inst, d) -> str:
    info = inst.op.operands.get("simm16")
    if info is None:
        return inst.name
    return _join(inst.name, [syn.simm16(inst, info.kind)])


def _vop_dst_vcc(inst: Inst, d) -> list[str | None]:
    """VOP2/VOPC e32 forms: operands their VOP3 twin has but the short encoding implies (vcc)."""
    twin = d.isa.by_name.get(("VOP3SD", inst.op.name)) or d.isa.by_name.get(("VOP3", inst.op.name))
    vcc = "vcc_lo" if d.family != "cdna" else "vcc"
    return twin, vcc


def _vop1(inst: Inst, d) -> str:
    return _join(inst.name, [_src(inst, d, "vdst"), _src(inst, d, "src0")], _vop_mods(inst))


def _vop2(inst: Inst, d) -> str:
    twin, vcc = _vop_dst_vcc(inst, d)
    f = inst.fields
    ops = [_src(inst, d, "vdst")]
    if twin is not None and "sdst" in twin.operands:
        ops.append(vcc)
    src0 = _src(inst, d, "src0")
    if inst.enc.endswith("LIT") and inst.op.value in _literal_ops(d, inst):
        lit = f"0x{f['literal']:x}"
        if "MK" in inst.op.name:
            ops += [src0, lit, _src(inst, d, "vsrc1")]
        else:
            ops += [src0, _src(inst, d, "vsrc1"), lit]
    else:
        ops += [src0, _src(inst, d, "vsrc1")]
    if twin is not None and "src2" in twin.operands and twin.operands["src2"].kind == "SREG":
        ops.append(vcc)
    return _join(inst.name, ops, _vop_mods(inst))


def _literal_ops(d, inst):
    g = d.match(int.from_bytes(inst.raw[:4], "little"))
    return g.literal_ops.get(inst.base, ()) if g else ()


def _vopc(inst: Inst, d) -> str:
    twin, vcc = _vop_dst_vcc(inst, d)
    ops = []
    if twin is not None and "vdst" in twin.operands and twin.operands["vdst"].kind != "EXEC":
        ops.append(vcc)
    ops += [_src(inst, d, "src0"), _src(inst, d, "vsrc1")]
    return _join(inst.name, ops, _vop_mods(inst))


def _vop_mods(inst: Inst) -> list[str]:
    f = inst.fields
    mods = []
    if "DPP16" in inst.enc:
        mods += syn.dpp16(f)
    elif "DPP8" in inst.enc:
        mods += syn.dpp8(f, inst.fields.get("src0", inst.fields.get("srcx0")))
    return mods


def _vop3(inst: Inst, d) -> str:
    f = inst.fields
    names = [n for n in ("vdst", "sdst", "src0", "src1", "src2") if n in inst.operands]
    vinfo = inst.op.operands.get("vdst")
    if vinfo is not None and vinfo.kind == "EXEC":
        names.remove("vdst")
    ops = [_src(inst, d, n) for n in names]
    mods = []
    if f.get("clmp"):
        mods.append("clamp")
    if f.get("omod"):
        mods.append(syn.OMOD[f["omod"]])
    if inst.base == "VOP3" and f.get("opsel"):
        mods.append(f"op_sel:[{','.join(str((f['opsel'] >> i) & 1) for i in range(len(names) - (names[0] in ('vdst',))))}]")
    return _join(inst.name, ops, mods + _vop_mods(inst))


_RENDER = {"SOP1": _sop, "SOP2": _sop, "SOPC": _sop, "SOPK": _sopk, "SOPP": _sopp, "VOP1": _vop1, "VOP2": _vop2,
           "VOPC": _vopc, "VOP3": _vop3, "VOP3SD": _vop3}


def _vopd(inst: Inst, d) -> str:
    f = inst.fields
    opy = d.isa.op("VOPD", f["opy"])
    halves = []
    for op, dst, s0, s1 in ((inst.op, "vdstx", "srcx0", "vsrcx1"), (opy, "vdsty", "srcy0", "vsrcy1")):
        ops = [_src(inst, d, dst, False), _src(inst, d, s0, False)]
        lit = f"0x{f['literal']:x}" if "literal" in f else None
        if "FMAMK" in op.name:
            ops += [lit, _src(inst, d, s1, False)]
        elif "FMAAK" in op.name:
            ops += [_src(inst, d, s1, False), lit]
        elif "vsrcy1" in op.operands:
            ops.append(_src(inst, d, s1, False))
        halves.append(_join(op.name.lower(), ops))
    return " :: ".join(halves)


def _flat_cache(inst: Inst) -> list[str]:
    f = inst.fields
    if inst.family == "rdna4":
        return syn.th_scope(inst)
    if inst.family == "cdna":
        return [n for n in ("sc0", "sc1", "nt") if f.get(n)]
    return [n for n in ("glc", "slc", "dlc") if f.get(n)]


def _returns(inst: Inst) -> bool:
    """Atomics return the old value only when asked (glc / sc0 / th:TH_ATOMIC_RETURN)."""
    f = inst.fields
    if "_ATOMIC" not in inst.op.name:
        return "vdst" in inst.op.operands
    if inst.family == "rdna4":
        return bool(f.get("th", 0) & 1)
    return bool(f.get("sc0" if inst.family == "cdna" else "glc"))


def _flat(inst: Inst, d) -> str:
    f = inst.fields
    seg = inst.base.removeprefix("V")
    null = 124 if inst.family != "cdna" else 0x7F
    saddr_on = f.get("saddr", null) != null and seg != "FLAT"
    addr_name = "vaddr" if "vaddr" in f else "addr"
    data_name = "vsrc" if "vsrc" in f else "data"
    ops = []
    if not inst.op.operands:  # cache control (global_wb, global_inv): modifiers only
        return _join(inst.name, [], _flat_cache(inst))
    if _returns(inst):
        ops.append(_src(inst, d, "vdst", False))
    if seg == "SCRATCH" and not f.get("sve", 1 if inst.family == "cdna" and f.get("addr") is not None else 0):
        ops.append("off")
    else:
        a = inst.operands.get(addr_name)
        n = 1 if (saddr_on or seg == "SCRATCH") else 2
        ops.append(reg("v", a.index if a else f[addr_name], n))
    if data_name in inst.op.operands:
        ops.append(_src(inst, d, data_name, False))
    if seg != "FLAT":
        if saddr_on:
            s = inst.operands.get("saddr")
            ops.append(operand_text(inst, s) if s else f"s{f['saddr']}")
        else:
            ops.append("off")
    off = f.get("offset", f.get("ioffset", 0))
    bits = 24 if "ioffset" in f else 13 if seg != "FLAT" or inst.family == "cdna" else 12
    if seg == "FLAT" and inst.family == "cdna":
        bits = 12
    if off >> (bits - 1) and seg != "FLAT":
        off -= 1 << bits
    mods = [f"offset:{off}" if off else ""] + _flat_cache(inst)
    return _join(inst.name, ops, mods)


def _ds(inst: Inst, d) -> str:
    f = inst.fields
    ops = [_src(inst, d, n, False) for n in ("vdst", "addr", "data0", "data1")]
    import re
    if re.search(r"2ADDR|(READ|WRITE|WRXCHG|LOAD|STORE|STOREXCHG)2", inst.op.name):
        mods = [f"offset0:{f['offset0']}" if f["offset0"] else "", f"offset1:{f['offset1']}" if f["offset1"] else ""]
    else:
        off = f["offset0"] | f["offset1"] << 8
        mods = [f"offset:{off}" if off else ""]
    mods.append("gds" if f.get("gds") else "")
    return _join(inst.name, ops, mods)


def _smem(inst: Inst, d) -> str:
    f = inst.fields
    ops = [_src(inst, d, "sdata", False), _src(inst, d, "sbase", False)]
    null = 124 if inst.family != "cdna" else 0x7F
    if inst.family == "cdna":
        soff = _src(inst, d, "soffset", False) if f.get("soffset_en") else None
        if f.get("imm"):
            ops += [soff, f"0x{f['offset']:x}"] if not soff else [soff]
            mods = [f"offset:0x{f['offset']:x}"] if soff else []
        else:
            ops.append(_src(inst, d, "soffset", False) if soff else f"s{f['offset'] & 0x7F}")
            mods = []
        mods.append("glc" if f.get("glc") else "")
    else:
        key = "ioffset" if "ioffset" in f else "offset"
        bits = 24 if key == "ioffset" else 21
        off = f[key] - (1 << bits) if f[key] >> (bits - 1) else f[key]
        so = f.get("soffset", null)
        if so != null or (not off and inst.family == "rdna3"):
            ops.append(operand_text(inst, inst.operands["soffset"]) if "soffset" in inst.operands else f"s{so}")
            mods = [f"offset:0x{off & ((1 << bits) - 1):x}" if off else ""]
        else:
            ops.append(f"0x{off & ((1 << bits) - 1):x}" if off >= 0 else f"-0x{-off:x}")
            mods = []
        mods += syn.th_scope(inst) if inst.family == "rdna4" else [n for n in ("glc", "dlc") if f.get(n)]
    return _join(inst.name, ops, mods)


_RENDER.update({"VOPD": _vopd, "FLAT": _flat, "GLOBAL": _flat, "SCRATCH": _flat, "VFLAT": _flat, "VGLOBAL": _flat,
                "VSCRATCH": _flat, "DS": _ds, "SMEM": _smem})
