"""The native workgroup launcher (emu.amd.exec.launch) against the reference tier: clang-19 kernels with barriers, a
3-D grid with workgroup ids, and an instruction no native region takes (a global atomic) in the middle of a barrier
round, so that Python takes the workgroup over from native code. Results are checked against numpy and the work
counts (waves, wave- and lane-instructions) against the reference tier's.
"""
from __future__ import annotations

import collections
import functools
import os
import warnings

import numpy as np
import pytest

from stack.codegen import opencl

pytestmark = pytest.mark.skipif(not opencl.available(), reason="clang-19 and ld.lld-19 are needed to build kernels")

SOURCE = r"""
// ids: the workgroup ids and a barrier-synchronized LDS exchange: out[g] = wg_x + 100 wg_y + 10000 wg_z + the
// local id of the work-item mirrored across the workgroup, read back from LDS after a barrier.
kernel void ids(global int *out) {
  __local int s[256];
  uint l = get_local_id(0) + get_local_size(0) * (get_local_id(1) + get_local_size(1) * get_local_id(2));
  uint n = get_local_size(0) * get_local_size(1) * get_local_size(2);
  s[l] = (int)l;
  barrier(CLK_LOCAL_MEM_FENCE);
  uint g = get_global_id(0) + get_global_size(0) * (get_global_id(1) + get_global_size(1) * get_global_id(2));
  out[g] = get_group_id(0) + 100 * get_group_id(1) + 10000 * get_group_id(2) + 1000000 * s[n - 1 - l];
}

// tally: the last wave of each workgroup counts itself with a global atomic between two barriers (the other waves
// wait at the second barrier meanwhile); every work-item then adds the workgroup's LDS tree sum of `in`.
kernel void tally(global const int *in, global int *count, global int *out) {
  __local int s[256];
  uint l = get_local_id(0), i = get_global_id(0), n = get_local_size(0);
  s[l] = in[i];
  barrier(CLK_LOCAL_MEM_FENCE);
  if (l >= n - 32) atomic_add(count, 1);
  for (uint stride = n / 2; stride > 0; stride >>= 1) {
    barrier(CLK_LOCAL_MEM_FENCE);
    if (l < stride) s[l] += s[l + stride];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  out[i] = s[0];
}

// order: the order the waves of a workgroup run in. Wave w of workgroup g goes trips[g][w] times round a loop
// whose body ends at a barrier; each time round, its first work-item takes the next ticket of an LDS counter (a
// plain read and write: a wave runs alone until its barrier) and writes it to tickets[g][w][i].
kernel void order(global const int *trips, global int *tickets, int wave_size, int most) {
  __local int counter;
  uint l = get_local_id(0), w = l / wave_size, waves = get_local_size(0) / wave_size, g = get_group_id(0);
  if (l == 0) counter = 0;
  barrier(CLK_LOCAL_MEM_FENCE);
  int n = trips[g * waves + w];
  for (int i = 0; i < n; i++) {
    if (l % wave_size == 0) {
      int t = counter;
      counter = t + 1;
      tickets[(g * waves + w) * most + i] = t;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}
"""
ARCHS = ("gfx1100", "gfx1201", "gfx942")


@functools.cache
def code(arch: str) -> bytes:
    return opencl.compile_cl(SOURCE, arch)


def _run(monkeypatch, tier: str, arch: str, kernel: str, grid, block, arrays, *scalars):
    """Launch on a new GPU under `tier` (the arrays as buffers, then the scalars); returns (the arrays after the run,
    the dispatch's Stats)."""
    from emu.amd import GPU
    monkeypatch.setenv("HWEMU_TIER", tier)
    monkeypatch.setenv("HWEMU_HOT", "3")  # the launcher takes over after a few waves under `auto`
    monkeypatch.setenv("HWEMU_COMPILE_COST", "0")  # whether or not the region pays back
    gpu = GPU(arch)
    prog = gpu.load(code(arch))
    bufs = [gpu.alloc(a.nbytes) for a in arrays]
    for b, a in zip(bufs, arrays, strict=True):
        gpu.write(b, a)
    stats = gpu.launch(prog, kernel, grid=grid, block=block, args=[*bufs, *scalars])
    out = [np.frombuffer(gpu.read(b), a.dtype).copy() for b, a in zip(bufs, arrays, strict=True)]
    return out, stats


