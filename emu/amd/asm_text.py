"""LLVM assembly text of a decoded AMD instruction (what llvm-objdump-19 / llvm-mc-19 --disassemble print).

Printing is per encoding and per operand kind; opcodes are never special-cased by name except in the small
`asm_syntax` tables (symbolic immediates, LLVM spellings that differ from the vendor's)."""
from __future__ import annotations

import re
import struct

from emu.amd import asm_names as names
from emu.amd import asm_syntax as syn
from emu.amd.asm_operands import INLINE_FLOAT, Operand, op_info, scalar
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


def literal_text(v: int, bits: int = 32, fp: bool = False) -> str:
    """A 32-bit literal as LLVM prints it: as the inline constant it equals, else in hex (16-bit operands: the
    low half)."""
    if bits == 16:
        v &= 0xFFFF
    sv = v - (1 << bits) if v >> (bits - 1) and bits <= 32 else v
    if -16 <= sv <= 64:
        return str(sv)
    f = _float(v, 32) if bits == 32 else None
    return f if f is not None else f"0x{v:x}"


def _bad_class(count: int) -> str:
    return f"/*Invalid register, operand has 'SReg_{32 * count}' register class*/"


def operand_text(inst: Inst, o: Operand, info=None) -> str:
    k = o.kind
    if k == "vgpr":
        return reg("v", o.index, o.count)
    if k == "agpr":
        return reg("a", o.index, o.count)
    if k in ("sgpr", "ttmp") and o.count > 1 and (o.index % (2 if o.count == 2 else 4) or k == "ttmp" and o.count == 3):
        # a misaligned tuple (LLVM has no 96-bit trap-temporary tuples)
        if inst.base.startswith("SOP"):
            return f"{o.index + (108 if k == 'ttmp' else 0)}/*Invalid immediate*/"
        return f"{'s' if k == 'sgpr' else 'ttmp'}{o.index}" + _bad_class(o.count)
    if k == "sgpr":
        return reg("s", o.index, o.count)
    if k == "ttmp":
        return reg("ttmp", o.index, o.count)
    if k == "special":
        return o.name + (_bad_class(o.count) if o.count > 2 and o.name != "null" and o.name[:4] != "src_" else "")
    if k == "imm":
        return str(o.value)
    fmt = info.fmt if info is not None else "NUM_B32"
    bits = info.bits if info is not None else 32
    if k == "inline":
        if 128 <= o.index <= 208:
            return str(o.index - 128 if o.index <= 192 else 192 - o.index)
        if o.index == 248:
            return syn.INV2PI.get(64 if bits == 64 else 16 if bits == 16 and "F" in fmt else 32)
        return repr(INLINE_FLOAT[o.index])
    if k == "literal":  # a 16-bit VALU operand reads the literal's low half; SALU prints all 32 bits
        return literal_text(o.value or 0, bits if inst.base.startswith("V") else max(bits, 32), "F" in fmt)
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
    if o.kind == "vgpr" and o.index >= 128 and info is not None and info.bits == 16 and inst.family != "cdna" \
            and inst.base in ("VOP1", "VOP2", "VOPC"):  # 16-bit VALU e32/DPP operands reach only v0..v127
        cls = "VS_32_Lo128" if name == "src0" and "vsrc0" not in inst.fields else "VGPR_32_Lo128"
        t += f"/*Invalid register, operand has '{cls}' register class*/"
    elif (inst.base == "VINTERP" or (inst.base == "VOP1" and info is not None and info.kind == "VGPR"
                                     and name == "src0")) and _scalar_register(o):
        t += "/*Invalid register, operand has 'VGPR_32' register class*/"
    elif inst.base == "VINTERP" and o.kind in ("inline", "literal"):
        t += "/*Invalid immediate*/"
    elif o.kind == "special" and o.index == 254 and not inst.base.startswith("V"):
        t += "/*Invalid register, operand has 'SReg_32' register class*/"
    i = {"src0": 0, "src1": 1, "vsrc1": 1, "src2": 2}.get(name)
    if mods and i is not None and inst.fields.get(f"src{i}_sext"):
        t = f"sext({t})"
    if mods and i is not None and _fp(inst, info):
        f = inst.fields
        mix = "_MIX" in inst.op.name
        absv = (f.get("neg_hi" if mix else "abs", 0) >> i) & 1 or f.get(f"src{i}_abs", 0)
        if absv:
            t = f"|{t}|"
        if (f.get("neg", 0) >> i) & 1 or f.get(f"src{i}_neg", 0):
            t = f"-{t}" if absv or o.kind not in ("inline", "literal") else f"neg({t})"
    return t


