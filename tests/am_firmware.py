"""Test-only shim of one function of tinygrad's AM driver: its firmware lookup (`fetch_fw`, as amdev imported it).

tinygrad fetches each firmware file pinned by sha256 from a linux-firmware commit on the internet. Those files cannot
be downloaded on this machine, and Debian's builds of the same files have other hashes. So for the tests, a file
tinygrad cannot fetch is read from the distribution's package in hwemu's cache (emu.pci_mock.firmware). tinygrad's
own lookup goes first: with the pinned firmware in tinygrad's own cache nothing is shimmed. Everything else in
tinygrad stays unmodified.
"""
from __future__ import annotations

import sys


def install() -> None:
    from tinygrad.runtime.support.am import amdev

    from emu.pci_mock import firmware
    tinygrads = amdev.fetch_fw
    if getattr(tinygrads, "__hwemu__", False):
        return

    def fetch_fw(path: str, name: str, sha256: str) -> bytes:
        try:
            return tinygrads(path, name, sha256)
        except OSError as e:  # urllib's URLError is one: no network, or no such file there
            local = firmware.path(name) if path == "amdgpu" else None
            if local is None:
                raise RuntimeError(f"firmware {path}/{name}: tinygrad could not fetch it ({e}) and hwemu's cache "
                                   f"has no distribution copy (run `./dev firmware`)") from e
            print(f"am_firmware: {name} from the distribution's package ({local})", file=sys.stderr)
            return local.read_bytes()
    fetch_fw.__hwemu__ = True
    amdev.fetch_fw = fetch_fw
