"""tinygrad's mock DSP (`MOCKDSP=1 DEV=DSP`) on hwemu's Hexagon core.

In that mode tinygrad compiles each kernel into a static Hexagon Linux program (clang, hexagonv65 + HVX) and
runs it with `qemu-hexagon-static` from PATH. `install()` puts hwemu's qemu-hexagon shims (emu.dsp.__main__)
first on PATH, so those programs run here (forked from a server that has the core loaded); the pytest plugin
calls it at load (`MOCKDSP=1 DEV=DSP pytest`) and `hwemu run` for DEV=DSP. HWEMU=0 leaves PATH alone (the
system's qemu-hexagon runs them). It also sets CC to clang-19 when the process has neither CC nor a `clang`, as
tinygrad's compiler runs `CC` (default `clang`).
"""
from __future__ import annotations

import os
import shutil

from emu.dsp import forkserver


def names_dsp(dev: str) -> bool:
    """Whether DEV (tinygrad's `[IFACE+]DEVICE[:...]`, targets joined by ';') names the DSP device."""
    return any(t.strip().rpartition("+")[2].partition(":")[0].upper() == "DSP" for t in dev.split(";"))


def enabled(env=os.environ) -> bool:
    """Whether tinygrad in this environment runs its mock DSP and hwemu should serve it."""
    return env.get("HWEMU", "1") != "0" and env.get("MOCKDSP", "0") not in ("", "0") and names_dsp(env.get("DEV", ""))


def install(env=os.environ, survive_exec: bool = False) -> bool:
    """Serve tinygrad's mock DSP from hwemu in `env` (the process's own by default) when it runs one
    (`enabled`): the shims, and a fork server for them that lives as long as this process (with `survive_exec`: as
    the program it execs; emu.dsp.forkserver). Returns whether it does."""
    if not enabled(env):
        return False
    use_shims(env)
    forkserver.start(env, survive_exec=survive_exec)
    if "CC" not in env and shutil.which("clang", path=env["PATH"]) is None and shutil.which("clang-19"):
        env["CC"] = "clang-19"
    return True


def use_shims(env) -> None:
    """Put hwemu's qemu-hexagon shims first on env's PATH."""
    from emu.dsp.__main__ import shim_dir
    shims = str(shim_dir())
    rest = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != shims]
    env["PATH"] = os.pathsep.join([shims, *rest])