def _scalar_register(o: Operand) -> bool:
    return o.kind in ("sgpr", "ttmp") or (o.kind == "special" and o.name != "null" and o.name[:4] != "src_")


def _fp(inst: Inst, info) -> bool:
    """Whether an operand takes float source modifiers (neg, abs): float-typed operands and the fma_mix ops."""
    if inst.base == "VOP3P":
        return "_MIX" in inst.op.name
    return info is not None and bool(re.search(r"(^|_)B?F\d", info.fmt))


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
    if inst.enc.endswith("LIT") and inst.op.value in _literal_ops(d, inst):  # s_fmamk/s_fmaak
        ops.insert(3 if "FMAAK" in inst.op.name else 2, f"0x{inst.fields['literal']:x}")
    info = inst.op.operands.get("ssrc1")
    if info is not None and info.kind == "SIMM4":
        ops[2] = syn.gpr_idx(inst.fields["ssrc1"])
    info = inst.op.operands.get("ssrc0")
    if info is not None and info.kind == "SENDMSG_RTN":  # s_sendmsg_rtn: the source field is the message
        ops[1] = syn.sendmsg(inst, inst.fields["ssrc0"])
    return _join(inst.name, ops)


def _sopk(inst: Inst, d) -> str:
    info = op_info(d, d.isa.encodings[inst.enc], inst.op, inst.fields, "simm16")
    imm = syn.simm16(inst, info.kind if info else "SIMM16")
    dst = _src(inst, d, "sdst", False)
    if info is not None and info.kind == "HWREG" and "setreg" in inst.name:
        lit = inst.fields.get("literal")
        return _join(inst.name, [imm, dst if lit is None else literal_text(lit)])
    return _join(inst.name, [dst, imm])


def _sopp(inst: Inst, d) -> str:
    info = op_info(d, d.isa.encodings[inst.enc], inst.op, inst.fields, "simm16")
    if info is None:  # LLVM still shows a nonzero immediate (s_endpgm 3)
        return _join(inst.name, [str(inst.fields["simm16"]) if inst.fields["simm16"] else None])
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
    if inst.enc.endswith("LIT") and inst.op.value in _literal_ops(d, inst):  # v_fmamk/v_fmaak
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
    if "SDWA" in inst.enc:
        ops.append(operand_text(inst, scalar(inst.family, inst.fields["sdst"], 2)) if inst.fields["sd"] else vcc)
    elif twin is not None and "vdst" in twin.operands and twin.operands["vdst"].kind != "EXEC":
        ops.append(vcc)
    ops += [_src(inst, d, "src0"), _src(inst, d, "vsrc1")]
    return _join(inst.name, ops, _vop_mods(inst))


def _vop_mods(inst: Inst) -> list[str]:
    f = inst.fields
    mods = []
    if "SDWA" in inst.enc:
        return syn.sdwa(inst)
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
    if f.get("opsel"):
        nsrc = sum(n.startswith("src") for n in names)
        bits = [(f["opsel"] >> i) & 1 for i in range(nsrc)] + [(f["opsel"] >> 3) & 1]
        mods.insert(0, f"op_sel:[{','.join(map(str, bits))}]")
    return _join(inst.name, ops, mods + _vop_mods(inst))


def _bits(v: int, n: int) -> str:
    return f"[{','.join(str((v >> i) & 1) for i in range(n))}]"


def _vop3p(inst: Inst, d) -> str:
    if inst.enc.startswith("VOP3P_MFMA"):
        return _mfma(inst, d)
    f = inst.fields
    names = [n for n in ("vdst", "src0", "src1", "src2") if n in inst.operands]
    ops = [_src(inst, d, n) for n in names]
    n = len(names) - 1
    mix = "_MIX" in inst.op.name
    hi = f.get("opsel_hi", 0) | f.get("opsel_hi2", 0) << 2
    mods = []
    if f.get("opsel"):
        mods.append(f"op_sel:{_bits(f['opsel'], n)}")
    if (hi if mix else hi & ((1 << n) - 1) != (1 << n) - 1) and "WMMA" not in inst.op.name:
        mods.append(f"op_sel_hi:{_bits(hi, n)}")
    if not mix:
        mods += [f"neg_lo:{_bits(f['neg'], n)}" if f.get("neg") else "",
                 f"neg_hi:{_bits(f['neg_hi'], n)}" if f.get("neg_hi") else ""]
    mods.append("clamp" if f.get("clmp") else "")
    return _join(inst.name, ops, mods + _vop_mods(inst))


