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


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1201", "gfx942"])
def test_m0_and_null_are_what_llvm_and_the_executor_both_say(arch):
    """s_mov_b32 through M0 and NULL (124 and 125, swapped between gfx9 and gfx11; llvm-mc-19 names both on each):
    NULL reads 0 and drops writes, M0 holds what is written."""
    from emu.amd import Wave
    from emu.amd.decode import decode
    g = target.generation(arch)
    mov = lambda dst, src: (0xBE800000 | dst << 16 | src).to_bytes(4, "little")  # noqa: E731 - s_mov_b32 (SOP1 0)
    code = mov(g.m0, 1) + mov(2, g.m0) + mov(g.null, 1) + mov(3, g.null)
    assert [str(i) for i in decode(code, arch)] == ["s_mov_b32 m0, s1", "s_mov_b32 s2, m0", "s_mov_b32 null, s1",
                                                    "s_mov_b32 s3, null"]
    w = Wave(arch)
    w.sgpr[1:4] = [7, 9, 9]
    w.run(code + bytes.fromhex("000081bf" if g.gfx == 9 else "0000b0bf"))
    assert w.m0 == 7 and list(w.sgpr[1:4]) == [7, 7, 0]


@pytest.mark.parametrize("arch", TARGETS)
def test_hwemu_info_shows_each_chip_as_an_agent(arch, capsys):
    """`hwemu info --arch` reads the MOCKKFD topology through the file-I/O seam as a runtime does: the GPU agent's
    gfx name comes back from the node's gfx_target_version."""
    from emu import cli
    assert cli.main(["info", "--arch", arch]) == 0
    assert f"agent 1: GPU {arch}, " in capsys.readouterr().out


def test_hwemu_info_shows_gfx90a_as_an_mi210(capsys):
    """The gfx90a agent is an Instinct MI210: PCI device 0x740F, 104 CUs, wave64, 64 GB, 1700 MHz peak engine clock
    (AMD's product page; amdgpu's pciidlist)."""
    from emu import cli
    assert cli.main(["info", "--arch", "gfx90a"]) == 0
    out = capsys.readouterr().out
    assert "GPU gfx90a, " in out and "device 0x740f" in out
    assert "104 CUs, wave64, 8 waves/SIMD, 64 KiB LDS, 65536 MiB VRAM, 1700 MHz" in out
