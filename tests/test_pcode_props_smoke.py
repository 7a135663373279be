"""Smoke property: every compiled instruction of rdna3, rdna4 and cdna runs on random inputs without raising.

Every name in sem.reads gets a random value of the shape the calling contract gives it (see emu.pcode): lane
arrays for vector operands (dword rows beyond 64 bits), Python ints for masks and scalar operands, a fake memory
that records accesses, register files, a buffer format and the HwRegWriteMask callout. Register-index-like
operands (M0, DST, SRC0 ...; ADDR and VDATA too when the op reads VGPR: DS_PERMUTE / *_LOAD_BLOCK use them as
register numbers, not a byte address / data) are kept small so indices stay inside the register files. The only
exception accepted is Unsupported, which the contract raises for a case the semantics do not model. Memory
accesses must touch only ACTIVE lanes.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pcode_refs import PROPS, SEEDS

FAMS = ("rdna3", "rdna4", "cdna")
DATA = {"S0", "S1", "S2", "D0", "D1", "DATA", "DATA2", "RETURN_DATA", "VDATA", "ADDR", "ADDR_BASE", "SDATA",
        "SIMM16", "SIMM32", "MODE", "PC"}  # full-width random; every other plain name is a small (index-like) value


class FakeMem:
    """Byte-addressed memory answering any address with a value derived from it; records every access."""

    def __init__(self, active: np.ndarray):
        self.active, self.log = active, []

    def _check(self, kind: str, addr, bits: int, act):
        act = np.asarray(act, bool)
        assert bits in (8, 16, 32, 64), f"{kind} of {bits} bits"
        if act.shape == self.active.shape:  # vector access: only ACTIVE lanes
            assert not np.any(act & ~self.active), f"{kind} touches inactive lanes"
        self.log.append((kind, bits, int(act.sum())))

    def load(self, addr, bits: int, act):
        self._check("load", addr, bits, act)
        a = np.asarray(addr, np.uint64)
        return ((a * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(7)) & np.uint64((1 << bits) - 1)

    def store(self, addr, bits: int, value, act):
        self._check("store", addr, bits, act)
        assert np.shape(value) == np.shape(addr), "stored value and addresses differ in shape"


class FakeFormat:
    """A buffer format of four 32-bit channels stored as they are."""

    def offset(self, ch: int) -> int:
        return 4 * ch

    def bits(self, ch: int) -> int:
        return 32

    def decode(self, raw, ch: int):
        return raw

    def encode(self, v, ch: int):
        return v


def inputs(fam: str, space: str, sem, rng: np.random.Generator, lanes: int) -> dict:
    from emu.pcode import SCALAR_SPACES
    vector = space not in SCALAR_SPACES
    active = rng.integers(0, 2, lanes).astype(bool)
    active[rng.integers(0, lanes)] = True
    st_: dict = {"ACTIVE": active}
    for name in sem.reads:
        bits = sem.widths.get(name, 32)
        if name in ("MEM", "LDS"):
            st_[name] = FakeMem(active)
        elif name == "FORMAT":
            st_[name] = FakeFormat()
        elif name == "VGPR":
            st_[name] = rng.integers(0, 1 << 32, (lanes, 512), dtype=np.uint64).astype(np.uint32)
        elif name in ("SGPR", "HW_REGISTERS"):
            st_[name] = rng.integers(0, 1 << 32, 256, dtype=np.uint64).astype(np.uint32)
        elif name == "HwRegWriteMask":
            st_[name] = lambda reg, priv: 0xFFFFFFFF
        elif name in sem.masks or name in ("EXEC", "VCC"):
            st_[name] = int(rng.integers(0, 1 << 63)) | int(rng.integers(0, 2)) << 63 if lanes == 64 else \
                int(rng.integers(0, 1 << 32))
        elif name not in DATA or "." in name or (name in ("ADDR", "VDATA") and "VGPR" in sem.files):
            st_[name] = int(rng.integers(0, 16))
        elif not vector:
            st_[name] = int(rng.integers(0, 1 << min(bits, 63))) | (int(rng.integers(0, 2)) << 63 if bits >= 64 else 0)
        elif bits > 64:
            st_[name] = rng.integers(0, 1 << 32, ((bits + 31) // 32, lanes), dtype=np.uint64)
        else:
            hi = rng.integers(0, 1 << 32, lanes, dtype=np.uint64) << np.uint64(32) if bits > 32 else 0
            st_[name] = (rng.integers(0, 1 << 32, lanes, dtype=np.uint64) | hi) & np.uint64((1 << bits) - 1)
    return st_


def compiled_ops(fam: str) -> list:
    from emu.amd import isa
    from emu.pcode import Unsupported, compile_op
    out = []
    for op in sorted(isa.load(fam).ops.values(), key=lambda o: (o.enc, o.value)):
        try:
            out.append((op.enc, op.name, compile_op(fam, op.enc, op.name)))
        except Unsupported:
            continue
    return out


_OPS: dict[str, list] = {}


def ops_of(fam: str) -> list:
    if fam not in _OPS:
        _OPS[fam] = compiled_ops(fam)
    return _OPS[fam]


def smoke(fam: str, space: str, name: str, sem, seed: int):
    from emu.amd import target
    from emu.pcode import Unsupported
    lanes = target.generation(fam).wave_size
    st_ = inputs(fam, space, sem, np.random.default_rng(seed), lanes)
    try:
        out = sem(st_, lanes)
    except Unsupported:
        return
    except Exception as e:  # noqa: BLE001 - report which op raised on which inputs
        raise AssertionError(f"{fam} {space} {name} raised {type(e).__name__}: {e} (seed {seed})") from e
    assert set(out) <= sem.writes, f"{fam} {space} {name} returned {set(out) - sem.writes} not in writes"


@pytest.mark.parametrize("fam", FAMS)
def test_every_op_sweep(fam: str):
    """Deterministic coverage: every compiled op of the family, two random input sets each."""
    ops = ops_of(fam)
    assert len(ops) > 1000, f"{fam}: only {len(ops)} ops compiled"
    for i, (space, name, sem) in enumerate(ops):
        for k in range(2):
            smoke(fam, space, name, sem, 1000 * i + k)


# Regression witnesses (fixed in emu.pcode): 64- / 128-bit writes into one element of the 32-bit SGPR file raised
# OverflowError; the rdna DS_PERMUTE lane 32'I(addr + offset) / 4 % 32 went negative for addresses >= 2**31.
REGRESSIONS = [(fam, "S_MOVRELD_B64") for fam in FAMS] + [("cdna", "S_CBRANCH_G_FORK"), ("cdna", "S_CBRANCH_I_FORK"),
                                                           ("rdna3", "DS_PERMUTE_B32"), ("rdna4", "DS_PERMUTE_B32"),
                                                           ("rdna4", "DS_BPERMUTE_FI_B32")]


@pytest.mark.parametrize("fam,name", REGRESSIONS)
def test_regressions(fam: str, name: str):
    space, _, sem = next(o for o in ops_of(fam) if o[1] == name)
    for seed in range(16):
        smoke(fam, space, name, sem, seed)


WINDOW = 16


@pytest.mark.parametrize("fam", FAMS)
@PROPS
@given(start=st.integers(0, 10**6), seed=SEEDS)
def test_random_ops_never_raise(fam: str, start: int, seed: int):
    """pcode_refs.EXAMPLES examples per family, each running WINDOW consecutive ops (from a drawn start) on fresh
    random inputs."""
    ops = ops_of(fam)
    for k in range(WINDOW):
        space, name, sem = ops[(start + k) % len(ops)]
        smoke(fam, space, name, sem, (seed + k) % 2**64)
