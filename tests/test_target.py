"""emu.amd.target: one descriptor per chip, consistent with itself and with what the tables and topology say."""
import pytest

from emu.amd import isa, target, topology
from emu.amd.target import TARGETS, UnknownArch


@pytest.mark.parametrize("arch", TARGETS)
def test_a_chip_is_of_the_generation_its_versions_say(arch):
    t = TARGETS[arch]
    assert t.gfx_target_version // 10000 == t.gen.gfx == t.gc[0]
    assert int(arch[3:-2]) == t.gen.gfx  # gfx<major><minor><stepping>, the stepping one hex digit, minor one
    assert isa.family(arch) == t.isa and isa.load(arch).family == t.isa
    assert t.wave_size in t.gen.wave_sizes and t.gen.m0 != t.gen.null


def test_family_names_stand_for_their_default_chip():
    assert [target.get(f).arch for f in ("rdna3", "RDNA4", "cdna")] == ["gfx1100", "gfx1201", "gfx942"]
    assert target.generation("gfx1151") is target.RDNA3 and target.generation("cdna") is target.CDNA


@pytest.mark.parametrize("bad", ["gfx90c", "", "rdna", 1100, None])
def test_an_unknown_chip_is_named_in_the_error(bad):
    with pytest.raises(UnknownArch, match=repr(bad)):
        target.get(bad)
    with pytest.raises(ValueError, match="gfx1100"):
        topology.chip(str(bad))
