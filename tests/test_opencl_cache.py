"""stack.codegen.opencl's disk cache of code objects: a kernel compiled once per machine, keyed by everything that
changes the object, and a damaged file compiled again."""
import pytest

from stack.codegen import opencl

SRC = "kernel void k(global int *x) { x[get_global_id(0)] += 1; }"
pytestmark = pytest.mark.skipif(not opencl.available(), reason="clang-19 / ld.lld-19 not installed (./dev)")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HWEMU_CACHE", str(tmp_path))
    return tmp_path / "cl"


def test_a_kernel_is_compiled_once(cache, monkeypatch):
    first = opencl.compile_cl(SRC, "gfx1100")
    assert first.startswith(b"\x7fELF") and len(list(cache.iterdir())) == 1

    def no_clang(*_):
        raise AssertionError("compiled again")
    monkeypatch.setattr(opencl, "_compile", no_clang)
    assert opencl.compile_cl(SRC, "gfx1100") == first


@pytest.mark.parametrize("change", [dict(source=SRC + "\n"), dict(arch="gfx1201"), dict(opt="-O0"),
                                    dict(extra=("-DX=1",))])
def test_what_changes_the_object_changes_the_key(cache, change):
    opencl.compile_cl(SRC, "gfx1100")
    args = {"source": SRC, "arch": "gfx1100", "opt": "-O3", "extra": (), **change}
    opencl.compile_cl(**args)
    assert len(list(cache.iterdir())) == 2


def test_a_damaged_cache_file_is_compiled_again(cache):
    good = opencl.compile_cl(SRC, "gfx1100")
    (path,) = cache.iterdir()
    path.write_bytes(b"garbage")
    assert opencl.compile_cl(SRC, "gfx1100") == good and path.read_bytes() == good


def test_a_compile_error_is_not_cached(cache):
    with pytest.raises(opencl.CompileError, match="failed"):
        opencl.compile_cl("kernel void k( {", "gfx1100")
    assert not cache.exists() or not list(cache.iterdir())