def _counts(stats) -> tuple[int, int, int]:
    return stats.waves, stats.wave_instructions, stats.lane_instructions


@pytest.mark.parametrize("arch", ARCHS)
def test_workgroup_ids_and_barriers(monkeypatch, arch):
    grid, block = (3, 2, 2), (8, 4, 2)
    n = np.prod(grid) * np.prod(block)
    gx, gy, gz = np.meshgrid(*(np.arange(g * b) for g, b in zip(grid, block, strict=True)), indexing="ij")
    lx, ly, lz = gx % block[0], gy % block[1], gz % block[2]
    local = lx + block[0] * (ly + block[1] * lz)
    want = gx // block[0] + 100 * (gy // block[1]) + 10000 * (gz // block[2]) + 1000000 * (np.prod(block) - 1 - local)
    want = want.transpose(2, 1, 0).reshape(-1).astype(np.int32)  # global index x fastest
    results = {}
    for tier in ("ref", "jit", "auto"):
        (out,), stats = _run(monkeypatch, tier, arch, "ids", grid, block, [np.zeros(n, np.int32)])
        np.testing.assert_array_equal(out, want, err_msg=tier)
        results[tier] = _counts(stats)
    assert results["jit"] == results["ref"] == results["auto"]


@pytest.mark.parametrize("arch", ARCHS)
def test_atomic_mid_round_hands_over_to_python(monkeypatch, arch):
    groups, block = 6, 128
    x = np.random.default_rng(1).integers(-1000, 1000, groups * block).astype(np.int32)
    results = {}
    for tier in ("ref", "jit", "auto"):
        (_, count, out), stats = _run(monkeypatch, tier, arch, "tally", (groups,), (block,),
                                      [x, np.zeros(1, np.int32), np.zeros_like(x)])
        np.testing.assert_array_equal(out, np.repeat(x.reshape(groups, block).sum(1), block), err_msg=tier)
        assert count[0] == groups * 32, tier  # 32 work-items of each workgroup count themselves
        results[tier] = _counts(stats)
    assert results["jit"] == results["ref"] == results["auto"]


def test_auto_compiles_hot_regions_in_the_background(monkeypatch):
    """Under `auto` a hot region is compiled on the compile thread while the waves go on interpreted; once it is
    installed the next launch runs natively (the launcher takes the entry), with the same results and counts."""
    from emu.amd import GPU
    from emu.amd.exec import jit
    monkeypatch.setenv("HWEMU_TIER", "auto")
    monkeypatch.setenv("HWEMU_HOT", "2")
    monkeypatch.setenv("HWEMU_COMPILE_COST", "0")
    grid, block = (3, 2, 2), (8, 4, 2)
    n = np.prod(grid) * np.prod(block)
    gpu = GPU("gfx1100")
    prog = gpu.load(code("gfx1100"))
    out = gpu.alloc(4 * int(n))
    first = gpu.launch(prog, "ids", grid=grid, block=block, args=[out])
    want = np.frombuffer(gpu.read(out), np.int32).copy()
    assert jit.background.wait(300)
    program = prog.program(32)
    assert program.compiled, "the hot entry's region was installed"
    gpu.write(out, np.zeros(int(n), np.int32))
    again = gpu.launch(prog, "ids", grid=grid, block=block, args=[out])
    np.testing.assert_array_equal(np.frombuffer(gpu.read(out), np.int32), want)
    assert (again.waves, again.wave_instructions, again.lane_instructions) == \
        (first.waves, first.wave_instructions, first.lane_instructions)


