"""GPU virtual memory: translation, permissions, faults, and that nothing outside the mappings is ever touched."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emu.amd.memory import PAGE, VA_LIMIT, VM, FaultRecord, GPUFault

CANARY = 0xA5


LAYOUT = [(0x10000, 1, 2, True), (0x11000, 3, 5, True), (0x13000, 6, 7, False), (0x7FFF_FFFF_0000, 9, 10, True)]
MODEL = {va + k: (lo * PAGE + k, w) for va, lo, hi, w in LAYOUT for k in range((hi - lo) * PAGE)}  # va -> (host, w)


def _arena():
    """A VM with four mappings cut from one host arena (LAYOUT: va, first and end page in the arena, writable):
    A|B adjacent (accesses straddle them), C read-only after a one-page hole, D far away. The arena's gaps hold
    canary bytes that must never change."""
    host = np.full(16 * PAGE, CANARY, np.uint8)
    vm = VM()
    for va, lo, hi, w in LAYOUT:
        host[lo * PAGE:hi * PAGE] = np.arange((hi - lo) * PAGE) % 251
        vm.map(va, host[lo * PAGE:hi * PAGE], writable=w, name=hex(va))
    return host, vm


MAPPED = np.zeros(16 * PAGE, bool)
MAPPED[[i for i, _ in MODEL.values()]] = True
EDGES = [0x10000, 0x11000, 0x13000, 0x14000, 0x7FFF_FFFF_0000, 0x7FFF_FFFF_1000]


def _near_edge():
    return st.builds(lambda e, d: (e + d) % (1 << 64), st.sampled_from(EDGES), st.integers(-12, 12))


addresses = st.one_of(_near_edge(), st.integers(0, (1 << 64) - 1), st.integers(0x10000, 0x14000),
                      st.integers((1 << 64) - 16, (1 << 64) - 1), st.integers(VA_LIMIT - 16, VA_LIMIT + 16))


def _expect_fault(model, addrs, active, nbytes, write):
    for a, on in zip(addrs, active, strict=True):
        if on:
            for k in range(nbytes):
                hit = model.get((a + k) % (1 << 64)) if a + k < (1 << 64) else None
                if hit is None or (write and not hit[1]):
                    return True
    return False


inside = st.one_of(st.integers(0x10000, 0x12FF8), st.builds(lambda d: 0x11000 + d, st.integers(-8, 8)))  # A|B
lane_lists = st.one_of(*(st.lists(st.tuples(s, st.booleans()), min_size=1, max_size=k)
                         for s, k in ((addresses, 16), (inside, 16), (_near_edge(), 3))))


@settings(max_examples=300, deadline=None)
@given(lane_lists, st.sampled_from([8, 16, 32, 64]),
       st.booleans(), st.integers(0, (1 << 64) - 1))
def test_lane_accesses_match_model_and_never_escape(lanes, bits, write, seed):
    _check(lanes, bits, write, seed)


def test_every_access_around_every_mapping_edge():
    for edge in EDGES:
        for d in range(-8, 8):
            for bits in (8, 16, 32, 64):
                for write in (False, True):
                    _check([((edge + d) % (1 << 64), True)], bits, write, edge + d)
                    _check([((edge + d) % (1 << 64), True), (0x10010, True), (EDGES[0] - 1, False)], bits, write, d)


def _check(lanes, bits, write, seed):
    """One access against the byte model: same data, same faults, nothing outside the mappings touched."""
    host, vm = _arena()
    model = MODEL
    addrs = [a for a, _ in lanes]
    active = np.array([on for _, on in lanes])
    addr = np.array(addrs, np.uint64)
    nb = bits // 8
    values = np.random.default_rng(seed % (1 << 32)).integers(0, 1 << 63, len(lanes), dtype=np.uint64)
    faults = _expect_fault(model, addrs, active, nb, write)
    before = host.copy()
    try:
        if write:
            vm.store(addr, bits, values, active)
        else:
            got = vm.load(addr, bits, active)
    except GPUFault as e:
        assert faults, str(e)
        assert np.array_equal(host, before), "a faulting access changed memory"
        assert e.record.bits == bits and e.record.write == write and e.record.lanes
        for ln, a in zip(e.record.lanes, e.record.addresses, strict=True):
            assert active[ln] and addrs[ln] == a
    else:
        assert not faults
        expect = before.copy()
        for ln, (a, on) in enumerate(lanes):
            if not on:
                continue
            idx = [model[a + k][0] for k in range(nb)]
            if write:
                expect[idx] = np.frombuffer(int(values[ln]).to_bytes(8, "little")[:nb], np.uint8)
            else:
                assert int(got[ln]) == int.from_bytes(bytes(before[idx]), "little"), (ln, hex(a))
        if not write:
            assert not got[~active].any()
        assert np.array_equal(host, expect)
    assert (host[~MAPPED] == CANARY).all(), "bytes outside every mapping changed"
    # the VM stays usable after anything
    vm.store(np.array([0x10000], np.uint64), 32, np.array([0xDEADBEEF], np.uint64))
    assert vm.read(0x10000, 4) == (0xDEADBEEF).to_bytes(4, "little")


def test_loads_and_stores_every_width_against_numpy():
    vm = VM()
    va = vm.alloc(3 * PAGE)
    ref = np.random.default_rng(1).integers(0, 256, 3 * PAGE, dtype=np.uint8)
    vm.write(va, ref)
    for bits, dt in ((8, "<u1"), (16, "<u2"), (32, "<u4"), (64, "<u8")):
        offs = np.random.default_rng(bits).integers(0, 3 * PAGE - 8, 64).astype(np.uint64)  # unaligned too
        got = vm.load(np.uint64(va) + offs, bits, np.ones(64, bool))
        want = [np.frombuffer(ref[o:o + bits // 8].tobytes(), dt)[0] for o in offs.astype(int)]
        assert got.dtype == np.uint64 and list(got) == [int(w) for w in want]
    vals = np.arange(64, dtype=np.uint64) * 0x0101010101010101
    addr = np.uint64(va + 100) + np.arange(64, dtype=np.uint64) * np.uint64(8)
    vm.store(addr, 64, vals)
    assert np.array_equal(np.frombuffer(vm.read(va + 100, 512), "<u8"), vals)


def test_gather_scatter_wide_accesses():
    vm = VM()
    va = vm.alloc(PAGE)
    data = np.arange(32 * 16, dtype=np.uint8).reshape(32, 16)
    addr = np.uint64(va) + np.arange(32, dtype=np.uint64) * np.uint64(16)
    vm.scatter(addr, data)
    assert np.array_equal(vm.gather(addr, 16), data)
    assert vm.read(va, 512) == data.tobytes()


def test_store_fault_writes_nothing_and_names_every_bad_lane():
    vm = VM()
    va = vm.alloc(PAGE)
    addr = np.uint64(va) + np.arange(32, dtype=np.uint64) * np.uint64(4)
    addr[[3, 17]] = [va + PAGE, 8]
    with pytest.raises(GPUFault) as e:
        vm.store(addr, 32, np.full(32, 7, np.uint64), np.ones(32, bool))
    r = e.value.record
    assert r.kind == "unmapped" and r.lanes == (3, 17) and r.addresses == (va + PAGE, 8) and r.write
    assert vm.read(va, PAGE) == bytes(PAGE)
    vm.store(addr, 32, np.full(32, 7, np.uint64), ~np.isin(np.arange(32), [3, 17]))  # inactive bad lanes: fine
    assert np.frombuffer(vm.read(va, 8), "<u4").tolist() == [7, 7]


def test_read_only_mapping():
    vm = VM()
    va = vm.alloc(PAGE, writable=False)
    vm.write(va, b"\1\2\3\4")  # the host may write it
    assert vm.load(np.array([va], np.uint64), 32)[0] == 0x04030201
    with pytest.raises(GPUFault, match="read-only; write of 16 bits"):
        vm.store(np.array([va], np.uint64), 16, np.array([1], np.uint64))
    with pytest.raises(GPUFault, match="read-only"):
        vm.atomic(np.array([va], np.uint64), 32, None, lambda old, lanes: old + 1)


def test_atomics_serialize_lanes_on_the_same_address():
    vm = VM()
    va = vm.alloc(PAGE)
    addr = np.uint64(va) + (np.arange(64, dtype=np.uint64) % np.uint64(4)) * np.uint64(4)
    active = np.arange(64) != 5
    old = vm.atomic(addr, 32, active, lambda o, lanes: o + np.uint64(1) + lanes.astype(np.uint64))
    mem = [0, 0, 0, 0]
    want = np.zeros(64, np.uint64)
    for ln in range(64):  # serial lane-order model
        if active[ln]:
            want[ln] = mem[ln % 4]
            mem[ln % 4] += 1 + ln
    assert np.array_equal(old, want)
    assert np.frombuffer(vm.read(va, 16), "<u4").tolist() == mem


def test_alloc_map_unmap():
    vm = VM()
    a, b = vm.alloc(10), vm.alloc(PAGE + 1, align=1 << 16)
    assert a % PAGE == 0 and b % (1 << 16) == 0 and b >= a + 2 * PAGE  # a guard page after each allocation
    assert vm.mapping(b + PAGE + 5).va == b and vm.mapping(a + PAGE) is None
    with pytest.raises(GPUFault, match="unmapped; read of 32 bits"):  # one past the end of `a`'s page
        vm.load(np.array([a + PAGE], np.uint64), 32)
    with pytest.raises(GPUFault, match="host read"):
        vm.read(a + PAGE - 2, 4)
    with pytest.raises(ValueError, match="overlaps"):
        vm.map(b, np.zeros(PAGE, np.uint8))
    with pytest.raises(ValueError, match="multiples"):
        vm.map(0x5000, np.zeros(100, np.uint8))
    with pytest.raises(ValueError, match="48-bit"):
        vm.map(VA_LIMIT - PAGE, np.zeros(2 * PAGE, np.uint8))
    with pytest.raises(ValueError, match="not writable"):
        vm.map(0x5000, bytes(PAGE))
    vm.unmap(a)
    with pytest.raises(GPUFault):
        vm.load(np.array([a], np.uint64), 8)
    with pytest.raises(ValueError, match="no mapping starts"):
        vm.unmap(a)
    assert vm.alloc(PAGE) == a  # the hole is reused


def test_client_buffer_is_shared_not_copied():
    vm = VM()
    buf = bytearray(2 * PAGE)
    vm.map(0x20000, buf)
    vm.store(np.array([0x20000 + PAGE], np.uint64), 32, np.array([0x11223344], np.uint64))
    assert buf[PAGE:PAGE + 4] == b"\x44\x33\x22\x11"


def test_fault_record_text():
    r = FaultRecord("unmapped", (0x1234,), (3,), 32, False, dispatch=1, workgroup=(2, 0, 0), wave=1, pc=0x1900,
                    instruction="global_load_b32 v1, v[2:3], off", active_lanes=tuple(range(32)))
    s = str(GPUFault(r))
    for part in ("unmapped", "read of 32 bits", "lane 3: 0x1234", "dispatch 1", "workgroup (2, 0, 0)", "wave 1",
                 "pc 0x1900", "global_load_b32", "active lanes 0-31"):
        assert part in s, (part, s)


def _alloc_va_by_the_definition(vm: VM, size: int, align: int) -> int:
    """VM.alloc's placement as its docstring defines it, mapping by mapping: from ALLOC_BASE, past every mapping that
    leaves no room for `size` bytes plus a guard page, each candidate aligned after the previous mapping's guard."""
    from emu.amd.memory import ALLOC_BASE
    size = -(-size // PAGE) * PAGE
    va = ALLOC_BASE
    for m in vm.mappings:
        if m.end + PAGE <= va:
            continue
        if va + size + PAGE <= m.va:
            break
        va = -(-(m.end + PAGE) // max(align, PAGE)) * max(align, PAGE)
    return va


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["alloc", "unmap", "map"]), st.integers(1, 6 * PAGE),
                          st.sampled_from([PAGE, 2 * PAGE, 1 << 16, 1 << 21]), st.integers(0, 1 << 12)), max_size=40))