def _vinterp(inst: Inst, d) -> str:
    f = inst.fields
    ops = [_src(inst, d, n) for n in ("vdst", "src0", "src1", "src2")]
    mods = ["clamp" if f.get("clmp") else "", f"op_sel:{_bits(f['opsel'], 4)}" if f.get("opsel") else "",
            f"wait_exp:{f['waitexp']}"]
    return _join(inst.name, ops, mods)


_RENDER = {"SOP1": _sop, "SOP2": _sop, "SOPC": _sop, "SOPK": _sopk, "SOPP": _sopp, "VOP1": _vop1, "VOP2": _vop2,
           "VOPC": _vopc, "VOP3": _vop3, "VOP3SD": _vop3, "VOP3P": _vop3p, "VINTERP": _vinterp}


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
        return _join(inst.name, [], _cache(inst))
    if _returns(inst) and "_LOAD_LDS_" not in inst.op.name:
        ops.append(_src(inst, d, "vdst", False))
    if seg == "SCRATCH" and not f.get("sve", 1 if inst.family == "cdna" and f.get("addr") is not None else 0):
        ops.append("off")
    else:
        a = inst.operands.get(addr_name)
        n = 1 if (saddr_on or seg == "SCRATCH") else 2
        ops.append(reg("v", a.index if a else f[addr_name], n))
    if addr_name not in inst.op.operands and "addr" not in inst.op.operands:
        ops.pop()  # no address operand (global_load_addtid_b32)
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
    mods = [f"offset:{off}" if off else ""] + _cache(inst)
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
    if "ioffset" in inst.op.operands:  # s_prefetch_*: [sbase,] offset, soffset, sdata as an immediate
        off = f["ioffset"] - (f["ioffset"] >> 23 << 24)
        ops = [_src(inst, d, "sbase", False), f"0x{off:x}" if off >= 0 else f"-0x{-off:x}",
               _src(inst, d, "soffset", False), _src(inst, d, "sdata", False)]
        return _join(inst.name, ops)
    if not inst.op.operands:
        return inst.name
    ops = [_src(inst, d, "sdata", False), _src(inst, d, "sbase", False)]
    sdata = inst.operands.get("sdata")
    if sdata is not None and sdata.name in ("m0", "exec_lo", "exec"):  # not a valid destination
        ops[0] += "/*Invalid register, operand has 'SReg_32_XM0_XEXEC' register class*/" if sdata.count == 1 else \
            "/*Invalid register, operand has 'SReg_64_XEXEC' register class*/" if sdata.count == 2 else ""
    null = 124 if inst.family != "cdna" else 0x7F
    if inst.family == "cdna":
        off = f["offset"] - (f["offset"] >> 20 << 21)
        hexoff = f"0x{off:x}" if off >= 0 else f"-0x{-off:x}"
        soff = _src(inst, d, "soffset", False) if f.get("soffset_en") else None
        if not f.get("imm"):  # the offset field names an SGPR
            soff = soff or operand_text(inst, scalar("cdna", f["offset"] & 0xFF, 1))
            ops.append(soff)
            mods = []
        else:
            ops.append(soff or hexoff)
            mods = [f"offset:{hexoff}"] if soff else []
        if "sbase" not in inst.op.operands:
            ops = ops[:1]
        mods.append("glc" if f.get("glc") else "")
    else:
        key = "ioffset" if "ioffset" in f else "offset"
        bits = 24 if key == "ioffset" else 21
        off = f[key] - (1 << bits) if f[key] >> (bits - 1) else f[key]
        so = f.get("soffset", null)
        hexoff = f"0x{off:x}" if off >= 0 else f"-0x{-off:x}"
        if so != null or (not off and inst.family == "rdna3"):
            ops.append(operand_text(inst, inst.operands["soffset"]) if "soffset" in inst.operands else f"s{so}")
            mods = [f"offset:{hexoff}" if off or (so != null and inst.family == "rdna4") else ""]
        else:
            ops.append(hexoff)
            mods = []
        mods += syn.th_scope(inst) if inst.family == "rdna4" else [n for n in ("glc", "dlc") if f.get(n)]
    return _join(inst.name, ops, mods)


_RENDER.update({"VOPD": _vopd, "FLAT": _flat, "GLOBAL": _flat, "SCRATCH": _flat, "VFLAT": _flat, "VGLOBAL": _flat,
                "VSCRATCH": _flat, "DS": _ds, "SMEM": _smem})


