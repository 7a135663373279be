"""The vendor's Hexagon definitions: QEMU's `target/hexagon/imported/` (Qualcomm; GPLv2+), never committed.

Obtained at first use from Debian's qemu 7.2 source package (`apt-get source --download-only qemu`, which
needs a `deb-src` entry for bookworm main; `./dev` adds one as root), then only the imported/ folder is
extracted from the orig tarball into the cache, `$HWEMU_CACHE/hexagon` (default ~/.cache/hwemu/hexagon).
`python -m emu.dsp.vendor` fetches it and prints the folder.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

QEMU_VERSION = "7.2"
_MEMBER = "target/hexagon/imported/"


class VendorMissing(RuntimeError):
    """The vendor definitions are not in the cache and could not be fetched."""


def cache_root() -> Path:
    base = os.environ.get("HWEMU_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "hwemu")
    return Path(base) / "hexagon"


def imported_dir() -> Path:
    """The folder holding the vendor's *.idef / *.def files (fetched and extracted on first use)."""
    dest = cache_root() / f"qemu-{QEMU_VERSION}" / "imported"
    if (dest / "encode_pp.def").is_file():
        return dest
    src = cache_root() / "src"
    tarball = _orig_tarball(src) or _download(src)
    _extract(tarball, dest)
    shutil.rmtree(src, ignore_errors=True)  # the 23 MB tarball is no longer needed
    return dest


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
    """Extract only .../target/hexagon/imported/ (regular files) from the orig tarball, atomically."""
    tmp = dest.with_name(f"{dest.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    n = 0
    with tarfile.open(tarball, "r|*") as tf:  # a stream: one pass over the 23 MB archive
        for m in tf:
            head, sep, rel = m.name.partition(_MEMBER)
            if not sep or not m.isfile() or head.count("/") != 1 or ".." in rel.split("/"):
                continue
            out = tmp / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            data = tf.extractfile(m)
            assert data is not None
            out.write_bytes(data.read())
            n += 1
    if not (tmp / "encode_pp.def").is_file():
        shutil.rmtree(tmp, ignore_errors=True)
        raise VendorMissing(f"{tarball}: no {_MEMBER}encode_pp.def ({n} files matched)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(tmp, dest)
    except OSError:  # another process published it first
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    try:
        print(imported_dir())
    except VendorMissing as e:
        raise SystemExit(f"error: {e}") from None
