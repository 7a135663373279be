"""LLVM text of memory, image and export instructions: DS, FLAT/GLOBAL/SCRATCH, SMEM, MUBUF/MTBUF, MIMG,
and RDNA4's VFLAT/VGLOBAL/VSCRATCH, VBUFFER, VIMAGE/VSAMPLE, VEXPORT, VDSDIR."""
from __future__ import annotations

import re

from emu.amd import target
from emu.amd.asm import image_sizes, names
from emu.amd.asm import syntax as syn
from emu.amd.asm.operands import scalar
from emu.amd.asm.spell import bad_class, join, operand_text, reg, src_text
from emu.amd.decode import Inst


def returns(inst: Inst) -> bool:
    """Atomics return the old value only when asked (glc / sc0 / th:TH_ATOMIC_RETURN)."""
    f = inst.fields
    if "_ATOMIC" not in inst.op.name:
        return "vdst" in inst.op.operands
    if target.generation(inst.family).cache_policy == "th":
        return bool(f.get("th", 0) & 1)
    return bool(f.get("glc", f.get("sc0")))

# The cache bits by field, in LLVM's order, and their names per cache policy: the CDNA tables name the bits of
# gfx940 (sc0, nt, sc1), which gfx90a calls glc, slc and scc
_CACHE_FIELDS = ("glc", "slc", "dlc", "sc0", "nt", "sc1")
_CACHE_NAMES = {"glc": {"sc0": "glc", "nt": "slc", "sc1": "scc"}, "sc": {}}

def cache_bits(inst: Inst) -> list[str]:
    policy = target.generation(inst.family).cache_policy
    if policy == "th":
        return syn.th_scope(inst)
    names_ = _CACHE_NAMES[policy]
    return [names_.get(n, n) for n in _CACHE_FIELDS if inst.fields.get(n)]

def _flat(inst: Inst, d) -> str:
    f = inst.fields
    seg = inst.base.removeprefix("V")
    saddr_on = not d.gen.no_saddr(f.get("saddr", d.gen.saddr_off)) and seg != "FLAT"
    addr_name = "vaddr" if "vaddr" in f else "addr"
    data_name = "vsrc" if "vsrc" in f else "data"
    ops = []
    if not inst.op.operands:  # cache control (global_wb, global_inv): modifiers only
        return join(inst.name, [], cache_bits(inst))
    lds = f.get("lds", 0)  # gfx90a: the load goes to LDS (no VGPR destination)
    if returns(inst) and "_LOAD_LDS_" not in inst.op.name and not lds:
        ops.append(src_text(inst, d, "vdst", False))
    # a scratch access has a VGPR address where SVE says so (gfx940+, RDNA), else (gfx90a) where SADDR is off
    if seg == "SCRATCH" and not (f["sve"] if "sve" in f else not saddr_on):
        ops.append("off")
    else:
        a = inst.operands.get(addr_name)
        n = 1 if (saddr_on or seg == "SCRATCH") else 2
        ops.append(reg("v", a.index if a else f[addr_name], n))
    if addr_name not in inst.op.operands and "addr" not in inst.op.operands:
        ops.pop()  # no address operand (global_load_addtid_b32)
    if data_name in inst.op.operands:
        ops.append(src_text(inst, d, data_name, False))
    if seg != "FLAT":
        if saddr_on:
            s = inst.operands.get("saddr")
            ops.append(operand_text(inst, s) if s else f"s{f['saddr']}")
        else:
            ops.append("off")
    off = f.get("offset", f.get("ioffset", 0))
    bits = 24 if "ioffset" in f else 12 if seg == "FLAT" else 13
    if off >> (bits - 1) and (seg != "FLAT" or d.gen.gfx >= 12):
        off -= 1 << bits
    mods = [f"offset:{off}" if off else ""] + cache_bits(inst) + ["lds" if lds else ""]
    return join(inst.name, ops, mods)

