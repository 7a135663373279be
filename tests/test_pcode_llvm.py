"""The LLVM backend (emu.pcode.llvmback) against the reference backend (emu.pcode.pyback), bit for bit: outputs,
masks, NaN payloads and signs, register files written, and the exception when pyback raises.

Every VALU / SALU instruction (VOP1 VOP2 VOP3 VOP3SD VOP3P VOPC SOP1 SOP2 SOPC SOPK) both backends take, in the three
families, with operands drawn around float specials (signed zeros, infinities, quiet and signaling NaNs with
payloads, denormals, extreme normals, packed halves), random MODE rounding bits, random encoding fields (OPSEL, NEG,
CLAMP, ...), random ACTIVE lanes, wave32 and wave64 (RDNA). The default run draws instructions at random (each
example compiles one instruction: about 0.1 s); HWEMU_LLVM_FULL=1 runs every instruction (minutes).
"""
from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from emu.amd import isa
from emu.pcode import Unsupported, compile_op
from emu.pcode.llvmback import VALU_SALU, coverage, standalone

ARCHS = {"rdna3": "gfx1100", "rdna4": "gfx1201", "cdna": "gfx942"}
FULL = os.environ.get("HWEMU_LLVM_FULL") == "1"
_DATA = {"S0", "S1", "S2", "D0", "D1", "M0", "SCC", "PC", "VCC", "EXEC", "SIMM16", "SIMM32", "TRAPSTS.INVALID",
         "WAVE_STATUS.PRIV", "WAVE_MODE.CSP"}


@functools.cache
def instructions(arch: str) -> list[tuple[str, str]]:
    """(space, name) of every VALU / SALU instruction pyback compiles for arch (lane-serial ones excluded)."""
    out = []
    for op in sorted(isa.load(arch).ops.values(), key=lambda o: (o.enc, o.value)):
        if op.enc not in VALU_SALU:
            continue
        try:
            sem = compile_op(arch, op.enc, op.name)
        except Unsupported:
            continue
        if not sem.serial:
            out.append((op.enc, op.name))
    return out


@functools.cache
def native(arch: str, space: str, name: str, lanes: int, mode: int | None = None):
    """The standalone LLVM function (MODE compiled in when given), or None when the backend does not take the
    instruction."""
    sem = compile_op(arch, space, name)
    try:
        return standalone(sem.ir, lanes, mode)
    except Unsupported:
        return None


# ---- operands ------------------------------------------------------------------------------------------------------

def _float_specials(bits: int, mant: int) -> list[int]:
    e = bits - 1 - mant
    sign, inf, q = 1 << (bits - 1), ((1 << e) - 1) << mant, 1 << (mant - 1)
    one = ((1 << (e - 1)) - 1) << mant
    vals = [0, inf, inf | q, inf | 1, inf | q | 5, inf | (q >> 1), 1, (1 << mant) - 1, 1 << mant, inf - 1, one,
            one | 1, one - 1, one + (1 << mant), (one - (1 << mant)) | (1 << (mant - 1))]
    return vals + [v | sign for v in vals]


F16, BF16, F32, F64 = (_float_specials(16, 10), _float_specials(16, 7), _float_specials(32, 23),
                       _float_specials(64, 52))


