"""OpenCL C -> HSA code object with the system's clang-19 and ld.lld-19.

Code objects are cached on disk under `$HWEMU_CACHE/cl/` (default ~/.cache/hwemu/cl/), named by a hash of the
source, the flags, the prelude and both tools' version lines, so the same kernel is compiled once per machine (test
suites compile the same corpus on every run); a file that is not an ELF object is compiled again.
"""
from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

CLANG, LLD = "clang-19", "ld.lld-19"


class CompileError(RuntimeError):
    pass


def available() -> bool:
    return bool(shutil.which(CLANG) and shutil.which(LLD))


PRELUDE = Path(__file__).with_name("hwemu_cl.h")


def compile_cl(source: str, arch: str, opt: str = "-O3", extra: tuple[str, ...] = ()) -> bytes:
    """Compile OpenCL C for `arch` (gfx name) and link it into a shared HSA code object; returns its bytes.

    The source is compiled with -nogpulib; hwemu_cl.h, included first, supplies the work-item functions
    (get_global_id, ...), barrier, 32-bit atomics, popcount and clz."""
    key = hashlib.sha256("\0".join((source, arch, opt, *extra, PRELUDE.read_text(), *_versions())).encode())
    cached = _cache_dir() / f"{key.hexdigest()[:32]}.hsaco"
    try:
        code = cached.read_bytes()
        if code.startswith(b"\x7fELF"):
            return code
    except OSError:
        pass
    code = _compile(source, arch, opt, extra)
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=cached.parent, delete=False) as f:
            f.write(code)
        os.replace(f.name, cached)
    except OSError:
        pass  # an unwritable cache: compiled every time
    return code


def _cache_dir() -> Path:
    base = os.environ.get("HWEMU_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hwemu")
    return Path(base) / "cl"


@functools.cache
def _versions() -> tuple[str, ...]:
    """The first line of `--version` of clang and lld (compiled code changes with them)."""
    out = []
    for tool in (CLANG, LLD):
        try:
            out.append(subprocess.run([tool, "--version"], capture_output=True, text=True).stdout.partition("\n")[0])
        except FileNotFoundError as e:
            raise CompileError(f"{tool} not found: install clang-19 lld-19") from e
    return tuple(out)


def _compile(source: str, arch: str, opt: str, extra: tuple[str, ...]) -> bytes:
    with tempfile.TemporaryDirectory(prefix="hwemu-cl-") as tmp:
        src, obj, out = Path(tmp, "k.cl"), Path(tmp, "k.o"), Path(tmp, "k.hsaco")
        src.write_text(source)
        _run([CLANG, "-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", f"-mcpu={arch}", "-nogpulib",
              "-include", str(PRELUDE), opt, *extra, "-c", str(src), "-o", str(obj)])
        _run([LLD, "-shared", str(obj), "-o", str(out)])
        return out.read_bytes()


def _run(cmd: list[str]) -> None:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True)
    except FileNotFoundError as e:
        raise CompileError(f"{cmd[0]} not found: install clang-19 lld-19") from e
    if p.returncode:
        raise CompileError(f"{' '.join(cmd)} failed:\n{p.stderr}")
