"""pytest plugin (entry point `hwemu-mock`): the mock devices under `DEV=MOCK...+AMD pytest`.

- tinygrad 0.14 in the tests uses hwemu's MOCKKFD (emu.os.tinygrad) instead of any other mock (HWEMU=0: not),
  also in the Python programs the tests start (emu/os/boot goes first on PYTHONPATH, as under `hwemu run`);
- with `MOCKDSP=1 DEV=DSP`, the Hexagon programs of tinygrad's mock DSP run on hwemu's core (emu.dsp.mockdsp);
- the GPU faults the emulated GPUs recorded while a test ran (kind, address, wave, PC, instruction) are added
  to that test's report, so a failing test shows what its kernels did wrong.
"""
from __future__ import annotations

import os

import pytest

from emu.dsp import mockdsp
from emu.os import tinygrad

if tinygrad.install():  # at plugin load, before any test module imports tinygrad
    _boot = os.path.join(os.path.dirname(os.path.abspath(__file__)), "boot")
    _rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != _boot]
    os.environ["PYTHONPATH"] = os.pathsep.join([_boot, *_rest])
mockdsp.install()
_SEEN = pytest.StashKey[int]()


def _faults() -> list:
    from emu.os import systems
    return [(g, rec) for s in systems() for g in s.gpus for rec in g.faults]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    new = _faults()[item.stash.get(_SEEN, 0):]
    if new and report.when == "call":
        report.sections.append(("hwemu GPU faults", "\n".join(f"{g.name}: {rec}" for g, rec in new)))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    item.stash[_SEEN] = len(_faults())

