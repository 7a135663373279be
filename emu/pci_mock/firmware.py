"""The GPU firmware MOCKPCI's boot path loads: Debian's `firmware-amd-graphics` (component non-free-firmware; the
`<codename>-backports` suite has gc 11/12, psp 13/14, smu 13/14 and sdma 6/7 files), unpacked into hwemu's cache
(`<cache>/firmware/amdgpu/`), never into the system.

`fetch()` (`python -m emu.pci_mock.firmware`) derives a temporary apt configuration from the machine's own Debian
sources (the first deb822 stanza with the main component: its URIs and keyring, the backports suite of its first
suite, the non-free-firmware component) and points apt at private folders in a temporary directory, so the
system's apt lists and sources stay as they are and no root is needed. It runs `apt-get update` and
`apt-get download firmware-amd-graphics/<codename>-backports`, and unpacks with `dpkg-deb -x` only the files of the
chips hwemu models (FILES). It says what it did, or why it could not (no apt, no Debian source, no network),
without raising: a missing file is the PSP's to refuse (emu.pci_mock.psp), and the tests that need firmware skip.
"""
from __future__ import annotations

import functools
import getpass
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from emu import cache
from emu.amd import target

PACKAGE, COMPONENT = "firmware-amd-graphics", "non-free-firmware"
SOURCES = Path("/etc/apt/sources.list.d")
TIMEOUT = 600  # seconds for each apt step
UNPACKED = ".unpacked"  # in folder(): the name of the package unpacked there


def folder() -> Path:
    return cache.root() / "firmware" / "amdgpu"


def _ver(v: tuple[int, int, int]) -> str:
    return "_".join(map(str, v))


def names(t: target.Target) -> list[str]:
    """The firmware files chip `t`'s boot loads (amdgpu's names: psp_<MP0>_sos, smu_<MP1>, sdma_<SDMA>, gc_<GC>_*)."""
    if t.mp0 is None:
        return []
    gc = f"gc_{_ver(t.gc)}"
    parts = (["pfp", "me"] if t.gc >= (12, 0, 0) else []) + ["mec", "imu", "rlc"]
    return [f"psp_{_ver(t.mp0)}_sos.bin", f"smu_{_ver(t.mp1)}.bin", f"sdma_{_ver(t.sdma)}.bin",
            *(f"{gc}_{p}.bin" for p in parts)]


FILES = sorted({n for t in target.TARGETS.values() for n in names(t)})


def path(name: str) -> Path | None:
    """The cached firmware file `name` (e.g. 'psp_13_0_0_sos.bin'), or None when it was not fetched."""
    p = folder() / name
    return p if p.is_file() else None


SIGNED_MAGIC, MAGIC_AT, IMAGE_HEADER = b"$PS1", 0x10, 0x100  # a signed image's header (emu.pci_mock.psp)


def identify(header: bytes) -> str | None:
    """The cached firmware file holding the signed image whose 256-byte header is `header`, or None."""
    return _signed_images(str(folder())).get(bytes(header[:IMAGE_HEADER]))


@functools.cache
def _signed_images(where: str) -> dict[bytes, str]:
    """Every signed image header in the cached files -> the file's name (read once per process)."""
    out: dict[bytes, str] = {}
    for f in sorted(Path(where).glob("*.bin")):
        try:
            data = f.read_bytes()
        except OSError:
            continue
        at = data.find(SIGNED_MAGIC)
        while at >= MAGIC_AT:
            out.setdefault(data[at - MAGIC_AT:at - MAGIC_AT + IMAGE_HEADER], f.name)
            at = data.find(SIGNED_MAGIC, at + 1)
    return out


def backports_stanza(sources: str) -> str | None:
    """A deb822 stanza for the backports suite's non-free-firmware, derived from `sources` (the text of a
    .sources file): the first `Types: deb` stanza with the main component, its URIs and Signed-By kept."""
    for stanza in re.split(r"\n\s*\n", sources):
        fields = dict(re.findall(r"^([A-Za-z-]+):[ \t]*(.*)$", stanza, re.M))
        if "deb" in fields.get("Types", "").split() and "main" in fields.get("Components", "").split() \
                and fields.get("URIs") and fields.get("Suites"):
            codename = fields["Suites"].split()[0].split("-")[0]
            lines = ["Types: deb", f"URIs: {fields['URIs']}", f"Suites: {codename}-backports",
                     f"Components: {COMPONENT}"]
            if fields.get("Signed-By"):
                lines.append(f"Signed-By: {fields['Signed-By']}")
            return "\n".join(lines) + "\n"
    return None