def _exp(inst: Inst, d) -> str:
    f = inst.fields
    tgt = names.EXPORT_TARGET[inst.family].get(f["target"], f"invalid_target_{f['target']}")
    srcs = [f"v{f[f'vsrc{i}']}" if f["en"] >> i & 1 else "off" for i in range(4)]
    return _join(f"{inst.name} {tgt}", srcs, ["done" if f["done"] else "", "row_en" if f["row"] else ""])


def _buffer(inst: Inst, d) -> str:
    f = inst.fields
    if not inst.op.operands:  # cache invalidation (buffer_gl0_inv, buffer_wbl2)
        return _join(inst.name, [], _cache(inst))
    ops = []
    if (_returns(inst) or "vdata" in inst.op.operands) and not f.get("lds"):
        ops.append(_src(inst, d, "vdata", False))
    n = f["idxen"] + f["offen"]
    ops.append(reg("v", f["vaddr"], n) if n else "off")
    ops.append(_src(inst, d, "srsrc", False) if "srsrc" in inst.operands else
               operand_text(inst, scalar(inst.family, f["rsrc"], 4)))
    ops.append(_src(inst, d, "soffset", False))
    mods = [syn.buffer_format(inst)]
    mods += ["idxen" if f["idxen"] else "", "offen" if f["offen"] else ""]
    off = f["offset"] if "offset" in f else f["ioffset"] - (f["ioffset"] >> 23 << 24)
    mods.append(f"offset:{off}" if off else "")
    mods += _cache(inst)
    mods += ["lds" if f.get("lds") else "", "tfe" if f.get("tfe") else ""]
    return _join(inst.name, ops, mods)


def _cache(inst: Inst) -> list[str]:
    f = inst.fields
    if inst.family == "rdna4":
        return syn.th_scope(inst)
    if inst.family == "cdna":
        return [n for n in ("sc0", "nt", "sc1") if f.get(n)]
    return [n for n in ("glc", "slc", "dlc") if f.get(n)]


def _ldsdir(inst: Inst, d) -> str:
    f = inst.fields
    ops = [f"v{f['vdst']}"]
    if "PARAM" in inst.op.name:
        ops.append(f"attr{f['attr']}.{'xyzw'[f['attr_chan']]}")
    wait = [(k, f[k]) for k in ("wait_vdst", "wait_va_vdst", "wait_vm_vsrc") if k in f]
    return _join(inst.name, ops, [f"{k}:{v}" for k, v in wait])


_RENDER.update({"EXP": _exp, "VEXPORT": _exp, "MUBUF": _buffer, "MTBUF": _buffer, "VBUFFER": _buffer, "LDSDIR": _ldsdir,
                "VDSDIR": _ldsdir})


_DIMS = ("1D", "2D", "3D", "CUBE", "1D_ARRAY", "2D_ARRAY", "2D_MSAA", "2D_MSAA_ARRAY")
_DIM_COORDS = (1, 2, 3, 3, 2, 3, 3, 4)
_DIM_GRADIENTS = (2, 4, 6, 4, 2, 4, 4, 4)
_VREG_SIZES = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 16)


