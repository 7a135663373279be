"""What the fast tiers take (emu.amd.exec.takes): each declines through its table, with a reason, and under
HWEMU_STATS the declines are counted (distinct instructions by tier and reason) and printed at exit."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from test_wave import asm

from emu.amd.decode import decode
from emu.amd.exec import takes
from emu.amd.exec.bind import Binder

pytestmark = pytest.mark.llvm

CODE = """v_add_f32 v1, v2, v3
v_mov_b32_dpp v0, v1 dpp8:[1,0,3,2,5,4,7,6]
s_getreg_b32 s0, hwreg(HW_REG_MODE)
v_readfirstlane_b32 s1, v2
ds_add_u32 v1, v2
buffer_load_b32 v0, off, s[0:3], 0
s_endpgm"""


def test_each_tier_says_why():
    b = Binder("gfx1100", 32)
    got = [(str(i), takes.lean(i, b), takes.native(i)) for i in decode(asm(CODE, "gfx1100"), "gfx1100")]
    assert [(lean, native) for _, lean, native in got] == [
        (None, None), ("DPP or SDWA form", "DPP8 or SDWA form"), ("hardware registers or register files", None),
        ("register files", None), ("atomic or register files", None), ("MUBUF encoding", "MUBUF encoding"),
        ("program control", None)], got


@pytest.mark.parametrize("tier", ["interp", "jit"])
def test_declines_are_counted_under_hwemu_stats(tier):
    code = textwrap.dedent(f"""
        from test_wave import asm
        from emu.amd.exec.wave import Wave
        w = Wave("gfx1100")
        w.run(asm({CODE!r}, "gfx1100"))
    """)
    env = {**os.environ, "HWEMU_STATS": "1", "HWEMU_TIER": tier,
           "PYTHONPATH": os.pathsep.join([os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")])}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stderr
    lines = p.stderr.splitlines()
    at = lines.index("hwemu: instructions the fast tiers left to a slower one (distinct instructions by reason):")
    rows = dict(line.strip().split(": ", 1) for line in lines[at + 1:] if line.startswith("  "))
    assert "DPP or SDWA form 1" in rows["interp"] and "MUBUF encoding 1" in rows["interp"]
    assert ("native" in rows) == (tier == "jit")
    env.pop("HWEMU_STATS")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0 and "left to a slower one" not in p.stderr