def _ds(inst: Inst, d) -> str:
    f = inst.fields
    ops = [src_text(inst, d, n, False) for n in ("vdst", "addr", "data0", "data1")]
    if re.search(r"2ADDR|(READ|WRITE|WRXCHG|LOAD|STORE|STOREXCHG)2", inst.op.name):
        mods = [f"offset0:{f['offset0']}" if f["offset0"] else "", f"offset1:{f['offset1']}" if f["offset1"] else ""]
    else:
        off = f["offset0"] | f["offset1"] << 8
        mods = [f"offset:{off}" if off else ""]
    mods.append("gds" if f.get("gds") else "")
    return join(inst.name, ops, mods)

def _smem(inst: Inst, d) -> str:
    f = inst.fields
    if "ioffset" in inst.op.operands:  # s_prefetch_*: [sbase,] offset, soffset, sdata as an immediate
        off = f["ioffset"] - (f["ioffset"] >> 23 << 24)
        ops = [src_text(inst, d, "sbase", False), f"0x{off:x}" if off >= 0 else f"-0x{-off:x}",
               src_text(inst, d, "soffset", False), src_text(inst, d, "sdata", False)]
        return join(inst.name, ops)
    if not inst.op.operands:
        return inst.name
    ops = [src_text(inst, d, "sdata", False), src_text(inst, d, "sbase", False)]
    sdata = inst.operands.get("sdata")
    if sdata is not None and sdata.name in ("m0", "exec_lo", "exec"):  # not a valid destination
        ops[0] += "/*Invalid register, operand has 'SReg_32_XM0_XEXEC' register class*/" if sdata.count == 1 else \
            "/*Invalid register, operand has 'SReg_64_XEXEC' register class*/" if sdata.count == 2 else ""
    null = d.gen.saddr_off
    if d.gen.smem_imm_bit:
        off = f["offset"] - (f["offset"] >> 20 << 21)
        hexoff = f"0x{off:x}" if off >= 0 else f"-0x{-off:x}"
        soff = src_text(inst, d, "soffset", False) if f.get("soffset_en") else None
        if not f.get("imm"):  # the offset field names an SGPR
            soff = soff or operand_text(inst, scalar(inst.family, f["offset"] & 0xFF, 1))
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
        if so != null or (not off and d.gen.buffer_soffset_literal):
            ops.append(operand_text(inst, inst.operands["soffset"]) if "soffset" in inst.operands else f"s{so}")
            mods = [f"offset:{hexoff}" if off or (so != null and d.gen.gfx >= 12) else ""]
        else:
            ops.append(hexoff)
            mods = []
        mods += syn.th_scope(inst) if d.gen.cache_policy == "th" else [n for n in ("glc", "dlc") if f.get(n)]
    return join(inst.name, ops, mods)

def _exp(inst: Inst, d) -> str:
    f = inst.fields
    tgt = names.of(names.EXPORT_TARGET, inst.family).get(f["target"], f"invalid_target_{f['target']}")
    srcs = [f"v{f[f'vsrc{i}']}" if f["en"] >> i & 1 else "off" for i in range(4)]
    return join(f"{inst.name} {tgt}", srcs, ["done" if f["done"] else "", "row_en" if f["row"] else ""])

def _buffer(inst: Inst, d) -> str:
    f = inst.fields
    if not inst.op.operands:  # cache invalidation (buffer_gl0_inv, buffer_wbl2); gfx90a's take no cache bits (LLVM
        # ignores them in buffer_wbl2 and rejects them in the others)
        glc_named_sc = target.generation(inst.family).cache_policy == "glc" and "sc0" in inst.fields
        return join(inst.name, [], [] if glc_named_sc else cache_bits(inst))
    ops = []
    if (returns(inst) or "vdata" in inst.op.operands) and not f.get("lds"):
        ops.append(src_text(inst, d, "vdata", False))
    n = f["idxen"] + f["offen"]
    if "vaddr" in inst.op.operands:  # not buffer_store_lds_dword (gfx90a)
        ops.append(reg("v", f["vaddr"], n) if n else "off")
    ops.append(src_text(inst, d, "srsrc", False) if "srsrc" in inst.operands else
               operand_text(inst, scalar(inst.family, f["rsrc"], 4)))
    ops.append(src_text(inst, d, "soffset", False))
    mods = [syn.buffer_format(inst)]
    mods += ["idxen" if f["idxen"] else "", "offen" if f["offen"] else ""]
    off = f["offset"] if "offset" in f else f["ioffset"] - (f["ioffset"] >> 23 << 24)
    mods.append(f"offset:{off}" if off else "")
    lds = "lds" if f.get("lds") else ""
    if "vaddr" not in inst.op.operands:  # buffer_store_lds_dword: LLVM's syntax has lds before the cache bits
        mods.append(lds)
        lds = ""
    mods += cache_bits(inst)
    mods += [lds, "tfe" if f.get("tfe") else ""]
    return join(inst.name, ops, mods)