def image_address_words(name: str, dim: int, a16: bool) -> int:
    """Address dwords of an image opcode, from the addressing parts its name lists (_C compare, _O offset,
    _B bias, _D/_CD derivatives, _L/_CL/_MIP lod or clamp, _G16 16-bit derivatives) and the dimension."""
    parts = set(name.split("_")[2:])
    if "RESINFO" in parts:
        return 1
    extra = len(parts & {"O", "B", "C"})
    comps = _DIM_COORDS[dim] + (1 if parts & {"L", "CL", "MIP"} else 0)
    words = extra + ((comps + 1) // 2 if a16 else comps)
    if parts & {"D", "CD"}:
        g = _DIM_GRADIENTS[dim]
        words += (g // 2 + 1) // 2 * 2 if "G16" in parts else g
    return words


def _image_sizes(inst: Inst, data: int, addr: int, nsa: bool) -> tuple[int, int]:
    """Data and address sizes as LLVM prints them: those of the opcode's default variant when it has no variant
    of these sizes (table read off llvm-mc by tools/gen_asm_names.py)."""
    entry = names.IMAGE.get(inst.family, {}).get((inst.op.value, int(nsa)))
    if entry and entry[1] and addr not in entry[0].get(data, ()):
        return entry[1], entry[2]
    return data, addr


def _mimg(inst: Inst, d) -> str:
    f = inst.fields
    name = inst.op.name
    dmask = f.get("dmask", 0)
    n = 4 if "GATHER4" in name or "MSAA_LOAD" in name else max(1, bin(dmask).count("1"))
    if f.get("d16"):
        n = (n + 1) // 2
    n += 1 if f.get("tfe") else 0
    words = image_address_words(name, f["dim"], bool(f.get("a16")))
    n, words = _image_sizes(inst, n, words, "vaddr1" in f)
    ops = [reg("v", f["vdata"], n)]
    if "vaddr1" in f:
        k = min(words, 5)
        addrs = [reg("v", f["vaddr"] if i == 0 else f[f"vaddr{i}"], 1 if i < k - 1 else words - k + 1)
                 for i in range(k)]
        ops.append(f"[{', '.join(addrs)}]")
        name_sep = "  "
    else:
        ops.append(reg("v", f["vaddr"], next(s for s in _VREG_SIZES if s >= words)))
        name_sep = " "
    ops.append(_src(inst, d, "srsrc", False))
    if "ssamp" in inst.op.operands:
        ops.append(_src(inst, d, "ssamp", False))
    mods = [f"dmask:0x{dmask:x}" if dmask else "", f"dim:SQ_RSRC_IMG_{_DIMS[f['dim']]}",
            "unorm" if f.get("unrm") else ""] + _cache(inst)
    mods += [m for m in ("r128", "a16", "tfe", "lwe", "d16") if f.get(m)]
    return _join(inst.name, ops, mods).replace(" ", name_sep, 1)


_RENDER.update({"MIMG": _mimg})


def _mfma(inst: Inst, d) -> str:
    f = inst.fields
    ops = []
    for n in ("vdst", "src0", "src1", "src2"):
        o, t = inst.operands.get(n), _src(inst, d, n, False)
        if o is not None and (o.kind in ("sgpr", "ttmp") or o.kind == "special" and not o.name.startswith("src_")):
            if n == "src2" and o.count == 32:  # no 1024-bit scalar tuple: LLVM shows the first register
                t = operand_text(inst, Operand(o.kind, o.index, 1, name=o.name))
            bank = "AV_" if n in ("src0", "src1") else "AReg_" if f.get("acc_cd") else "VReg_"
            cls = f"{bank}{32 * o.count}"
            t += f"/*Invalid register, operand has '{cls}' register class*/"
        ops.append(t)
    blgp = f.get("blgp", 0)
    mods = [f"cbsz:{f['cbsz']}" if f.get("cbsz") else "", f"abid:{f['abid']}" if f.get("abid") else "",
            (f"neg:{_bits(blgp, 3)}" if "_F64" in inst.op.name else f"blgp:{blgp}") if blgp else ""]
    return _join(inst.name, ops, mods)


def _resource(inst: Inst, v: int, count: int) -> str:
    """An RDNA4 9-bit image resource/sampler operand: SGPRs expected; LLVM flags VGPRs and constants."""
    if v >= 496:  # read as a small negative immediate
        return f"{v - 512}/*Invalid immediate*/"
    if v >= 256:
        return reg("v", v - 256, count) + _bad_class(count)
    o = scalar(inst.family, v, count)
    if o.kind in ("sgpr", "ttmp") and o.index % 4:
        return f"{v}/*Invalid immediate*/"
    t = operand_text(inst, o)
    return t + "/*Invalid immediate*/" if o.kind in ("inline", "literal", "invalid") else t


def _vimage(inst: Inst, d) -> str:
    f = inst.fields
    name = inst.op.name
    dmask = f["dmask"]
    n = 4 if "GATHER4" in name or "MSAA_LOAD" in name else max(1, bin(dmask).count("1"))
    if f["d16"]:
        n = (n + 1) // 2
    n += 1 if f["tfe"] else 0
    words = image_address_words(name, f["dim"], bool(f["a16"]))
    n, words = _image_sizes(inst, n, words, True)
    slots = 4 if inst.base == "VSAMPLE" else 5
    k = min(words, slots)
    addrs = [reg("v", f[f"vaddr{i}"], 1 if i < k - 1 else words - k + 1) for i in range(k)]
    addr = addrs[0] if k == 1 else f"[{', '.join(addrs)}]"
    ops = [reg("v", f["vdata"], n), addr, _resource(inst, f["rsrc"], 8)]
    if "samp" in inst.op.operands:
        ops.append(_resource(inst, f["samp"], 4))
    mods = [f"dmask:0x{dmask:x}" if dmask else "", f"dim:SQ_RSRC_IMG_{_DIMS[f['dim']]}",
            "unorm" if f.get("unrm") else "", *syn.th_scope(inst)]
    mods += [m for m in ("r128", "a16", "tfe", "lwe", "d16") if f.get(m)]
    return _join(inst.name, ops, mods)


_RENDER.update({"VIMAGE": _vimage, "VSAMPLE": _vimage})
