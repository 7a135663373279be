"""LLVM text of scalar and vector ALU instructions: SOP*, VOP1/2/C (e32, DPP, SDWA), VOP3/VOP3SD/VOP3P,
MFMA, VOPD, VINTERP."""
from __future__ import annotations

from emu.amd import target
from emu.amd.asm import syntax as syn
from emu.amd.asm.operands import Operand, op_info, scalar
from emu.amd.asm.spell import bits_text, join, literal_text, operand_text, src_text
from emu.amd.decode import Inst
from emu.amd.regs import LDS_DIRECT


def generic(inst: Inst, d) -> str:
    return join(inst.name, [src_text(inst, d, n, False) for n in inst.operands])

def _sop(inst: Inst, d) -> str:
    ops = [src_text(inst, d, n, False) for n in ("sdst", "ssrc0", "ssrc1")]
    if inst.enc.endswith("LIT") and inst.op.value in _literal_ops(d, inst):  # s_fmamk/s_fmaak
        ops.insert(3 if "FMAAK" in inst.op.name else 2, f"0x{inst.fields['literal']:x}")
    info = inst.op.operands.get("ssrc1")
    if info is not None and info.kind == "SIMM4":
        ops[2] = syn.gpr_idx(inst.fields["ssrc1"])
    info = inst.op.operands.get("ssrc0")
    if info is not None and info.kind == "SENDMSG_RTN":  # s_sendmsg_rtn: the source field is the message
        ops[1] = syn.sendmsg(inst, inst.fields["ssrc0"])
    return join(inst.name, ops)

def _sopk(inst: Inst, d) -> str:
    info = op_info(d, d.isa.encodings[inst.enc], inst.op, inst.fields, "simm16")
    imm = syn.simm16(inst, info.kind if info else "SIMM16")
    dst = src_text(inst, d, "sdst", False)
    if info is not None and info.kind == "HWREG" and "setreg" in inst.name:
        lit = inst.fields.get("literal")
        return join(inst.name, [imm, dst if lit is None else literal_text(lit)])
    return join(inst.name, [dst, imm])

def _sopp(inst: Inst, d) -> str:
    info = op_info(d, d.isa.encodings[inst.enc], inst.op, inst.fields, "simm16")
    if info is None:  # LLVM still shows a nonzero immediate (s_endpgm 3)
        return join(inst.name, [str(inst.fields["simm16"]) if inst.fields["simm16"] else None])
    return join(inst.name, [syn.simm16(inst, info.kind)])

def _vop_dst_vcc(inst: Inst, d) -> list[str | None]:
    """VOP2/VOPC e32 forms: operands their VOP3 twin has but the short encoding implies (vcc)."""
    twin = d.isa.by_name.get(("VOP3SD", inst.op.name)) or d.isa.by_name.get(("VOP3", inst.op.name))
    vcc = "vcc_lo" if d.gen.wave_size == 32 else "vcc"
    return twin, vcc

def _vop1(inst: Inst, d) -> str:
    return join(inst.name, [src_text(inst, d, "vdst"), src_text(inst, d, "src0")], _vop_mods(inst))

def _vop2(inst: Inst, d) -> str:
    twin, vcc = _vop_dst_vcc(inst, d)
    f = inst.fields
    ops = [src_text(inst, d, "vdst")]
    if twin is not None and "sdst" in twin.operands:
        ops.append(vcc)
    src0 = src_text(inst, d, "src0")
    if inst.enc.endswith("LIT") and inst.op.value in _literal_ops(d, inst):  # v_fmamk/v_fmaak
        lit = f"0x{f['literal']:x}"
        if "MK" in inst.op.name:
            ops += [src0, lit, src_text(inst, d, "vsrc1")]
        else:
            ops += [src0, src_text(inst, d, "vsrc1"), lit]
    else:
        ops += [src0, src_text(inst, d, "vsrc1")]
    if twin is not None and "src2" in twin.operands and twin.operands["src2"].kind == "SREG":
        if d.gen.gfx >= 12 and ops[-1].endswith("|"):  # LLVM 19 closes gfx12's src1 abs after the carry-in
            ops[-1], vcc = ops[-1][:-1], f"{vcc}|"  # (v_cndmask_b32_dpp v1, v2, |v3, vcc_lo|)
        ops.append(vcc)
    return join(inst.name, ops, _vop_mods(inst))

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
    ops += [src_text(inst, d, "src0"), src_text(inst, d, "vsrc1")]
    return join(inst.name, ops, _vop_mods(inst))

def _vop_mods(inst: Inst) -> list[str]:
    f = inst.fields
    mods = []
    if "SDWA" in inst.enc:
        return syn.sdwa(inst)
    if "DPP16" in inst.enc:
        mods += syn.dpp16(f, target.generation(inst.family).dpp_broadcasts)
    elif "DPP8" in inst.enc:
        mods += syn.dpp8(f, inst.fields.get("src0", inst.fields.get("srcx0")))
    return mods

