"""The driver's index of a process's buffers by VA (emu.amd.bo.ByVA): the overlap query every allocation, mapping
and queue creation makes answers as a scan of every buffer would, whatever was added and removed."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from emu.amd.bo import ByVA
from emu.amd.memory import PAGE


class _Buffer:
    def __init__(self, va: int, size: int):
        self.va, self.size = va, size

    @property
    def end(self) -> int:
        return self.va + self.size


buffers = st.lists(st.tuples(st.integers(0, 64), st.integers(1, 16)), max_size=40)  # (page, pages); VAs may repeat
queries = st.lists(st.tuples(st.integers(0, 80 * PAGE), st.integers(1, 20 * PAGE)), min_size=1, max_size=20)


@settings(max_examples=200, deadline=None)
@given(buffers, st.data(), queries)
def test_overlapping_is_what_a_scan_finds(made, data, asked):
    ix, live = ByVA(), []
    for page, pages in made:
        b = _Buffer(page * PAGE, pages * PAGE)
        ix.add(b)
        live.append(b)
    for b in data.draw(st.lists(st.sampled_from(live), unique_by=id) if live else st.just([]), "removed"):
        ix.remove(b)
        live.remove(b)
    for va, size in asked:
        want = {id(b) for b in live if b.va < va + size and va < b.end}
        assert {id(b) for b in ix.overlapping(va, size)} == want
