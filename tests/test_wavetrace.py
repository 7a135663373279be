"""Wave traces (HWEMU_TRACE, emu.amd.debug.wavetrace): each filter term selects exactly the waves it names, on
every tier; lines give the register changes; a bad filter is one line naming the term; the parser never crashes."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emu.amd.debug import wavetrace
from stack.codegen import opencl

TIERS = ["ref", "interp", "jit"]
SRC = """\
kernel void scale(global float *out, global const float *in) {
    int i = get_global_id(0) + get_global_id(1) * get_global_size(0);
    out[i] = in[i] * 2.0f;
}
kernel void other(global float *out) {
    out[get_global_id(0) + get_global_id(1) * get_global_size(0)] = 1.0f;
}
"""
GRID, BLOCK, LANES = (3, 2, 1), (64, 1, 1), 32  # 6 workgroups of 2 wave32 waves
LINE = re.compile(r"^d(\d+) wg\((\d+),(\d+),(\d+)\) w(\d+) (0x[0-9a-f]+): (.*)$")


@pytest.fixture(scope="module")
def code():
    if not opencl.available():
        pytest.skip("clang-19 and ld.lld-19 are needed to build kernels")
    return opencl.compile_cl(SRC, "gfx1100")


def _run(monkeypatch, tmp_path, tier, trace, code, kernels=("scale", "other")):
    path = tmp_path / f"trace-{len(list(tmp_path.iterdir()))}.txt"
    monkeypatch.setenv("HWEMU_TIER", tier)
    monkeypatch.setenv("HWEMU_TRACE", trace)
    monkeypatch.setenv("HWEMU_TRACE_FILE", str(path))
    from emu.amd import GPU
    gpu = GPU("gfx1100")
    n = 6 * 64
    out, inp = gpu.alloc(4 * n), gpu.alloc(4 * n)
    gpu.write(inp, np.arange(n, dtype=np.float32))
    prog = gpu.load(code)
    for k in kernels:
        gpu.launch(prog, k, grid=GRID, block=BLOCK, args=[out, inp] if k == "scale" else [out])
    want = [1.0] * n if kernels[-1] == "other" else [2.0 * i for i in range(n)]
    assert np.frombuffer(gpu.read(out), np.float32).tolist() == want  # results unchanged by tracing
    lines = path.read_text().splitlines() if path.exists() else []
    return [LINE.match(ln) for ln in lines], prog


def _waves(matches) -> set:
    return {(int(m[1]), (int(m[2]), int(m[3]), int(m[4])), int(m[5])) for m in matches}


ALL_WGS = [(x, y, 0) for y in range(2) for x in range(3)]


@pytest.mark.parametrize("tier", TIERS)
def test_filters_select_exactly_the_waves(monkeypatch, tmp_path, tier, code):
    everything = {(d, wg, w) for d in (0, 1) for wg in ALL_WGS for w in (0, 1)}
    cases = {
        "1": everything,
        "kernel=scale": {x for x in everything if x[0] == 0},
        "dispatch=1": {x for x in everything if x[0] == 1},
        "wg=2,1,0": {x for x in everything if x[1] == (2, 1, 0)},
        "wg=1": {x for x in everything if x[1] == (1, 0, 0)},
        "wave=1": {x for x in everything if x[2] == 1},
        "kernel=scale,wg=2,1,0,wave=1": {(0, (2, 1, 0), 1)},
        "dispatch=0-1,wave=0-0": {x for x in everything if x[2] == 0},
    }
    for trace, want in cases.items():
        matches, _ = _run(monkeypatch, tmp_path, tier, trace, code)
        assert all(matches), trace
        assert _waves(matches) == want, trace


@pytest.mark.parametrize("tier", TIERS)
def test_pc_range_and_count(monkeypatch, tmp_path, tier, code):
    matches, prog = _run(monkeypatch, tmp_path, tier, "kernel=scale", code, kernels=("scale",))
    k = prog.co.kernels["scale"]
    pcs = sorted({int(m[6], 16) - prog.base for m in matches})
    lo, hi = pcs[2], pcs[5]  # code-object offsets, as llvm-objdump prints them
    matches, _ = _run(monkeypatch, tmp_path, tier, f"kernel=scale,pc={lo:#x}-{hi:#x}", code, kernels=("scale",))
    got = {int(m[6], 16) - prog.base for m in matches}
    assert got == set(pcs[2:5]) and k.entry <= lo
    matches, _ = _run(monkeypatch, tmp_path, tier, "count=7", code)
    assert len(matches) == 7


def test_lines_give_register_changes(monkeypatch, tmp_path, code):
    """The doubling's line: v-register lanes with in[i] * 2 for the work-items of wave 1 of workgroup (0, 1)."""
    matches, _ = _run(monkeypatch, tmp_path, "interp", "kernel=scale,wg=0,1,wave=1", code, kernels=("scale",))
    mul = next(m for m in matches if m[7].startswith("v_add_f32"))  # clang makes x * 2 an add
    first = 3 * 64 + 32  # global id of lane 0: workgroup (0, 1) is the 4th (x fastest), wave 1
    value = np.float32(2.0 * first).view(np.uint32)
    assert f"0:{int(value):#x}" in mul[7]
    store = next(m for m in matches if m[7].startswith("global_store"))
    assert "|" not in store[7]  # a store changes no register


@pytest.mark.parametrize("bad, term", [("kernel=scale,wave=x", "wave=x"), ("color=red", "color=red"),
                                       ("wg=1,2,3,4", "wg=1,2,3,4"), ("scale", "scale"), ("pc=0x20-0x10", "pc="),
                                       ("wave=1,wave=2", "wave=2")])
def test_bad_filter_is_one_line_naming_the_term(bad, term):
    with pytest.raises(wavetrace.TraceFilterError) as e:
        wavetrace.parse(bad)
    assert len(str(e.value).splitlines()) == 1 and term in str(e.value)


@settings(max_examples=500, deadline=None)
@given(st.text())
def test_parser_never_crashes(text):
    try:
        f = wavetrace.parse(text)
    except wavetrace.TraceFilterError as e:
        assert "\n" not in str(e)
        return
    assert isinstance(f, wavetrace.Filter)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["kernel=k", "dispatch=3", "dispatch=1-4", "wg=1,2", "wg=*", "wave=0-3", "pc=0x10-0x40",
                                 "count=5", "=", ",", "wg=", "0", "x=1", "-"]), max_size=6))
def test_parser_on_term_soup(parts):
    text = ",".join(parts)
    try:
        wavetrace.parse(text)
    except wavetrace.TraceFilterError as e:
        assert "\n" not in str(e)