def test_auto_compiles_what_pays_back(monkeypatch):
    """Under `auto` a hot region stays interpreted while its interpreted time is below its expected compile cost
    (HWEMU_COMPILE_COST per instruction), is compiled at a later look once it reaches it, and a region compiled
    before (in this process or by another: the disk cache) is installed at the first look, whatever it costs."""
    from emu.amd import GPU
    from emu.amd.exec import jit
    monkeypatch.setenv("HWEMU_TIER", "auto")
    monkeypatch.setenv("HWEMU_HOT", "2")
    src = "kernel void k(global int *o) { o[get_global_id(0)] = %d * (int)get_global_id(0); }"
    factor = int.from_bytes(os.urandom(3), "little") | 1  # code no other test or run has compiled
    gpu = GPU("gfx1100")
    prog = gpu.load(opencl.compile_cl(src % factor, "gfx1100"))
    out = gpu.alloc(4 * 1024)
    want = factor * np.arange(1024, dtype=np.int64)

    def launch(g, p, o):
        g.launch(p, "k", grid=(32,), block=(32,), args=[o])
        assert jit.background.wait(300)
        np.testing.assert_array_equal(np.frombuffer(g.read(o), np.int32), want.astype(np.int32))

    monkeypatch.setenv("HWEMU_COMPILE_COST", "1e9")
    for _ in range(3):
        launch(gpu, prog, out)
    assert not prog.program(32).compiled, "a region that cannot pay back stays interpreted"
    monkeypatch.setenv("HWEMU_COMPILE_COST", "1e-12")
    for _ in range(5):  # the next look comes by twice the 96 runs so far (a look in flight may see up to 96)
        launch(gpu, prog, out)
        if prog.program(32).compiled:
            break
    assert prog.program(32).compiled, "the next look after the time spent reached the cost compiles"
    monkeypatch.setenv("HWEMU_COMPILE_COST", "1e9")
    again = GPU("gfx1100")
    prog2 = again.load(opencl.compile_cl(src % factor, "gfx1100"))
    launch(again, prog2, again.alloc(4 * 1024))
    assert prog2.program(32).compiled, "a compiled region is installed at once"


def test_auto_launches_on_the_threaded_loop_before_a_region_pays_back(monkeypatch):
    """Under `auto`, once the entry's handler is installed, the launcher runs every wave of a later dispatch on the
    threaded loop (no Python per wave) while the region from the entry does not pay back its compile."""
    from emu.amd import GPU
    from emu.amd.dispatch import run as dispatch_run
    from emu.amd.exec import jit
    monkeypatch.setenv("HWEMU_TIER", "auto")
    monkeypatch.setenv("HWEMU_STATS", "1")
    monkeypatch.setenv("HWEMU_COMPILE_COST", "1e9")
    src = "kernel void k(global int *o) { o[get_global_id(0)] = %d * (int)get_global_id(0) + 1; }"
    factor = int.from_bytes(os.urandom(3), "little") | 1
    gpu = GPU("gfx1100")
    prog = gpu.load(opencl.compile_cl(src % factor, "gfx1100"))
    out = gpu.alloc(4 * 1024)
    want = (factor * np.arange(1024, dtype=np.int64) + 1).astype(np.int32)
    from emu.amd import dispatch
    python_runs = []
    monkeypatch.setattr(dispatch, "run", lambda w, *a, **k: python_runs.append(w) or dispatch_run(w, *a, **k))
    runs = []
    for _ in range(3):
        python_runs.clear()
        runs.append(gpu.launch(prog, "k", grid=(32,), block=(32,), args=[out]))
        assert jit.background.wait(300)
        np.testing.assert_array_equal(np.frombuffer(gpu.read(out), np.int32), want)
    assert not prog.program(32).compiled, "the region does not pay back"
    last = runs[-1]
    assert not python_runs and last.native == last.wave_instructions > 0, "no wave of the last dispatch ran in Python"
    assert (last.waves, last.wave_instructions, last.lane_instructions) == \
        (runs[0].waves, runs[0].wave_instructions, runs[0].lane_instructions)


WALK = r"""
constant int table[8] = {3, 1, 4, 1, 5, 9, 2, 6};
kernel void walk(global int *out, int n) {
  int i = get_global_id(0), acc = %d;
  for (int k = 0; k < n + (i & 3); k++) acc = acc * 7 + table[(i + k) & 7];
  out[i] = acc;
}
"""


def _walk(seed: int) -> list[int]:
    """What `walk` writes for 64 work-items with n = 5 (Python integers)."""
    table = [3, 1, 4, 1, 5, 9, 2, 6]
    want = []
    for i in range(64):
        acc = seed
        for k in range(5 + (i & 3)):
            acc = (acc * 7 + table[(i + k) & 7]) & 0xFFFFFFFF
        want.append(acc)
    return want