@functools.cache
def word(bits: int) -> st.SearchStrategy[int]:
    """Raw bits of one operand: float specials of the widths that fit, packed halves, or any value (built once per
    width: hypothesis validates a new strategy at its first draw, which cost more than the draws)."""
    m = (1 << bits) - 1
    anyv = st.integers(0, m)
    if bits == 16:
        return st.one_of(st.sampled_from(F16), st.sampled_from(BF16), anyv)
    if bits == 32:
        half = st.one_of(st.sampled_from(F16), st.sampled_from(BF16))
        return st.one_of(st.sampled_from(F32), st.builds(lambda h, lo: h << 16 | lo, half, half),
                         st.integers(0, 64), anyv)
    if bits == 64:
        return st.one_of(st.sampled_from(F64), st.builds(lambda h, lo: h << 32 | lo, word(32), word(32)), anyv)
    if bits > 64:
        return st.builds(lambda parts: sum(p << (64 * i) for i, p in enumerate(parts)) & m,
                         st.lists(word(64), min_size=(bits + 63) // 64, max_size=(bits + 63) // 64))
    return anyv


@functools.cache
def lanes_of(bits: int, lanes: int) -> st.SearchStrategy:
    """A per-lane operand as pyback takes it: (lanes,) uint64, or (dwords, lanes) above 64 bits."""
    def make(vals):
        if bits <= 64:
            return np.array(vals, np.uint64)
        return np.array([[(v >> (32 * k)) & 0xFFFFFFFF for v in vals] for k in range((bits + 31) // 32)], np.uint64)
    pool = st.lists(word(bits), min_size=1, max_size=6)
    return st.builds(lambda p, idx: make([p[i % len(p)] for i in idx]), pool,
                     st.lists(st.integers(0, 5), min_size=lanes, max_size=lanes))


@st.composite
def state(draw, sem, lanes: int) -> dict:
    f = sem.ir
    s: dict = {}
    for name, bits in f.inputs.items():
        if name == "MODE":
            s[name] = draw(st.integers(0, 15)) | draw(st.sampled_from([0, 1 << 9]))
        elif not f.vector or name in f.masks:
            s[name] = draw(word(bits)) if bits in (16, 32, 64) else draw(st.integers(0, (1 << bits) - 1))
        elif name in _DATA:
            s[name] = draw(lanes_of(bits, lanes))
        elif name in ("SRC0", "SRC1", "SRC2", "VDST", "DST"):
            s[name] = draw(st.integers(0, 20))
        else:  # encoding fields: OPSEL, NEG, CLAMP, ABS, byte / word selects, ...
            s[name] = draw(st.integers(0, (1 << min(bits, 8)) - 1))
    if "MODE" not in s:
        s["MODE"] = draw(st.integers(0, 15))
    if f.vector and draw(st.booleans()):
        s["ACTIVE"] = np.array(draw(st.lists(st.booleans(), min_size=lanes, max_size=lanes)), bool)
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if "VGPR" in f.files:
        s["VGPR"] = rng.integers(0, 2**32, (lanes, 64), dtype=np.uint64).astype(np.uint32)
    if "SGPR" in f.files:
        s["SGPR"] = rng.integers(0, 2**32, 128, dtype=np.uint64).astype(np.uint32)
    if "HW_REGISTERS" in f.files:
        s["HW_REGISTERS"] = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    if "HwRegWriteMask" in f.files:
        s["HwRegWriteMask"] = lambda reg, priv: (np.asarray(reg, np.uint64) * np.uint64(0x9E3779B9)
                                                 ^ np.uint64(0xFFFF00FF)) & np.uint64(0xFFFFFFFF)
    return s


def _copy(s: dict) -> dict:
    return {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in s.items()}


def _run(fn, s: dict, lanes: int):
    try:
        return fn(s, lanes), None
    except Exception as e:  # noqa: BLE001 - the two backends must raise alike
        return None, f"{type(e).__name__}: {e}"


def check(arch: str, space: str, name: str, lanes: int, data, mode: int | None = None) -> None:
    """One drawn state through both backends; `mode`: MODE a compile-time constant of the LLVM code."""
    sem = compile_op(arch, space, name)
    fn = native(arch, space, name, lanes, mode)
    assume(fn is not None)
    s = data.draw(state(sem, lanes))
    if mode is not None:
        s["MODE"] = mode
    s_ref, s_llvm = _copy(s), _copy(s)
    want, want_err = _run(sem, s_ref, lanes)
    got, got_err = _run(fn, s_llvm, lanes)
    assert got_err == want_err, f"{name}: pyback {want_err!r}, llvm {got_err!r}"
    if want_err:
        return
    assert set(got) == set(want), name
    for k in want:
        w, g = np.asarray(want[k]), np.asarray(got[k])
        assert w.shape == g.shape and np.array_equal(w.astype(np.uint64), g.astype(np.uint64)), \
            f"{name} {k}: pyback {_hex(w)} llvm {_hex(g)} (inputs {_show(s, sem)})"
    for file in ("VGPR", "SGPR", "HW_REGISTERS"):
        if file in s:
            assert np.array_equal(s_ref[file], s_llvm[file]), f"{name}: {file} differs"


def _hex(a: np.ndarray) -> str:
    return str([hex(int(x)) for x in a.reshape(-1)[:64]]) if a.ndim else hex(int(a))


def _show(s: dict, sem) -> str:
    return ", ".join(f"{k}={_hex(np.asarray(v))}" for k, v in s.items() if k in sem.ir.inputs or k == "MODE")


# ---- tests ---------------------------------------------------------------------------------------------------------

CASES = [(fam, lanes) for fam in ARCHS for lanes in ((32, 64) if fam != "cdna" else (64,))]
_SLOW = [HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large]


@pytest.mark.parametrize("fam,lanes", CASES)
@settings(max_examples=12, suppress_health_check=_SLOW, deadline=None)
@given(data=st.data())
def test_random_instructions(fam: str, lanes: int, data) -> None:
    """Instructions drawn at random (each compiles once), operands drawn per example."""
    arch = ARCHS[fam]
    space, name = data.draw(st.sampled_from(instructions(arch)), label="instruction")
    check(arch, space, name, lanes, data)


# the ops whose float semantics are most intricate: MODE rounding, NaN order, conversions, libm
KEY_OPS = {"rdna3": ["VOP2.V_ADD_F32", "VOP2.V_SUB_F16", "VOP2.V_MUL_F32", "VOP3.V_FMA_F32", "VOP3.V_FMA_F16",
                     "VOP3.V_FMA_F64", "VOP3.V_DIV_FMAS_F32", "VOP1.V_SQRT_F32", "VOP1.V_RSQ_F16", "VOP1.V_EXP_F32",
                     "VOP1.V_LOG_F16", "VOP1.V_SIN_F32", "VOP1.V_CVT_F16_F32", "VOP1.V_CVT_F32_F64",
                     "VOP1.V_CVT_I32_F32", "VOP3.V_LDEXP_F32", "VOP1.V_FRACT_F64", "VOP1.V_FREXP_MANT_F16",
                     "VOPC.V_CMP_CLASS_F16", "VOP3.V_MED3_F32", "VOP2.V_MAX_F32", "VOP3P.V_PK_FMA_F16",
                     "VOP3.V_CVT_PK_RTZ_F16_F32", "VOP3P.V_DOT2_F32_BF16", "VOP3.V_DIV_FIXUP_F32",
                     "VOP3.V_ADD_F64", "SOP2.S_ADD_F32", "SOP2.S_FMAC_F16", "VOP3.V_TRIG_PREOP_F64"]}


@pytest.mark.parametrize("key", KEY_OPS["rdna3"])
@settings(max_examples=15, suppress_health_check=_SLOW, deadline=None)
@given(data=st.data())
def test_float_ops(key: str, data) -> None:
    space, name = key.split(".")
    if (space, name) not in instructions("gfx1100"):
        pytest.skip(f"{key} is not compiled by pyback")
    # f64 arithmetic is taken only under a constant nearest-even MODE (directed f64 rounding stays pyback's)
    mode = None if native("gfx1100", space, name, 32) is not None else 0xF0
    if native("gfx1100", space, name, 32, mode) is None:
        pytest.skip(f"{key} is not taken by both backends")
    check("gfx1100", space, name, 32, data, mode)


# MODE as the wave engine compiles it in: nearest even with denormals kept (IEEE mode on / off), and each
# directed rounding of f32 and f16
CONST_MODES = (0x3F0, 0xF0, 0x3F5, 0x3FA, 0x3FF)
FAST_OPS = ["VOP2.V_ADD_F32", "VOP2.V_SUB_F32", "VOP2.V_MUL_F32", "VOP3.V_FMA_F32", "VOP2.V_FMAC_F32",
            "VOP2.V_ADD_F16", "VOP2.V_MUL_F16", "VOP3.V_FMA_F16", "VOP3P.V_PK_FMA_F16", "VOP3.V_FMA_F64",
            "VOP2.V_MIN_F32", "VOP2.V_MAX_F32", "VOP3.V_MIN3_F32", "VOP2.V_MAX_F16", "VOP3.V_MED3_F32",
            "VOP1.V_CVT_F32_I32", "VOP1.V_CVT_F32_U32", "VOP1.V_CVT_I32_F32", "VOP1.V_CVT_U32_F32",
            "VOP1.V_CVT_F16_F32", "VOP1.V_CVT_F32_F16", "VOP1.V_CVT_F64_F32", "VOP1.V_CVT_F32_F64",
            "VOPC.V_CMP_LT_F32", "VOPC.V_CMP_NEQ_F32", "VOPC.V_CMP_CLASS_F32", "VOP3.V_DIV_FMAS_F32",
            "VOP1.V_SQRT_F32", "VOP1.V_RCP_F32", "VOP2.V_LDEXP_F16"]


@pytest.mark.parametrize("mode", CONST_MODES)
@pytest.mark.parametrize("key", FAST_OPS)
@settings(max_examples=12, suppress_health_check=_SLOW, deadline=None)
@given(data=st.data())
def test_constant_mode(key: str, mode: int, data) -> None:
    """MODE a compile-time constant (the wave engine's case): nearest even takes the host's IEEE operations, a
    directed mode only its own rounding; NaN payloads, signed zeros, denormals and infinities as pyback."""
    space, name = key.split(".")
    if (space, name) not in instructions("gfx1100"):
        pytest.skip(f"{key} is not compiled by pyback")
    if native("gfx1100", space, name, 32, mode) is None:  # f64 under a directed FP_ROUND[3:2]
        pytest.skip(f"{key} is not taken by the LLVM backend under MODE {mode:#x}")
    check("gfx1100", space, name, 32, data, mode)


def _every() -> list:
    if not FULL:
        return []
    return [(ARCHS[fam], lanes, sp, nm) for fam, lanes in CASES for sp, nm in instructions(ARCHS[fam])]


@pytest.mark.skipif(not FULL, reason="HWEMU_LLVM_FULL=1 runs every instruction")
@pytest.mark.parametrize("arch,lanes,space,name", _every())
@settings(max_examples=30, suppress_health_check=_SLOW, deadline=None)
@given(data=st.data())
def test_every_instruction(arch: str, lanes: int, space: str, name: str, data) -> None:
    check(arch, space, name, lanes, data)


EXCLUDED = ("f64 fma with a scale", "float op mf_decode", "float op mf_encode", "float op fconv_sr",
            "lane-serial read-modify-write memory op", "float to 64-bit integer", "f64 directed rounding")


def test_coverage_sop() -> None:
    """The backend takes every scalar ALU op pyback compiles (the full report: python -m emu.pcode.llvmback
    --coverage); what it leaves are documented exclusions."""
    r = coverage("gfx1100", ("SOP1", "SOP2", "SOPC", "SOPK"))
    assert r["taken"] and not r["failing"], r["failing"]
    for fam in ARCHS:
        assert all(reason.startswith(EXCLUDED) for reason in coverage(ARCHS[fam], ("VOP1",))["failing"].values())


# ---- the engine's object cache -----------------------------------------------------------------------------------

_CACHE_PROBE = r"""
import ctypes, sys
from emu.pcode import compile_op
from emu.pcode.llvmback import emit_module, engine
jit = engine()
key = sys.argv[1]
addr = jit.load(key) if sys.argv[2] == "load" else None
if addr is None:
    mod = emit_module([compile_op("gfx1100", "VOP2", "V_ADD_F32").ir], 32)
    mod.triple, mod.data_layout = jit.triple, jit.data_layout
    addr = jit.compile(mod, "probe", key)
src = (ctypes.c_uint32 * 65)(*([0x3FC00000] * 32 + [0x40000000] * 32 + [0]))  # S0 S1 MODE
dst = (ctypes.c_uint32 * 32)()
ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(addr)(src, dst)
print(jit.stats["compiled"], jit.stats["disk_hits"], hex(dst[0]), hex(dst[31]))
"""


def _probe(tmp_path, key: str, how: str = "compile") -> list[str]:
    import subprocess
    import sys
    env = {**os.environ, "HWEMU_CACHE": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", _CACHE_PROBE, key, how], env=env, capture_output=True, text=True,
                         check=True)
    return out.stdout.split()


def test_object_cache(tmp_path) -> None:
    """A second process loads the object compiled under the same key from $HWEMU_CACHE/llvm instead of compiling;
    a truncated or corrupted cache file is compiled again (and rewritten), never loaded."""
    sum_ = "0x40600000"  # 1.5 + 2.0 = 3.5
    assert _probe(tmp_path, "k1") == ["1", "0", sum_, sum_]
    files = list((tmp_path / "llvm").glob("*.o"))
    assert len(files) == 1
    assert _probe(tmp_path, "k1") == ["0", "1", sum_, sum_]  # compile(): from disk
    assert _probe(tmp_path, "k1", "load") == ["0", "1", sum_, sum_]  # load(): without building the module
    good = files[0].read_bytes()
    for bad in (good[: len(good) // 2], good[:-1] + bytes([good[-1] ^ 1]), b"", b"junk"):
        files[0].write_bytes(bad)
        assert _probe(tmp_path, "k1", "load") == ["1", "0", sum_, sum_]
        assert files[0].read_bytes() == good
    assert _probe(tmp_path, "k2") == ["1", "0", sum_, sum_]  # another key: its own object
    assert len(list((tmp_path / "llvm").glob("*.o"))) == 2


_BATCH_PROBE = r"""
import ctypes, sys
from emu.pcode import compile_op
from emu.pcode.llvmback import emit_module, engine
jit = engine()
keys = sys.argv[1].split(",")
if sys.argv[2] == "all":
    mod = emit_module([compile_op("gfx1100", "VOP2", "V_ADD_F32").ir], 32)
    mod.triple, mod.data_layout = jit.triple, jit.data_layout
    addrs = jit.compile_all({k: mod for k in keys}, "probe")
else:
    addrs = {k: jit.load(k) for k in keys}
out = [jit.stats["compiled"], jit.stats["disk_hits"]]
for k in keys:
    src = (ctypes.c_uint32 * 65)(*([0x3FC00000] * 32 + [0x40000000] * 32 + [0]))  # S0 S1 MODE
    dst = (ctypes.c_uint32 * 32)()
    if addrs[k]:
        ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(addrs[k])(src, dst)
    out.append(hex(dst[31]) if addrs[k] else "miss")
print(*out)
"""


def _batch(tmp_path, keys: str, how: str) -> list[str]:
    import subprocess
    import sys
    env = {**os.environ, "HWEMU_CACHE": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", _BATCH_PROBE, keys, how], env=env,
                         capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_keys_compiled_together_share_one_object(tmp_path) -> None:
    """compile_all compiles the keys not cached as one object, kept once on disk: another process loads any of its
    keys from it (each key's file names it); a damaged object or key file is compiled again, never loaded."""
    ok = "0x40600000"  # 1.5 + 2.0 = 3.5
    assert _batch(tmp_path, "a,b", "all") == ["2", "0", ok, ok]
    objects = list((tmp_path / "llvm").glob("b*.o"))
    assert len(objects) == 1 and len(list((tmp_path / "llvm").glob("*.o"))) == 3  # the object and two key files
    assert _batch(tmp_path, "b", "load") == ["0", "1", ok]
    assert _batch(tmp_path, "a,b", "load") == ["0", "1", ok, ok]  # one object, read from disk once
    assert _batch(tmp_path, "a,c", "all") == ["1", "1", ok, ok]  # only what is not cached is compiled
    good = objects[0].read_bytes()
    for bad in (good[: len(good) // 2], good[:-1] + bytes([good[-1] ^ 1]), b""):
        objects[0].write_bytes(bad)
        assert _batch(tmp_path, "a", "load") == ["0", "0", "miss"]
    assert _batch(tmp_path, "a,b", "all") == ["2", "0", ok, ok]
    link = next(f for f in (tmp_path / "llvm").glob("*.o") if f.read_bytes().startswith(b"HWEMULN1"))
    name = link.read_bytes().split()[0][len(b"HWEMULN1"):]
    for bad in (b"HWEMULN1", b"HWEMULN1../../../etc/passwd x", b"HWEMULN1" + name + b" not-its-symbol"):
        link.write_bytes(bad)
        assert sorted(_batch(tmp_path, k, "load")[2] for k in "ab") == [ok, "miss"]  # only the damaged key's


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=120), st.booleans())
def test_damaged_key_files_are_never_loaded(body: bytes, linked: bool) -> None:
    """A key's cache file holding anything (a link to another object, or an object, cut or damaged) is read as a miss
    or as a checked object, never raises."""
    import tempfile
    from unittest import mock

    from emu.pcode.llvmjit import _LINK, _MAGIC, engine
    jit = engine()
    with tempfile.TemporaryDirectory() as d, mock.patch.dict(os.environ, {"HWEMU_CACHE": d}):
        jit.path("k").parent.mkdir(parents=True)
        jit.path("k").write_bytes((_LINK if linked else _MAGIC) + body)
        (Path(d) / "llvm" / f"b{'0' * 40}.o").write_bytes(_MAGIC + body)
        found = jit._read("k")
        if found is not None:
            ident, obj, symbols = found
            assert hashlib.sha256(obj).digest() in body and jit._symbol("k") in symbols


def test_concurrent_compiles_take_turns(tmp_path) -> None:
    """A process that compiles a key while another holds that key's lock waits for it, then loads the object the
    other wrote instead of compiling it again (pytest-xdist workers compile alike handlers at the same time)."""
    import fcntl
    import shutil
    import subprocess
    import sys

    from emu.pcode.llvmjit import engine
    digest = engine()._digest
    other = next(k for k in (f"k{i}" for i in range(2, 99)) if digest(k)[:2] != digest("k1")[:2])
    mine, elsewhere = tmp_path / "mine", tmp_path / "elsewhere"
    lock = mine / "llvm" / "locks" / digest("k1")[:2]
    lock.parent.mkdir(parents=True)
    with open(lock, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        waiter = subprocess.Popen([sys.executable, "-c", _CACHE_PROBE, "k1", "compile"],
                                  env={**os.environ, "HWEMU_CACHE": str(mine)}, stdout=subprocess.PIPE, text=True)
        assert _probe(mine, other) == ["1", "0", "0x40600000", "0x40600000"]  # another lock: not held up
        assert _probe(elsewhere, "k1")[:2] == ["1", "0"]
        obj = next((elsewhere / "llvm").glob("*.o"))
        shutil.copy(obj, mine / "llvm" / obj.name)  # what the lock's holder compiled and wrote
        assert waiter.poll() is None  # still waiting for the lock
    out, _ = waiter.communicate(timeout=120)
    assert out.split() == ["0", "1", "0x40600000", "0x40600000"]
