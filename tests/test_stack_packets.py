"""stack/hcq/pm4.py and sdma.py against independent vendor data: the amdgpu packet and register tables shipped in the
pinned tinygrad wheel (autogen/am/*.py), read as text with `ast` (never imported, never executed)."""
from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path

import pytest

from stack.hcq import pm4, sdma
from stack.hcq.bits import Field


def _am_dir() -> Path:
    spec = importlib.util.find_spec("tinygrad")
    assert spec and spec.submodule_search_locations, "the pinned tinygrad wheel is a dependency"
    return Path(next(iter(spec.submodule_search_locations))) / "runtime" / "autogen" / "am"


def _eval(node: ast.AST, x: int | None = None) -> int:
    """Integer value of a vendor constant or of a one-argument field macro applied to x."""
    match node:
        case ast.Constant(value=int() as v):
            return v
        case ast.Name(id="x"):
            return x
        case ast.Call(func=ast.Name(id="unsigned"), args=[a]):
            return _eval(a, x) & 0xFFFFFFFF
        case ast.BinOp(left=left, op=op, right=right):
            a, b = _eval(left, x), _eval(right, x)
            return {ast.LShift: lambda: a << b, ast.RShift: lambda: a >> b, ast.BitAnd: lambda: a & b,
                    ast.BitOr: lambda: a | b}[type(op)]()
    raise ValueError(f"unexpected vendor expression {ast.dump(node)}")


@functools.cache
def vendor(name: str) -> dict[str, ast.AST]:
    """Top-level `NAME = value` and enum `(NAME:=value)` definitions of an autogen module, as AST nodes."""
    tree = ast.parse((_am_dir() / f"{name}.py").read_text())
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = node.value
        elif isinstance(node, ast.NamedExpr):
            out[node.target.id] = node.value
    return out


def const(table: dict, name: str) -> int:
    return _eval(table[name])


def macro_field(table: dict, name: str) -> Field:
    """The (lo, width) a field macro `lambda x: ((x & mask) << shift)` or `lambda x: x << shift` describes."""
    fn = table[name]
    assert isinstance(fn, ast.Lambda), name
    ones = _eval(fn.body, (1 << 32) - 1) & 0xFFFFFFFF
    lo = (ones & -ones).bit_length() - 1
    return Field(lo, (ones >> lo).bit_length())


# the vendor tables are parsed where a test reads them (a second or more each), not when the module is collected
NV, SOC15 = "pm4_nv", "pm4_soc15"
OPCODES = ["NOP", "DISPATCH_DIRECT", "DISPATCH_INDIRECT", "PRED_EXEC", "WRITE_DATA", "WAIT_REG_MEM",
           "INDIRECT_BUFFER", "COPY_DATA", "EVENT_WRITE", "RELEASE_MEM", "ACQUIRE_MEM", "SET_SH_REG",
           "SET_UCONFIG_REG", "SET_SH_REG_START", "SET_SH_REG_END", "SET_UCONFIG_REG_START", "SET_UCONFIG_REG_END"]


@pytest.mark.parametrize("table", [NV, SOC15], ids=["nv", "soc15"])
@pytest.mark.parametrize("name", OPCODES)
def test_pm4_opcodes(table, name):
    assert getattr(pm4, f"PACKET3_{name}") == const(vendor(table), f"PACKET3_{name}")


@pytest.mark.parametrize("table", [NV, SOC15], ids=["nv", "soc15"])
@pytest.mark.parametrize("op,n", [(0x10, 0), (0x76, 5), (0x49, 6), (0x3F, 0x3FFF)])
def test_pm4_header(table, op, n):
    table = vendor(table)
    fn = table["PACKET3"]
    env = dict(zip((a.arg for a in fn.args.args), (op, n), strict=True))
    ref = _eval(_subst(fn.body, env, table))
    assert pm4.packet3(op, [0] * (n + 1))[0] == ref
    assert pm4.body_dwords(ref) == n + 1 and pm4.HEADER_OPCODE.get(ref) == op


def _subst(node: ast.AST, env: dict[str, int], table: dict) -> ast.AST:
    """`node` with the macro's parameters replaced by `env` and other names by the table's constants."""
    class Sub(ast.NodeTransformer):
        def visit_Name(self, n):
            return ast.Constant(env[n.id] if n.id in env else const(table, n.id))
    return Sub().visit(ast.parse(ast.unparse(node), mode="eval")).body