def test_alloc_places_and_indexes_as_defined(ops):
    """Allocation, fixed mappings (also below and across ALLOC_BASE) and unmaps in any order: alloc's placement equals
    the definition's, and the incrementally built index (search arrays and the native table) equals one built from
    the mappings."""
    from emu.amd.memory import ALLOC_BASE
    vm = VM()
    for op, size, align, where in ops:
        if op == "alloc":
            want = _alloc_va_by_the_definition(vm, size, align)
            assert vm.alloc(size, align) == want
        elif op == "unmap" and vm.mappings:
            vm.unmap(vm.mappings[where % len(vm.mappings)].va)
        elif op == "map":
            va = ALLOC_BASE + (where - (1 << 11)) * PAGE
            try:
                vm.map(va, np.zeros(-(-size // PAGE) * PAGE, np.uint8))
            except ValueError:  # overlaps: nothing changed
                pass
        ix, maps = vm.index, vm.mappings
        assert [m.va for m in maps] == sorted(m.va for m in maps) == ix.vas
        assert ix.starts.tolist() == [m.va for m in maps] and ix.ends.tolist() == [m.end for m in maps]
        assert ix.writable.tolist() == [m.writable for m in maps]
        assert ix.table.tolist() == [len(maps), *(x for m in maps for x in m.row())]
        for m in maps:
            assert vm.mapping(m.va) is m and vm.mapping(m.end - 1) is m and vm.mapping(m.end) is not m
