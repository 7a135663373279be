"""The vendor's Hexagon definitions: QEMU's `target/hexagon/imported/` (Qualcomm; GPLv2+) and the simulator
tables of `target/hexagon/arch.c` (seed ROMs, CABAC), never committed.

Obtained at first use from Debian's qemu 7.2 source package (`apt-get source --download-only qemu`, which
needs a `deb-src` entry for bookworm main; `./dev`, as root, adds one made from the machine's own sources for
that download), then only imported/ and arch.c are extracted from the orig tarball into the cache,
`$HWEMU_CACHE/hexagon/qemu-7.2` (default ~/.cache/hwemu/...; where HWEMU_CACHE names another cache without them,
the default cache's are used if it has them). A cache that lacks one of them (one made before arch.c was
needed) is refreshed from the tarball on first use.
`python -m emu.dsp.vendor` fetches both and prints their paths.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from collections.abc import Mapping
from pathlib import Path

from emu import cache

QEMU_VERSION = "7.2"
_IMPORTED = "target/hexagon/imported/"
_ARCH_C = "target/hexagon/arch.c"


class VendorMissing(RuntimeError):
    """The vendor definitions are not in the cache and could not be fetched."""


def cache_root(env: Mapping[str, str] = os.environ) -> Path:
    return cache.root(env) / "hexagon"


def _version_dir() -> Path:
    """Where the definitions are: this cache's folder, or else the user's default cache's if that one has them
    (a run with its own HWEMU_CACHE, a test's, needs no second download); fetched into this cache's."""
    dirs = [cache_root() / f"qemu-{QEMU_VERSION}", cache_root({}) / f"qemu-{QEMU_VERSION}"]
    return next((d for d in dirs if (d / "imported" / "encode_pp.def").is_file() and (d / "arch.c").is_file()),
                dirs[0])


def imported_dir() -> Path:
    """The folder holding the vendor's *.idef / *.def files (fetched and extracted on first use)."""
    dest = _version_dir() / "imported"
    if not (dest / "encode_pp.def").is_file():
        _fetch()
    return dest


def arch_c() -> Path:
    """QEMU's target/hexagon/arch.c (fetched and extracted on first use, also into a cache made without it)."""
    dest = _version_dir() / "arch.c"
    if not dest.is_file():
        _fetch()
    return dest


def _fetch() -> None:
    src = cache_root() / "src"
    tarball = _orig_tarball(src) or _download(src)
    _extract(tarball, cache_root() / f"qemu-{QEMU_VERSION}")
    shutil.rmtree(src, ignore_errors=True)  # the 23 MB tarball is no longer needed


def _orig_tarball(folder: Path) -> Path | None:
    found = sorted(folder.glob(f"qemu_{QEMU_VERSION}*.orig.tar.*")) if folder.is_dir() else []
    return found[-1] if found else None


def _download(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    try:
        r = subprocess.run(["apt-get", "source", "--download-only", "qemu"], cwd=folder,
                           capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise VendorMissing(f"apt-get source qemu failed to run: {e}") from None
    tarball = _orig_tarball(folder)
    if r.returncode or tarball is None:
        raise VendorMissing(
            f"could not fetch Debian's qemu {QEMU_VERSION} source (apt-get source exited {r.returncode}: "
            f"{r.stderr.strip()[-300:]}); run ./dev test as root, or add a deb-src entry for bookworm main "
            f"and run apt-get update")
    return tarball


def _extract(tarball: Path, dest: Path) -> None:
    """Extract only <top>/target/hexagon/imported/ and arch.c (regular files) from the orig tarball into `dest`
    (as imported/ and arch.c), each published atomically where `dest` lacks it."""
    tmp = dest.with_name(f"{dest.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    n = 0
    with tarfile.open(tarball, "r|*") as tf:  # a stream: one pass over the 23 MB archive
        for m in tf:
            path = m.name.partition("/")[2]  # below the tarball's top folder
            if path == _ARCH_C:
                rel = "arch.c"
            elif path.startswith(_IMPORTED):
                rel = "imported/" + path[len(_IMPORTED):]
            else:
                continue
            if not m.isfile() or ".." in rel.split("/"):
                continue
            out = tmp / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            data = tf.extractfile(m)
            assert data is not None
            out.write_bytes(data.read())
            n += 1
    parts = (("imported", "imported/encode_pp.def"), ("arch.c", "arch.c"))  # (what to publish, its proof)
    try:
        for _, check in parts:
            if not (tmp / check).is_file():
                raise VendorMissing(f"{tarball}: no target/hexagon/{check} ({n} files matched)")
        dest.mkdir(parents=True, exist_ok=True)
        for rel, check in parts:
            if not (dest / check).is_file():
                try:
                    os.replace(tmp / rel, dest / rel)
                except OSError:  # another process published it first
                    pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    try:
        print(imported_dir())
        print(arch_c())
    except VendorMissing as e:
        raise SystemExit(f"error: {e}") from None
