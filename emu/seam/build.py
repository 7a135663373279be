"""Build the native seam (seam.c, python.c) with the system's C compiler into hwemu's cache, once per source and
Python: `python -m emu.seam.build` prints the library's path (`./dev` runs it); the library is never committed."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from emu import cache

HERE = Path(__file__).parent
SOURCES = ("seam.c", "python.c")
NAME = "libhwemu-seam.so"
COMPILERS = ("cc", "gcc", "clang", "clang-19")


class BuildError(RuntimeError):
    """The seam cannot be built (no compiler, a compile error): the message says what to do."""


def compiler() -> str:
    """$CC, else the first of cc, gcc, clang, clang-19 on PATH."""
    cc = os.environ.get("CC") or next((c for c in COMPILERS if shutil.which(c)), None)
    if cc is None or shutil.which(cc.split()[0]) is None:
        raise BuildError(f"hwemu seam: no C compiler ({os.environ.get('CC') or ', '.join(COMPILERS)} not found) to "
                         "build the native seam; install one (Debian: apt-get install gcc) or set CC")
    return cc


def libpython() -> str:
    """The shared libpython of this interpreter, which the seam loads into clients that are not Python."""
    return os.path.join(sysconfig.get_config_var("LIBDIR") or "", sysconfig.get_config_var("INSTSONAME") or "")


def library() -> Path:
    """The seam's shared library, built first if this source and Python have none in the cache yet."""
    defines = [f'-DHWEMU_LIBPYTHON="{libpython()}"', f'-DHWEMU_PYTHON="{sys.executable}"']
    text = b"".join((HERE / f).read_bytes() for f in (*SOURCES, "seam.h")) + "\0".join(defines).encode()
    out = cache.root() / "seam" / hashlib.sha256(text).hexdigest()[:16] / NAME
    if out.exists():
        return out
    cc = compiler()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".tmp{os.getpid()}")
    cmd = [*cc.split(), "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter",
           "-I", sysconfig.get_paths()["include"], *defines, *(str(HERE / f) for f in SOURCES), "-o", str(tmp),
           "-ldl", "-lpthread"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0 or r.stderr.strip():
        tmp.unlink(missing_ok=True)
        raise BuildError(f"hwemu seam: building {out.name} failed ({' '.join(cmd)}):\n{r.stderr}")
    os.replace(tmp, out)
    return out


def main() -> int:
    try:
        print(library())
    except BuildError as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