PM4_FIELDS = {  # ours -> the vendor macro of the same field, in pm4_nv (gfx10+) and pm4_soc15 (gfx9)
    "WAIT_REG_MEM_FUNCTION": "WAIT_REG_MEM_FUNCTION", "WAIT_REG_MEM_MEM_SPACE": "WAIT_REG_MEM_MEM_SPACE",
    "WAIT_REG_MEM_OPERATION": "WAIT_REG_MEM_OPERATION", "WAIT_REG_MEM_ENGINE": "WAIT_REG_MEM_ENGINE",
    "WAIT_REG_MEM_POLL_INTERVAL": "PACKET3_WAIT_REG_MEM__POLL_INTERVAL",
    "RELEASE_MEM_DATA_SEL": ("PACKET3_RELEASE_MEM_DATA_SEL", "DATA_SEL"),
    "RELEASE_MEM_INT_SEL": ("PACKET3_RELEASE_MEM_INT_SEL", "INT_SEL"),
    "RELEASE_MEM_DST_SEL": ("PACKET3_RELEASE_MEM_DST_SEL", "DST_SEL"),
    "RELEASE_MEM_EVENT_INDEX": ("PACKET3_RELEASE_MEM_EVENT_INDEX", "EVENT_INDEX"),
    "RELEASE_MEM_CACHE_POLICY": ("PACKET3_RELEASE_MEM_CACHE_POLICY", None),
    "EVENT_INDEX": "PACKET3_EVENT_WRITE__EVENT_INDEX", "EVENT_TYPE": ("PACKET3_EVENT_WRITE__EVENT_TYPE", None),
    "INDIRECT_BUFFER_IB_SIZE": "PACKET3_INDIRECT_BUFFER__IB_SIZE",
    "INDIRECT_BUFFER_CHAIN": "PACKET3_INDIRECT_BUFFER__CHAIN",
    "INDIRECT_BUFFER_VALID": "PACKET3_INDIRECT_BUFFER__VALID", "INDIRECT_BUFFER_VMID": "PACKET3_INDIRECT_BUFFER__VMID",
    "WRITE_DATA_DST_SEL": "PACKET3_WRITE_DATA__DST_SEL", "WRITE_DATA_ADDR_INCR": "PACKET3_WRITE_DATA__ADDR_INCR",
    "WRITE_DATA_WR_CONFIRM": "PACKET3_WRITE_DATA__WR_CONFIRM",
    "WRITE_DATA_CACHE_POLICY": "PACKET3_WRITE_DATA__CACHE_POLICY",
    **{f"ACQUIRE_MEM_GCR_CNTL_{f}": (f"PACKET3_ACQUIRE_MEM_GCR_CNTL_{f}", None) for f in (
        "GLI_INV", "GL1_RANGE", "GLM_WB", "GLM_INV", "GLK_WB", "GLK_INV", "GLV_INV", "GL1_INV", "GL2_US",
        "GL2_RANGE", "GL2_DISCARD", "GL2_INV", "GL2_WB", "SEQ")},
    **{f"ACQUIRE_MEM_CP_COHER_CNTL_{f}": (None, f"PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_{f}") for f in (
        "TC_NC_ACTION_ENA", "TC_WB_ACTION_ENA", "TCL1_ACTION_ENA", "TC_ACTION_ENA", "SH_KCACHE_ACTION_ENA",
        "SH_ICACHE_ACTION_ENA")},
}
SINGLE_BITS = {  # ours -> vendor single-bit constants (value 1 << bit)
    "INDIRECT_BUFFER_VALID": ("INDIRECT_BUFFER_VALID", "INDIRECT_BUFFER_VALID"),
    **{f"RELEASE_MEM_GCR_{f}": (f"PACKET3_RELEASE_MEM_GCR_{f}", None) for f in (
        "GLM_WB", "GLM_INV", "GLV_INV", "GL1_INV", "GL2_US", "GL2_RANGE", "GL2_DISCARD", "GL2_INV", "GL2_WB", "SEQ")},
    "RELEASE_MEM_EXECUTE": ("PACKET3_RELEASE_MEM_EXECUTE", "EOP_EXEC"),
    "EOP_TC_WB_ACTION_EN": (None, "EOP_TC_WB_ACTION_EN"), "EOP_TC_ACTION_EN": (None, "EOP_TC_ACTION_EN"),
}


