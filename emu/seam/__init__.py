"""hwemu's native seam: an LD_PRELOAD library (seam.c) through which any program, in any language, reaches the mock
GPUs by the libc calls a GPU runtime makes (docs/seam.md). `environment(env, arch, gpus)` is what `hwemu run` adds
to a program's environment: the library (built on first use, emu.seam.build), the sysfs folder it serves, the mock
system's chip and GPU count.

The sysfs files (the KFD topology, the render nodes' device folders, the amdgpu module) are real files in a folder
of the cache, written once per content (emu.amd.topology.sysfs_files) and named by its hash; the seam hands a
client the folder's path in place of /sys/...'s. So libc's own fopen, opendir, stat, readlink and realpath serve them,
buffered reads and directory streams included, and a client that only reads the topology never starts Python.
"""
from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from emu import cache
from emu.amd import topology

LOG, SYSFS, ARCH, GPUS = "HWEMU_SEAM_LOG", "HWEMU_SEAM_SYSFS", "HWEMU_SEAM_ARCH", "HWEMU_SEAM_GPUS"
# what a system with amdgpu loaded shows beside the topology (rocminfo asks lsmod, which reads /proc/modules and
# /sys/module): the module list is the machine's with amdgpu's line added; a path ending in / is an empty folder
MODULE = {"/sys/module/amdgpu/initstate": "live\n", "/sys/module/amdgpu/refcnt": "0\n",
          "/sys/module/amdgpu/holders/": ""}
AMDGPU_MODULE = "amdgpu 16384 0 - Live 0x0000000000000000\n"  # /proc/modules: name size refcount users state address
DRM_MAJOR = 226


def _drm(gpus: int) -> tuple[dict[str, str], dict[str, str]]:
    """(files, symlinks) that make a render node's descriptor a DRM device to libdrm: /sys/dev/char/226:MINOR leads
    to the node's class folder, whose device folder lists the node under drm/."""
    files, links = {}, {"/sys/class/kfd/kfd": "../../devices/virtual/kfd/kfd"}  # amdkfd's class device link
    for minor in range(topology.FIRST_RENDER_MINOR, topology.FIRST_RENDER_MINOR + gpus):
        files[f"/sys/class/drm/renderD{minor}/device/drm/renderD{minor}/dev"] = f"{DRM_MAJOR}:{minor}\n"
        links[f"/sys/dev/char/{DRM_MAJOR}:{minor}"] = f"../../class/drm/renderD{minor}"
    return files, links


def sysfs_dir(arch: str | None, gpus: int) -> Path:
    """The folder holding the sysfs files (and device node placeholders) of `gpus` GPUs of `arch` under their paths."""
    files, links = _drm(gpus)
    files.update(topology.sysfs_files(arch or topology.DEFAULT_ARCH, gpus), **MODULE)
    files["/proc/modules"] = _modules()
    key = hashlib.sha256(repr((sorted(files.items()), sorted(links.items()))).encode()).hexdigest()[:16]
    out = cache.root() / "seam-sysfs" / key
    if out.is_dir():
        return out
    tmp = out.with_name(f"{key}.tmp{os.getpid()}")
    for path, text in files.items():
        f = tmp / path.lstrip("/")
        if path.endswith("/"):
            f.mkdir(parents=True, exist_ok=True)
        else:
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(text or "")
    for path, target in links.items():
        (tmp / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (tmp / path.lstrip("/")).symlink_to(target)
    try:
        os.rename(tmp, out)
    except OSError:  # another process wrote it first
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _modules() -> str:
    try:
        with open("/proc/modules") as f:
            lines = [line for line in f if not line.startswith("amdgpu ")]
    except OSError:  # a container may have none
        lines = []
    return "".join(lines) + AMDGPU_MODULE


def environment(env: dict[str, str], arch: str | None, gpus: int) -> dict[str, str]:
    """`env` with the seam preloaded (first in LD_PRELOAD) for a mock system of `gpus` GPUs of `arch`. Raises
    emu.seam.build.BuildError when the library cannot be built."""
    from emu.seam.build import library
    lib = str(library())
    preload = [p for p in env.get("LD_PRELOAD", "").replace(":", " ").split() if p != lib]
    return {**env, "LD_PRELOAD": " ".join([lib, *preload]), SYSFS: str(sysfs_dir(arch, gpus)),
            ARCH: arch or topology.DEFAULT_ARCH, GPUS: str(gpus)}
