"""emu.dsp.tables (the simulator's C arrays, parsed from the vendor's arch.c) and emu.dsp.vendor's extraction."""
import io
import tarfile

import pytest
from dsp_support import vendor_isa

from emu.dsp import pyback, tables, vendor
from emu.dsp.lower import CompileError, lower


@pytest.mark.parametrize("text, expect", [
    ("const uint8_t t[3] = {1, 0x0fe, 010};", (bytes([1, 254, 8]), (3,))),
    ("/* t */ const  uint8_t t[2][2]={ {0,1},  // row\n {2u, 3} ,\n};", (bytes([0, 1, 2, 3]), (2, 2))),
    ("const uint8_t other[1] = {9};\nconst uint8_t t[] = {7};", (bytes([7]), (1,))),
])
def test_parse_array(text, expect):
    assert tables.parse_array(text, "t") == expect


@pytest.mark.parametrize("text, why", [
    ("const uint8_t tt[1] = {1};", "no `const uint8_t"),
    ("const uint8_t t[2] = {1, 256};", "not a uint8_t literal: '256'"),
    ("const uint8_t t[2] = {1, x};", "not a uint8_t literal: 'x'"),
    ("const uint8_t t[2] = {1, 2, 3};", "shape (3,)"),
    ("const uint8_t t[2][2] = {{1, 2}, {3}};", "shape None"),
    ("const uint8_t t[2][2] = {1, 2, 3, 4};", "shape (4,)"),
    ("const uint8_t t[2] = {{1, 2};", "malformed"),
])
def test_parse_array_refuses(text, why):
    with pytest.raises(ValueError, match=why.replace("(", r"\(").replace(")", r"\)")):
        tables.parse_array(text, "t")


def test_vendor_tables():
    """Every table reads from arch.c with the dimensions its readers index (a spot check of known values:
    H.264 table 9-44's first row, 9-45's last transitions)."""
    try:
        vendor.arch_c()
    except vendor.VendorMissing as e:
        pytest.skip(f"arch.c unavailable: {e}")
    assert all(n in tables.TABLES for n in tables.TABLES) and len(tables.TABLES) == 5
    assert list(tables.TABLES["rLPS_table_64x4"][0][:4]) == [128, 176, 208, 240]
    assert tables.lookup("AC_next_state_MPS_64", 62) == 62 and tables.lookup("AC_next_state_LPS_64", 63) == 63
    assert tables.lookup("rLPS_table_64x4", 64, 0) == 0  # outside: reads 0
    assert len(tables.RECIP_SEED) == len(tables.INVSQRT_SEED) == 128
    assert tables.fSF_RECIP_LOOKUP(0x80) == tables.RECIP_SEED[0]


def _offline(folder):
    raise vendor.VendorMissing("offline")


def _tarball(path, files):
    with tarfile.open(path, "w:xz") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(f"qemu-7.2.0/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


def test_cache_without_arch_c_is_refreshed(tmp_path, monkeypatch):
    """A cache made before arch.c was needed gets it from the tarball; imported/ is left as it was."""
    monkeypatch.setenv("HWEMU_CACHE", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no user cache to take the definitions from
    (tmp_path / "hexagon/src").mkdir(parents=True)
    _tarball(tmp_path / "hexagon/src/qemu_7.2+dfsg.orig.tar.xz", {
        "target/hexagon/imported/encode_pp.def": b"new", "target/hexagon/arch.c": b"const uint8_t t[1] = {1};",
        "target/hexagon/other.c": b"", "target/hexagon/imported/mmvec/x.idef": b"x"})
    old = tmp_path / "hexagon/qemu-7.2/imported/encode_pp.def"
    old.parent.mkdir(parents=True)
    old.write_bytes(b"old")
    assert vendor.imported_dir() == old.parent  # complete: no refresh
    assert vendor.arch_c().read_bytes() == b"const uint8_t t[1] = {1};"
    assert old.read_bytes() == b"old" and sorted(p.name for p in (tmp_path / "hexagon").iterdir()) == ["qemu-7.2"]
    old.unlink()  # an incomplete cache: nothing left to refresh from, so a download (refused here)
    monkeypatch.setattr(vendor, "_download", _offline)
    with pytest.raises(vendor.VendorMissing, match="offline"):
        vendor.imported_dir()


def test_unreadable_tables_make_cabac_uncompilable(tmp_path, monkeypatch):
    """Without arch.c (and no way to fetch it) a table read raises TableMissing naming file and array, and
    S2_cabacdecbin does not compile (an instruction without semantics), instead of crashing the compiler."""
    isa = vendor_isa()
    monkeypatch.setenv("HWEMU_CACHE", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no user cache to take the definitions from
    monkeypatch.setattr(vendor, "_download", _offline)
    tables._source.cache_clear(), tables._table.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="arch.c is unavailable"):
            assert "rLPS_table_64x4" not in tables.TABLES
        with pytest.warns(RuntimeWarning), pytest.raises(tables.TableMissing, match=r"arch\.c .*: array recip_lookup"):
            tables.fSF_RECIP_LOOKUP(0)
        with pytest.raises(CompileError, match="rLPS_table_64x4"):
            lower(isa, isa.insns["S2_cabacdecbin"])
        for name in ("_SOURCES", "_NEW", "_COMPILED"):  # a fresh semantics cache; the error is not added to it
            monkeypatch.setattr(pyback, name, {})
        with pytest.raises(CompileError, match="rLPS_table_64x4"):
            pyback.semantics(isa, "S2_cabacdecbin")
        assert "S2_cabacdecbin" not in pyback._NEW
    finally:
        tables._source.cache_clear(), tables._table.cache_clear(), tables._missed.clear()