def _machine_stanza() -> str | None:
    for f in sorted(SOURCES.glob("*.sources")):
        try:
            stanza = backports_stanza(f.read_text())
        except OSError:
            continue
        if stanza:
            return stanza
    return None


def fetch(log=print) -> bool:
    """Fetch the missing FILES into folder() (see the module docstring), once: whether the package was unpacked
    (now or before; the files it lacks, e.g. the APUs' PSP, stay missing)."""
    missing = [n for n in FILES if path(n) is None]
    if not missing or (folder() / UNPACKED).is_file():
        return True
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        log(f"firmware: not fetched: this machine has no apt-get/dpkg-deb to download {PACKAGE}")
        return False
    stanza = _machine_stanza()
    if stanza is None:
        log(f"firmware: not fetched: no Debian deb822 source with the main component in {SOURCES}")
        return False
    with tempfile.TemporaryDirectory(prefix="hwemu-firmware-") as tmp:
        t = Path(tmp)
        for d in ("parts", "lists/partial", "cache/archives/partial", "deb", "x"):
            (t / d).mkdir(parents=True)
        (t / "parts" / "backports.sources").write_text(stanza)
        (t / "empty.list").write_text("")
        apt = ["-o", f"Dir::Etc::SourceList={t}/empty.list", "-o", f"Dir::Etc::SourceParts={t}/parts",
               "-o", f"Dir::State::Lists={t}/lists", "-o", f"Dir::Cache={t}/cache", "-o", "Debug::NoLocking=1",
               "-o", f"APT::Sandbox::User={getpass.getuser()}"]  # apt's own sandbox user cannot write here
        uris = re.search(r"^URIs: (.*)$", stanza, re.M)[1]
        suite = re.search(r"^Suites: (.*)$", stanza, re.M)[1]
        log(f"firmware: downloading {PACKAGE} from {uris} {suite}/{COMPONENT} with a temporary apt configuration "
            f"(the system's apt sources and lists are not changed)")
        steps = (["apt-get", *apt, "-qq", "update"], ["apt-get", *apt, "-qq", "download", f"{PACKAGE}/{suite}"])
        for cmd, cwd in zip(steps, (t, t / "deb"), strict=True):
            try:
                r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT)
            except (OSError, subprocess.TimeoutExpired) as e:
                log(f"firmware: not fetched: {cmd[0]} {cmd[-2]}: {e}")
                return False
            if r.returncode != 0:
                log(f"firmware: not fetched: {' '.join(cmd[-2:])} failed: {(r.stderr or r.stdout).strip()[-400:]}")
                return False
        debs = list((t / "deb").glob("*.deb"))
        if not debs:
            log(f"firmware: not fetched: apt-get download gave no {PACKAGE} package")
            return False
        r = subprocess.run(["dpkg-deb", "-x", str(debs[0]), str(t / "x")], capture_output=True, text=True)
        if r.returncode != 0:
            log(f"firmware: not unpacked: dpkg-deb: {r.stderr.strip()[-400:]}")
            return False
        src, dest = t / "x" / "lib" / "firmware" / "amdgpu", folder()
        dest.mkdir(parents=True, exist_ok=True)
        got = [n for n in missing if (src / n).is_file()]
        for n in got:
            shutil.copyfile(src / n, dest / n)
        log(f"firmware: unpacked {len(got)} files of {debs[0].name} into {dest}"
            + (f"; the package lacks {', '.join(sorted(set(missing) - set(got)))}" if len(got) < len(missing) else ""))
        (dest / UNPACKED).write_text(debs[0].name + "\n")
    return True


if __name__ == "__main__":
    sys.exit(0 if fetch(lambda m: print(m, file=sys.stderr)) else 1)