def _walk_new_program(gpu, code_object: bytes, want: list[int]) -> None:
    """Load `walk` as a new program (a new code mapping), run it once and check it; the compile thread's jobs done."""
    from emu.amd.exec import jit
    prog = gpu.load(code_object)
    out = gpu.alloc(4 * 64)
    gpu.launch(prog, "walk", grid=(2,), block=(32,), args=[out, np.int32(5)])
    assert jit.background.wait(300)
    np.testing.assert_array_equal(np.frombuffer(gpu.read(out), np.uint32), np.array(want, np.uint32))


@pytest.mark.parametrize("arch", ARCHS)
def test_a_region_compiled_at_one_address_runs_at_another(monkeypatch, arch):
    """Regions are position-independent: the same code object loaded at another address (another buffer here;
    another process or client in practice) runs the region compiled for the first address, found under the same
    cache key and not compiled again, with its loop, its taken branches and its s_getpc-relative table right."""
    from emu.amd import GPU
    from emu.amd.exec import jit
    from emu.pcode.llvmjit import engine
    monkeypatch.setenv("HWEMU_TIER", "jit")
    monkeypatch.setenv("HWEMU_STATS", "1")  # counts the instructions run natively
    seed = int.from_bytes(os.urandom(3), "little")  # code that no other test or run has compiled
    code_object = opencl.compile_cl(WALK % seed, arch)
    want = _walk(seed)
    gpu = GPU(arch)
    loads = [gpu.load(code_object), gpu.load(code_object)]
    assert loads[0].base != loads[1].base
    stats = engine().stats
    for n, prog in enumerate(loads):
        if n:
            jit._cache.clear()  # as in a new process: only the disk cache knows the region
        compiled, hits = stats["compiled"], stats["disk_hits"] + stats["memory_hits"]
        out = gpu.alloc(4 * 64)
        run = gpu.launch(prog, "walk", grid=(2,), block=(32,), args=[out, np.int32(5)])
        np.testing.assert_array_equal(np.frombuffer(gpu.read(out), np.uint32), np.array(want, np.uint32))
        assert run.native == run.wave_instructions > 0
        if n:
            assert (stats["compiled"], stats["disk_hits"] + stats["memory_hits"]) == (compiled, hits + 1), \
                "the region compiled for the first address is looked up by the same key, not compiled again"
        else:
            assert stats["compiled"] == compiled + 1


def test_a_programs_first_wave_asks_for_its_whole_kernel_once(monkeypatch):
    """A program's first step asks for the handlers of its whole kernel (its loop and the code after the loop's
    branch included), so that the threaded loop runs on through its blocks instead of coming back to Python at
    each: one request per program, and the results right from the first dispatch."""
    from emu.amd import GPU
    from emu.amd.exec import threaded
    monkeypatch.setenv("HWEMU_TIER", "auto")
    monkeypatch.setenv("HWEMU_COMPILE_COST", "1e9")  # no region: the threaded loop runs what has handlers
    seed = int.from_bytes(os.urandom(3), "little")
    code_object = opencl.compile_cl(WALK % seed, "gfx1100")
    want = _walk(seed)
    requests = []
    request = threaded.Table.request
    monkeypatch.setattr(threaded.Table, "request",
                        lambda self, pc, mode: requests.append(pc) or request(self, pc, mode))
    gpu = GPU("gfx1100")
    for n in range(2):  # the second program finds the first one's handlers made
        requests.clear()
        _walk_new_program(gpu, code_object, want)
        if n:
            assert len(requests) == 1, f"one request for the whole kernel, not one per block ({len(requests)})"


def test_a_kernel_met_before_is_not_decoded_again(monkeypatch, tmp_path):
    """A kernel's instructions are kept on disk as kinds and words (what another process, or an earlier run of a
    test suite, found): a program of the same code asks for its handlers without decoding its kernel, and runs it
    right; a kept file that was damaged is decoded anew, never read as other instructions."""
    import sys
    import threading

    from emu.amd import GPU
    from emu.amd.exec import threaded
    decoder = sys.modules["emu.amd.decode"].Decoder
    monkeypatch.setenv("HWEMU_TIER", "auto")
    monkeypatch.setenv("HWEMU_COMPILE_COST", "1e9")
    monkeypatch.setattr(threaded, "kernels_dir", lambda: tmp_path)
    seed = int.from_bytes(os.urandom(3), "little")
    code_object = opencl.compile_cl(WALK % seed, "gfx1100")
    want = _walk(seed)
    decoded = []
    decode_one = decoder.decode_one
    me = threading.get_ident()
    monkeypatch.setattr(decoder, "decode_one", lambda self, code, off, pc: (
        threading.get_ident() == me and decoded.append(pc)) or decode_one(self, code, off, pc))
    gpu = GPU("gfx1100")
    counts = []
    for n in range(3):
        if n == 2:  # damaged on disk: cut short
            kept, = tmp_path.iterdir()
            kept.write_bytes(kept.read_bytes()[:-3])
        decoded.clear()
        _walk_new_program(gpu, code_object, want)
        counts.append(len(decoded))
    assert counts[1] == 1, f"the second program decodes only its first step's instruction ({counts})"
    assert counts[0] == counts[2] > 8, f"the first and the damaged one decode the kernel ({counts})"