@pytest.mark.parametrize("ours", list(PM4_FIELDS))
def test_pm4_fields(ours):
    names = PM4_FIELDS[ours]
    nv_name, soc_name = (names, names) if isinstance(names, str) else names
    mine = getattr(pm4, ours)
    checked = 0
    for table, name in ((vendor(NV), nv_name), (vendor(SOC15), soc_name)):
        if name is None or name not in table:
            continue
        ref = macro_field(table, name)
        # the vendor's unmasked `x << shift` macros leave the width open: compare the low bit only
        assert (mine.lo, mine.width) == (ref.lo, ref.width) if ref.width < 32 - ref.lo else mine.lo == ref.lo, name
        checked += 1
    assert checked


@pytest.mark.parametrize("ours", list(SINGLE_BITS))
def test_pm4_bits(ours):
    mine = getattr(pm4, ours)
    for table, name in zip((NV, SOC15), SINGLE_BITS[ours], strict=True):
        if name is not None:
            assert mine.put(1) == const(vendor(table), name), name


@pytest.mark.parametrize("ours,vendor_name", [
    ("WAIT_REG_MEM_FUNCTION_ALWAYS", "ALWAYS_PASS"), ("WAIT_REG_MEM_FUNCTION_LT", "LESS_THAN_REF_VALUE"),
    ("WAIT_REG_MEM_FUNCTION_LE", "LESS_THAN_EQUAL_TO_THE_REF_VALUE"),
    ("WAIT_REG_MEM_FUNCTION_EQ", "EQUAL_TO_THE_REFERENCE_VALUE"),
    ("WAIT_REG_MEM_FUNCTION_NE", "NOT_EQUAL_REFERENCE_VALUE"),
    ("WAIT_REG_MEM_FUNCTION_GE", "GREATER_THAN_OR_EQUAL_REFERENCE_VALUE"),
    ("WAIT_REG_MEM_FUNCTION_GT", "GREATER_THAN_REFERENCE_VALUE")])
def test_wait_reg_mem_functions(ours, vendor_name):
    for table in (NV, SOC15):
        assert getattr(pm4, ours) == const(vendor(table), f"PACKET3_WAIT_REG_MEM__FUNCTION__{vendor_name}")


@pytest.mark.parametrize("ours,vendor_name", [
    ("DATA_SEL_NONE", "data_sel__mec_release_mem__none"),
    ("DATA_SEL_SEND_32_BIT_LOW", "data_sel__mec_release_mem__send_32_bit_low"),
    ("DATA_SEL_SEND_64_BIT_DATA", "data_sel__mec_release_mem__send_64_bit_data"),
    ("DATA_SEL_SEND_GPU_CLOCK_COUNTER", "data_sel__mec_release_mem__send_gpu_clock_counter"),
    ("INT_SEL_NONE", "int_sel__mec_release_mem__none"),
    ("INT_SEL_SEND_INTERRUPT_ONLY", "int_sel__mec_release_mem__send_interrupt_only"),
    ("INT_SEL_SEND_INTERRUPT_AFTER_WRITE_CONFIRM", "int_sel__mec_release_mem__send_interrupt_after_write_confirm"),
    ("DST_SEL_MEMORY_CONTROLLER", "dst_sel__mec_release_mem__memory_controller"),
    ("DST_SEL_TC_L2", "dst_sel__mec_release_mem__tc_l2"),
    ("EVENT_INDEX_END_OF_PIPE", "event_index__mec_release_mem__end_of_pipe"),
    ("CACHE_FLUSH_AND_INV_TS_EVENT", "CACHE_FLUSH_AND_INV_TS_EVENT"),
    ("EVENT_INDEX_CS_PARTIAL_FLUSH", "PACKET3_EVENT_WRITE__EVENT_INDEX__CS_PARTIAL_FLUSH"),
    ("WRITE_DATA_DST_SEL_MEMORY", "PACKET3_WRITE_DATA__DST_SEL__MEMORY"),
    ("WAIT_REG_MEM_MEM_SPACE_MEMORY", "PACKET3_WAIT_REG_MEM__MEM_SPACE__MEMORY_SPACE"),
    ("WAIT_REG_MEM_OPERATION_WR_WAIT_WR_REG", "PACKET3_WAIT_REG_MEM__OPERATION__WR_WAIT_WR_REG")])
