"""MOCKPCI's firmware source (emu.pci_mock.firmware): the apt source derived from the machine's own, the file names
of each chip (checked against the names tinygrad's AM driver pins), and the cached files' amdgpu headers."""
from __future__ import annotations

import struct

import pytest

from emu.amd import target
from emu.pci_mock import firmware

SOURCES = """Types: deb
URIs: http://mirror.invalid/other
Suites: nodistro
Components: contrib
Signed-By: /usr/share/keyrings/other.gpg

Types: deb
# a comment
URIs: http://mirror.invalid/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def test_backports_stanza_keeps_the_uris_and_keyring():
    assert firmware.backports_stanza(SOURCES) == (
        "Types: deb\nURIs: http://mirror.invalid/debian\nSuites: bookworm-backports\n"
        "Components: non-free-firmware\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")
    assert firmware.backports_stanza("Types: deb-src\nURIs: x\nSuites: bookworm\nComponents: main\n") is None


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1101", "gfx1102", "gfx1200", "gfx1201"])
def test_names_are_the_ones_tinygrads_am_driver_pins(arch):
    """tinygrad's AM driver pins a sha256 for every file it loads (autogen/am/fw.py); each name here is one."""
    fw = pytest.importorskip("tinygrad.runtime.autogen.am.fw")
    names = firmware.names(target.get(arch))
    assert len(names) == (8 if arch.startswith("gfx12") else 6)
    assert set(names) <= set(fw.hashes), set(names) - set(fw.hashes)


def test_no_apt_is_a_note_not_an_error(monkeypatch, tmp_path):
    monkeypatch.setenv("HWEMU_CACHE", str(tmp_path))
    monkeypatch.setattr(firmware.shutil, "which", lambda _name: None)
    said = []
    assert firmware.fetch(said.append) is False
    assert said == ["firmware: not fetched: this machine has no apt-get/dpkg-deb to download firmware-amd-graphics"]
    assert firmware.path("psp_13_0_0_sos.bin") is None


@pytest.mark.parametrize("name", firmware.FILES)
def test_cached_files_carry_amdgpus_common_header(name):
    """amdgpu_ucode.h's common_firmware_header: size_bytes is the file's size, the ucode lies inside it."""
    p = firmware.path(name)
    if p is None:
        pytest.skip(f"{name} is not in hwemu's cache (`./dev firmware` fetches it; APUs' PSP files are not packaged)")
    blob = p.read_bytes()
    size, header_size, _major, _minor, _ipmaj, _ipmin, _ver, ucode_size, ucode_off, _crc = \
        struct.unpack_from("<IIHHHHIIII", blob)
    assert size == len(blob) and header_size <= size and ucode_off + ucode_size <= size