@pytest.fixture
def own_refusals(monkeypatch, tmp_path):
    """The translator's refusals (emu.amd.exec.jit.refused) in a file of the test's, none known yet: what a test
    makes the translator refuse is not kept for other tests and processes."""
    from emu.amd.exec import jit
    monkeypatch.setattr(jit, "_refused", set())
    monkeypatch.setattr(jit, "_refused_read", [False])
    monkeypatch.setattr(jit, "_refusals_file", lambda: tmp_path / "refused")
    return tmp_path / "refused"


def test_an_instruction_the_translator_fails_on_is_refused_in_later_regions(monkeypatch, own_refusals):
    """An instruction that passes the region's discovery but that the translator fails on (its module raises Exit)
    costs one more module build of the region so far: once learned, later regions holding the same instruction
    (another load of the code, here) end before it at once and build nothing that fails."""
    from emu.amd import GPU
    from emu.amd.exec import translate
    monkeypatch.setenv("HWEMU_TIER", "jit")
    seed = int.from_bytes(os.urandom(3), "little")
    code_object = opencl.compile_cl(WALK % seed, "gfx1100")
    failing: dict[bytes, int] = {}
    inst, module = translate.Region._inst, translate.Region.module
    builds = []

    def refusing(self, b, i):  # the first VALU instruction past a region's entry fails, as an emulator gap would
        if not failing and i.pc != self.entry and i.base.startswith("VOP"):
            failing[i.raw] = i.pc
        if i.raw in failing:
            raise translate.Exit("refused by the test")
        return inst(self, b, i)

    def counted(self, *a):
        try:
            return module(self, *a)
        except translate.Exit:
            builds.append("failed")
            raise
    monkeypatch.setattr(translate.Region, "_inst", refusing)
    monkeypatch.setattr(translate.Region, "module", counted)
    gpu = GPU("gfx1100")
    want = None
    for n, prog in enumerate([gpu.load(code_object), gpu.load(code_object)]):
        out = gpu.alloc(4 * 64)
        gpu.launch(prog, "walk", grid=(2,), block=(32,), args=[out, np.int32(5)])
        got = np.frombuffer(gpu.read(out), np.uint32).copy()
        if n == 0:
            want = got
            assert failing and builds, "the first program's region failed to translate once"
            builds.clear()
        else:
            np.testing.assert_array_equal(got, want)
            assert not builds, "the second program's regions end before the refused instruction at once"


def test_a_refusal_is_known_to_later_processes(monkeypatch, own_refusals):
    """Refusals are kept on disk, so a new process shapes its regions as the last one did (and finds them in the
    disk cache) instead of learning each refusal again; lines it cannot read are left out."""
    from emu.amd.exec import jit
    entry = ("gfx1100", 32, 0xF0, bytes.fromhex("0200000a"))
    jit._refuse(entry)
    with open(own_refusals, "a") as f:
        f.write("gfx1100 32 240 zz\nnot a line\ngfx1100 32\n\x00\xff garbage")
    monkeypatch.setattr(jit, "_refused", set())  # a new process
    monkeypatch.setattr(jit, "_refused_read", [False])
    assert jit.refused(entry)
    assert not jit.refused(("gfx1100", 64, 0xF0, entry[3]))
    assert jit._refused == {entry}