def _ldsdir(inst: Inst, d) -> str:
    f = inst.fields
    ops = [f"v{f['vdst']}"]
    if "PARAM" in inst.op.name:
        ops.append(f"attr{f['attr']}.{'xyzw'[f['attr_chan']]}")
    wait = [(k, f[k]) for k in ("wait_vdst", "wait_va_vdst", "wait_vm_vsrc") if k in f]
    return join(inst.name, ops, [f"{k}:{v}" for k, v in wait])

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
    entry = names.of(image_sizes.IMAGE, inst.family).get((inst.op.value, int(nsa)))
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
    ops.append(src_text(inst, d, "srsrc", False))
    if "ssamp" in inst.op.operands:
        ops.append(src_text(inst, d, "ssamp", False))
    mods = [f"dmask:0x{dmask:x}" if dmask else "", f"dim:SQ_RSRC_IMG_{_DIMS[f['dim']]}",
            "unorm" if f.get("unrm") else ""] + cache_bits(inst)
    mods += [m for m in ("r128", "a16", "tfe", "lwe", "d16") if f.get(m)]
    return join(inst.name, ops, mods).replace(" ", name_sep, 1)

def _resource(inst: Inst, v: int, count: int) -> str:
    """An RDNA4 9-bit image resource/sampler operand: SGPRs expected; LLVM flags VGPRs and constants."""
    if v - 256 + count > 256:  # a VGPR tuple past v255 is read as a small negative immediate
        return f"{v - 512}/*Invalid immediate*/"
    if v >= 256:
        return reg("v", v - 256, count) + bad_class(count)
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
    slots = 4 if inst.base == "VSAMPLE" else 5
    if inst.base == "VIMAGE" and words > 1 and not any(f[f"vaddr{i}"] for i in range(1, slots)):
        # LLVM reads a VIMAGE with all-zero vaddr1.. as having no address list: default one-register operands
        n, words = (4 if "GATHER4" in name or "MSAA_LOAD" in name else 1), 1
    n, words = _image_sizes(inst, n, words, True)
    k = min(words, slots)
    addrs = [reg("v", f[f"vaddr{i}"], 1 if i < k - 1 else words - k + 1) for i in range(k)]
    addr = addrs[0] if k == 1 else f"[{', '.join(addrs)}]"
    ops = [reg("v", f["vdata"], n), addr, _resource(inst, f["rsrc"], 8)]
    if "samp" in inst.op.operands:
        ops.append(_resource(inst, f["samp"], 4))
    mods = [f"dmask:0x{dmask:x}" if dmask else "", f"dim:SQ_RSRC_IMG_{_DIMS[f['dim']]}",
            "unorm" if f.get("unrm") else "", *syn.th_scope(inst)]
    mods += [m for m in ("r128", "a16", "tfe", "lwe", "d16") if f.get(m)]
    return join(inst.name, ops, mods)


RENDER = {"FLAT": _flat, "GLOBAL": _flat, "SCRATCH": _flat, "VFLAT": _flat, "VGLOBAL": _flat, "VSCRATCH": _flat,
          "DS": _ds, "SMEM": _smem, "EXP": _exp, "VEXPORT": _exp, "MUBUF": _buffer, "MTBUF": _buffer,
          "VBUFFER": _buffer, "LDSDIR": _ldsdir, "VDSDIR": _ldsdir, "MIMG": _mimg, "VIMAGE": _vimage,
          "VSAMPLE": _vimage}