def test_pm4_values(ours, vendor_name):
    assert getattr(pm4, ours) == const(vendor(NV), vendor_name)


# -- registers: gc register tables (offset from the GC segment-0 base, which navi/vega_offsets give) ------------------
GC = {9: ("gc_9_4_3", "vega_offsets"), 11: ("gc_11_0_0", "navi_offsets"), 12: ("gc_12_0_0", "navi_offsets")}
REGISTERS = ["COMPUTE_DISPATCH_INITIATOR", "COMPUTE_DIM_X", "COMPUTE_DIM_Z", "COMPUTE_START_X", "COMPUTE_START_Y",
             "COMPUTE_START_Z", "COMPUTE_NUM_THREAD_X", "COMPUTE_NUM_THREAD_Y", "COMPUTE_NUM_THREAD_Z",
             "COMPUTE_PIPELINESTAT_ENABLE", "COMPUTE_PERFCOUNT_ENABLE", "COMPUTE_PGM_LO", "COMPUTE_PGM_HI",
             "COMPUTE_DISPATCH_SCRATCH_BASE_LO", "COMPUTE_DISPATCH_SCRATCH_BASE_HI", "COMPUTE_PGM_RSRC1",
             "COMPUTE_PGM_RSRC2", "COMPUTE_RESOURCE_LIMITS", "COMPUTE_TMPRING_SIZE", "COMPUTE_RESTART_X",
             "COMPUTE_RESTART_Y", "COMPUTE_RESTART_Z", "COMPUTE_USER_DATA_0"]


@functools.cache
def gc_table(name: str) -> dict:
    return ast.literal_eval(vendor("regs")[name])


def gc_register(gfx: int, name: str) -> tuple[int, dict]:
    table, offsets = GC[gfx]
    regs = gc_table(table)
    offset, base_idx, fields = regs[f"reg{name}"]
    return const(vendor(offsets), f"GC_BASE__INST0_SEG{base_idx}") + offset, fields


@pytest.mark.parametrize("gfx", list(GC))
@pytest.mark.parametrize("name", REGISTERS)
def test_register_offsets(gfx, name):
    assert getattr(pm4, name) == gc_register(gfx, name)[0]


@pytest.mark.parametrize("gfx", list(GC))
def test_register_rsrc3_and_user_data(gfx):
    assert pm4.compute_pgm_rsrc3(gfx) == gc_register(gfx, "COMPUTE_PGM_RSRC3")[0]
    assert pm4.COMPUTE_USER_DATA_0 + pm4.NUM_USER_DATA - 1 == gc_register(gfx, "COMPUTE_USER_DATA_15")[0]


REGISTER_FIELDS = [("DISPATCH_INITIATOR_COMPUTE_SHADER_EN", "COMPUTE_DISPATCH_INITIATOR", "compute_shader_en"),
                   ("DISPATCH_INITIATOR_PARTIAL_TG_EN", "COMPUTE_DISPATCH_INITIATOR", "partial_tg_en"),
                   ("DISPATCH_INITIATOR_FORCE_START_AT_000", "COMPUTE_DISPATCH_INITIATOR", "force_start_at_000"),
                   ("DISPATCH_INITIATOR_USE_THREAD_DIMENSIONS", "COMPUTE_DISPATCH_INITIATOR", "use_thread_dimensions"),
                   ("DISPATCH_INITIATOR_CS_W32_EN", "COMPUTE_DISPATCH_INITIATOR", "cs_w32_en"),
                   ("NUM_THREAD_PARTIAL", "COMPUTE_NUM_THREAD_X", "num_thread_partial"),
                   ("PGM_RSRC1_PRIV", "COMPUTE_PGM_RSRC1", "priv"),
                   ("PGM_RSRC2_SCRATCH_EN", "COMPUTE_PGM_RSRC2", "scratch_en"),
                   ("PGM_RSRC2_USER_SGPR", "COMPUTE_PGM_RSRC2", "user_sgpr"),
                   ("PGM_RSRC2_TGID_X_EN", "COMPUTE_PGM_RSRC2", "tgid_x_en"),
                   ("PGM_RSRC2_TGID_Y_EN", "COMPUTE_PGM_RSRC2", "tgid_y_en"),
                   ("PGM_RSRC2_TGID_Z_EN", "COMPUTE_PGM_RSRC2", "tgid_z_en"),
                   ("PGM_RSRC2_TG_SIZE_EN", "COMPUTE_PGM_RSRC2", "tg_size_en"),
                   ("PGM_RSRC2_TIDIG_COMP_CNT", "COMPUTE_PGM_RSRC2", "tidig_comp_cnt"),
                   ("PGM_RSRC2_LDS_SIZE", "COMPUTE_PGM_RSRC2", "lds_size"),
                   ("RESOURCE_LIMITS_WAVES_PER_SH", "COMPUTE_RESOURCE_LIMITS", "waves_per_sh"),
                   ("TMPRING_SIZE_WAVES", "COMPUTE_TMPRING_SIZE", "waves")]