def _tickets_by_the_rule(trips: np.ndarray, most: int) -> np.ndarray:
    """dispatch.py's scheduling rule, stated on its own: a workgroup's waves run round-robin in wave order, each until
    its barrier or its end, and a barrier releases when every wave still running has reached it. So the waves that
    go round the loop an i-th time take that round's tickets in wave order."""
    out = np.full(trips.shape + (most,), -1, np.int32)
    for g, row in enumerate(trips):
        ticket = 0
        for i in range(most):
            for w in np.flatnonzero(row > i):
                out[g, w, i], ticket = ticket, ticket + 1
    return out


@pytest.mark.parametrize("arch", ARCHS)
def test_waves_run_in_the_order_the_scheduler_describes(monkeypatch, arch):
    """The Python scheduler (ref) and the native launcher (jit) both follow dispatch.py's rule, seen through the
    order the waves take tickets, with waves that leave the loop (and end) after different numbers of barriers."""
    from emu.amd import target
    ws = target.get(arch).wave_size
    groups, block, most = 4, 256, 5
    trips = np.random.default_rng(2).integers(0, most + 1, (groups, block // ws)).astype(np.int32)
    want = _tickets_by_the_rule(trips, most)
    from emu.amd.exec import jit
    monkeypatch.setenv("HWEMU_STATS", "1")  # counts the wave-instructions run natively
    for tier in ("ref", "jit", "jit"):  # the second jit run starts from the regions the first compiled
        (_, tickets), stats = _run(monkeypatch, tier, arch, "order", (groups,), (block,),
                                   [trips.reshape(-1), np.full(want.size, -1, np.int32)], np.int32(ws), np.int32(most))
        np.testing.assert_array_equal(tickets.reshape(want.shape), want, err_msg=tier)
        assert jit.background.wait(300)
    assert stats.native == stats.wave_instructions, "the native launcher ran every workgroup"



def test_a_translator_bug_keeps_the_region_interpreted(monkeypatch):
    """A translator bug while compiling a hot region in the background: the region stays interpreted (the results
    stay right), HWEMU_STATS counts it and a warning says it."""
    from emu.amd import GPU
    from emu.amd.exec import category, jit, takes, translate
    monkeypatch.setenv("HWEMU_TIER", "auto")
    monkeypatch.setenv("HWEMU_HOT", "2")
    monkeypatch.setenv("HWEMU_COMPILE_COST", "0")
    monkeypatch.setenv("HWEMU_THREADED", "0")
    monkeypatch.setenv("HWEMU_STATS", "1")
    monkeypatch.setattr(jit, "STRICT", False)
    monkeypatch.setattr(takes, "_declined", collections.defaultdict(lambda: collections.defaultdict(set)))

    def broken(*a, **k):
        raise KeyError("a translator bug")
    monkeypatch.setattr(translate.Region, "module", broken)
    src = "kernel void k(global int *o) { o[get_global_id(0)] = %d * (int)get_global_id(0) - 3; }"
    factor = int.from_bytes(os.urandom(3), "little") | 1  # code no disk cache holds
    gpu = GPU("gfx1100")
    prog = gpu.load(opencl.compile_cl(src % factor, "gfx1100"))
    out = gpu.alloc(4 * 1024)
    assert category.enabled()
    with pytest.warns(RuntimeWarning, match="emulator bug: KeyError"):
        for _ in range(2):
            gpu.launch(prog, "k", grid=(32,), block=(32,), args=[out])
            assert jit.background.wait(300)
    want = (factor * np.arange(1024, dtype=np.int64) - 3).astype(np.int32)
    np.testing.assert_array_equal(np.frombuffer(gpu.read(out), np.int32), want)
    assert not prog.program(32).compiled
    assert "emulator bug (KeyError)" in takes.report()


@pytest.mark.parametrize("how", ["HWEMU_STRICT", "warnings as errors"])
def test_a_compile_thread_failure_is_raised_where_asked(monkeypatch, how):
    """Under HWEMU_STRICT (hwemu's own tests) a translator bug on the compile thread is raised on the waves' thread,
    not hidden as a slowdown; so is the warning, when the client's warning filter makes it an error."""
    from emu.amd.exec import jit
    monkeypatch.setattr(jit, "STRICT", how == "HWEMU_STRICT")

    def job():
        raise KeyError("a translator bug")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jit.background(job)
        with pytest.raises(KeyError if how == "HWEMU_STRICT" else RuntimeWarning, match="a translator bug"):
            jit.background.wait(300)
    assert jit.background.wait(300), "the compile thread goes on"
