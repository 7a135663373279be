"""Helpers shared by the tests/test_dsp_* modules."""
import pytest


def vendor_isa():
    """The Hexagon instruction table, or a skip with the reason (the vendor definitions come from Debian's
    qemu source package, which ./dev fetches as root)."""
    from emu.dsp.isa import load
    from emu.dsp.vendor import VendorMissing
    try:
        return load()
    except VendorMissing as e:
        pytest.skip(f"Hexagon vendor definitions unavailable: {e}")