@pytest.mark.parametrize("gfx", list(GC))
@pytest.mark.parametrize("ours,reg,field", REGISTER_FIELDS)
def test_register_fields(gfx, ours, reg, field):
    fields = gc_register(gfx, reg)[1]
    if field not in fields:
        assert ours == "DISPATCH_INITIATOR_CS_W32_EN" and gfx == 9  # wave32 is gfx10+
        return
    lo, hi = fields[field]
    assert getattr(pm4, ours) == Field(lo, hi - lo + 1)


@pytest.mark.parametrize("gfx", list(GC))
def test_tmpring_wavesize(gfx):
    lo, hi = gc_register(gfx, "COMPUTE_TMPRING_SIZE")[1]["wavesize"]
    assert pm4.TMPRING_SIZE_WAVESIZE[gfx] == Field(lo, hi - lo + 1)


# -- SDMA --------------------------------------------------------------------------------------------------------------
SDMA = {4: "sdma_4_0_0", 5: "sdma_5_0_0", 6: "sdma_6_0_0"}


@pytest.mark.parametrize("version", list(SDMA))
@pytest.mark.parametrize("name", ["NOP", "COPY", "WRITE", "INDIRECT", "FENCE", "TRAP", "POLL_REGMEM", "CONST_FILL",
                                  "TIMESTAMP"])
def test_sdma_opcodes(version, name):
    assert getattr(sdma, f"SDMA_OP_{name}") == const(vendor(SDMA[version]), f"SDMA_OP_{name}")


@pytest.mark.parametrize("version", list(SDMA))
def test_sdma_subops(version):
    t = vendor(SDMA[version])
    assert sdma.SDMA_SUBOP_COPY_LINEAR == const(t, "SDMA_SUBOP_COPY_LINEAR")
    assert sdma.SDMA_SUBOP_WRITE_LINEAR == const(t, "SDMA_SUBOP_WRITE_LINEAR")
    assert sdma.SDMA_SUBOP_TIMESTAMP_GET_GLOBAL == const(t, "SDMA_SUBOP_TIMESTAMP_GET_GLOBAL")


OTHER_PACKETS = {"BC", "SUBWIN", "GLOBAL", "LARGE"}  # first tokens of longer packet names sharing a prefix


def sdma_vendor_field(t: dict, packet: str, field: str) -> Field | None:
    """SDMA_PKT_<packet>_<DWORD NAME>_<field>_{offset,mask,shift} of a vendor table, or None."""
    prefix, found = f"SDMA_PKT_{packet}_", []
    for k in t:
        if k.startswith(prefix) and k.endswith("_offset"):
            tokens = k[len(prefix):-len("_offset")].split("_")
            i = next((i for i, tok in enumerate(tokens) if tok != tok.upper()), len(tokens))
            if 0 < i and tokens[0] not in OTHER_PACKETS and "_".join(tokens[i:]) == field:
                found.append(k[:-len("offset")])
    if not found:
        return None
    assert len(found) == 1, found
    stem = found[0]
    mask, shift = const(t, stem + "mask"), const(t, stem + "shift")
    return Field(shift, mask.bit_length(), const(t, stem + "offset"))


