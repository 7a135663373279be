"""pytest plugin (entry point `hwemu`): `DEV=MOCKKFD+AMD pytest` gives tests a `device` fixture, a
`stack.Device` from env DEV (default MOCKKFD+AMD), one per worker process (so `pytest -n N` works). After each test
the device is synchronized: a GPU fault the test left behind fails it, and every fault seen during a failing test
is added to its report under "GPU faults".
"""
from __future__ import annotations

import os

import pytest

from stack.device import DEFAULT_DEV, Device
from stack.hcq.signal import GPUError

FAULTS = pytest.StashKey[list]()


@pytest.fixture(scope="session")
def _hwemu_device() -> Device:
    return Device(os.environ.get("DEV", DEFAULT_DEV))


@pytest.fixture
def device(request, _hwemu_device: Device):
    """The GPU named by DEV, shared by the tests of this process; waits for the test's work afterwards."""
    faults = request.node.stash.setdefault(FAULTS, [])
    _hwemu_device.fault_log = faults
    yield _hwemu_device
    _hwemu_device.fault_log = None
    try:
        _hwemu_device.synchronize()
        left = None
    except GPUError as e:
        faults.append(left := str(e))
    if left:
        pytest.fail(f"GPU fault left behind by the test: {left}", pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    faults = item.stash.get(FAULTS, None)
    if faults and report.failed:
        report.sections.append(("GPU faults", "\n".join(dict.fromkeys(faults))))