def _vop3(inst: Inst, d) -> str:
    f = inst.fields
    names = [n for n in ("vdst", "sdst", "src0", "src1", "src2") if n in inst.operands]
    vinfo = inst.op.operands.get("vdst")
    if vinfo is not None and vinfo.kind == "EXEC":
        names.remove("vdst")
    table = "TTBL" in (inst.op.pcode or "")  # v_bitop3: OMOD, ABS and NEG hold the truth table
    ops = [src_text(inst, d, n, not table) for n in names]
    mods = []
    if f.get("clmp"):
        mods.append("clamp")
    if table:
        t = f["omod"] << 6 | f["abs"] << 3 | f["neg"]
        mods.append(f"bitop3:{t if t <= 10 else hex(t)}" if t else "")
    elif f.get("omod"):
        mods.append(syn.OMOD[f["omod"]])
    if f.get("opsel"):
        nsrc = sum(n.startswith("src") for n in names)
        bits = [(f["opsel"] >> i) & 1 for i in range(nsrc)] + [(f["opsel"] >> 3) & 1]
        mods.insert(len(mods) if table else 0, f"op_sel:[{','.join(map(str, bits))}]")
    return join(inst.name, ops, mods + _vop_mods(inst))

def _vop3p(inst: Inst, d) -> str:
    if inst.enc.startswith("VOP3P_MFMA"):
        return _mfma(inst, d)
    f = inst.fields
    names = [n for n in ("vdst", "src0", "src1", "src2") if n in inst.operands]
    ops = [src_text(inst, d, n) for n in names]
    n = len(names) - 1
    mix = "_MIX" in inst.op.name
    hi = f.get("opsel_hi", 0) | f.get("opsel_hi2", 0) << 2
    mods = []
    if f.get("opsel"):
        mods.append(f"op_sel:{bits_text(f['opsel'], n)}")
    if hi if mix else hi & ((1 << n) - 1) != (1 << n) - 1:
        mods.append(f"op_sel_hi:{bits_text(hi, n)}")
    if not mix:
        mods += [f"neg_lo:{bits_text(f['neg'], n)}" if f.get("neg") else "",
                 f"neg_hi:{bits_text(f['neg_hi'], n)}" if f.get("neg_hi") else ""]
    mods.append("clamp" if f.get("clmp") else "")
    return join(inst.name, ops, mods + _vop_mods(inst))

def _vinterp(inst: Inst, d) -> str:
    f = inst.fields
    ops = [src_text(inst, d, n) for n in ("vdst", "src0", "src1", "src2")]
    mods = ["clamp" if f.get("clmp") else "", f"op_sel:{bits_text(f['opsel'], 4)}" if f.get("opsel") else "",
            f"wait_exp:{f['waitexp']}"]
    return join(inst.name, ops, mods)

def _vopd(inst: Inst, d) -> str:
    f = inst.fields
    opy = d.isa.op("VOPD", f["opy"])
    halves = []
    for op, dst, s0, s1 in ((inst.op, "vdstx", "srcx0", "vsrcx1"), (opy, "vdsty", "srcy0", "vsrcy1")):
        ops = [src_text(inst, d, dst, False), src_text(inst, d, s0, False)]
        lit = f"0x{f['literal']:x}" if "literal" in f else None
        if "FMAMK" in op.name:
            ops += [lit, src_text(inst, d, s1, False)]
        elif "FMAAK" in op.name:
            ops += [src_text(inst, d, s1, False), lit]
        elif "vsrcy1" in op.operands:
            ops.append(src_text(inst, d, s1, False))
        halves.append(join(op.name.lower(), ops))
    return " :: ".join(halves)

def _mfma(inst: Inst, d) -> str:
    f = inst.fields
    ops = []
    for n in ("vdst", "src0", "src1", "src2"):
        o, t = inst.operands.get(n), src_text(inst, d, n, False)
        if o is not None and (o.kind in ("sgpr", "ttmp") or o.kind == "special" and (
                not o.name.startswith("src_") or o.index == LDS_DIRECT)):
            if n == "src2" and o.count == 32:  # no 1024-bit scalar tuple: LLVM shows the first register
                t = operand_text(inst, Operand(o.kind, o.index, 1, name=o.name))
            bank = "AV_" if n in ("src0", "src1") else "AReg_" if f.get("acc_cd") else "VReg_"
            cls = f"{bank}{32 * o.count}"
            t += f"/*Invalid register, operand has '{cls}' register class*/"
        ops.append(t)
    blgp = f.get("blgp", 0)
    mods = [f"cbsz:{f['cbsz']}" if f.get("cbsz") else "", f"abid:{f['abid']}" if f.get("abid") else "",
            (f"neg:{bits_text(blgp, 3)}" if "_F64" in inst.op.name and d.gen.mfma_f64_neg else f"blgp:{blgp}")
            if blgp else ""]
    return join(inst.name, ops, mods)


RENDER = {"SOP1": _sop, "SOP2": _sop, "SOPC": _sop, "SOPK": _sopk, "SOPP": _sopp, "VOP1": _vop1, "VOP2": _vop2,
          "VOPC": _vopc, "VOP3": _vop3, "VOP3SD": _vop3, "VOP3P": _vop3p, "VINTERP": _vinterp, "VOPD": _vopd}