@pytest.mark.parametrize("version", list(SDMA))
@pytest.mark.parametrize("packet", list(sdma.PACKETS))
def test_sdma_fields(version, packet):
    t = vendor(SDMA[version])
    for name, mine in sdma.PACKETS[packet].items():
        if name == "count" and packet in ("COPY_LINEAR", "CONSTANT_FILL"):
            mine = mine._replace(width=sdma.count_bits(version))
        ref = sdma_vendor_field(t, packet, name)
        if ref is None:
            assert (packet, name, version) == ("FENCE", "mtype", 4), f"{packet}.{name} missing in SDMA v{version}"
            continue
        assert mine == ref, f"{packet}.{name} on SDMA v{version}"
    assert sdma_vendor_field(t, packet, "op") == sdma.HEADER_OP
    assert sdma_vendor_field(t, packet, "sub_op") == sdma.HEADER_SUB_OP


# -- encoders: the packets TINYGRAD_CLIENT.md lists for gfx11 ----------------------------------------------------------
def test_encoders_gfx11_examples():
    assert pm4.wait_reg_mem(0x1234_5678_9ABC, 7) == [0xC0053C00, 0x15, 0x56789ABC, 0x1234, 7, 0xFFFFFFFF, 4]
    assert pm4.acquire_mem(11) == [0xC0065800, 0, 0xFFFFFFFF, 0xFFFFFFFF, 0, 0, 0, 0xC3F1]
    assert pm4.acquire_mem(11, pm4.GCR_CNTL_INVALIDATE)[-1] == 0x3F0
    assert pm4.acquire_mem(9)[:1] == [0xC0055800] and pm4.acquire_mem(9)[-1] == 0xA
    rm = pm4.release_mem(11, 0x10_0000_1000, 5, pm4.DATA_SEL_SEND_32_BIT_LOW,
                         pm4.INT_SEL_SEND_INTERRUPT_AFTER_WRITE_CONFIRM, 9)
    assert rm == [0xC0064900, 0x70F514, 1 << 29 | 2 << 24, 0x1000, 0x10, 5, 0, 9]
    assert pm4.release_mem(9, 0, 0, 0, 2, 9)[-1] == 0  # gfx9: no context id
    assert pm4.event_write(pm4.CS_PARTIAL_FLUSH, pm4.EVENT_INDEX_CS_PARTIAL_FLUSH) == [0xC0004600, 0x407]
    assert pm4.indirect_buffer(0x2000, 12) == [0xC0023F00, 0x2000, 0, 12 | 1 << 23]
    assert pm4.dispatch_initiator(11, True) == 0x8005 and pm4.dispatch_initiator(9, False) == 0x5
    assert pm4.set_regs(pm4.COMPUTE_PGM_LO, 1, 2) == [0xC0027600, 0x20C, 1, 2]
    assert pm4.set_regs(0xC010, 3)[:2] == [0xC0017900, 0x10]
    assert sdma.copy_linear(6, 0x30_0000_0000, 0x10_0000_0040, 256) == [1, 255, 0, 0x40, 0x10, 0, 0x30]
    assert sdma.fence(6, 0x1000, 7) == [0x30005, 0x1000, 0, 7] and sdma.fence(4, 0x1000, 7)[0] == 5
    assert sdma.trap(12) == [6, 12]
    assert sdma.poll_regmem(0x1000, 3) == [0xD0000008, 0x1000, 0, 3, 0xFFFFFFFF, 0x0FFF0004]
    assert sdma.timestamp(0x1008) == [0x20D, 0x1008, 0]
    assert sdma.write_untiled(0x40, [1, 2]) == [2, 0x40, 0, 1, 1, 2]


@pytest.mark.parametrize("bad", [lambda: pm4.set_regs(0x1000, 1), lambda: pm4.packet3(0x10, []),
                                 lambda: pm4.indirect_buffer(2, 1), lambda: sdma.copy_linear(4, 0, 0, (1 << 22) + 1),
                                 lambda: sdma.copy_linear(6, 0, 0, 0), lambda: sdma.constant_fill(6, 0, 0, 6),
                                 lambda: sdma.timestamp(4), lambda: sdma.write_untiled(0, [])])
def test_encoders_reject_bad_input(bad):
    with pytest.raises(ValueError):
        bad()
