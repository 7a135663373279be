"""The lean interpreter's disk cache of compiled generated source (emu.amd.exec.interp_code.compiled): a second process
loads what the first compiled; a damaged or truncated file is compiled again and replaced, never run."""
from __future__ import annotations

from emu.amd.exec import interp_code

TEXT = "def make(k):\n    return lambda x: x * k + 1\n"


def _files(tmp_path):
    return [p for p in (tmp_path / "interp").rglob("*") if p.is_file()]


def _make(code):
    ns: dict = {}
    exec(code, ns)
    return ns["make"]


def test_compiled_source_is_kept_and_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("HWEMU_CACHE", str(tmp_path))
    first = interp_code.compiled(TEXT, "<interp test>")
    (path,) = _files(tmp_path)
    stamp = path.stat().st_mtime_ns
    again = interp_code.compiled(TEXT, "<interp test>")
    assert path.stat().st_mtime_ns == stamp  # read, not written again
    assert again.co_filename == first.co_filename == "<interp test>"
    assert _make(again)(3)(5) == 16


def test_damaged_or_truncated_files_are_compiled_again(tmp_path, monkeypatch):
    monkeypatch.setenv("HWEMU_CACHE", str(tmp_path))
    interp_code.compiled(TEXT, "<interp test>")
    (path,) = _files(tmp_path)
    good = path.read_bytes()
    for bad in (good[:-5], good[:40] + bytes([good[40] ^ 0xFF]) + good[41:], b"", b"\0" * 100):
        path.write_bytes(bad)
        assert _make(interp_code.compiled(TEXT, "<interp test>"))(2)(10) == 21
        assert path.read_bytes() == good


def test_unwritable_cache_still_runs(tmp_path, monkeypatch):
    (tmp_path / "interp").write_text("a file where the cache's directory would be")
    monkeypatch.setenv("HWEMU_CACHE", str(tmp_path))
    assert _make(interp_code.compiled(TEXT, "<interp test>"))(1)(1) == 2
