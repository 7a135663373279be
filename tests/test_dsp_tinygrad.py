"""tinygrad 0.14's MOCKDSP mode (MOCKDSP=1 DEV=DSP) running its Hexagon programs on hwemu: the programs it
compiles with clang for hexagonv65/HVX go to `qemu-hexagon-static`, which here is hwemu (emu.dsp shims)."""
import os
import subprocess
import sys

import pytest
from dsp_support import vendor_isa

from emu.dsp.__main__ import write_shims
from tools import dsp_llvm_agreement as la

SCRIPT = """
import numpy as np
from tinygrad import Tensor
a = np.arange(64, dtype=np.float32).reshape(8, 8) / 7
b = np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)
ta, tb = Tensor(a), Tensor(b)
assert np.allclose((ta + tb).numpy(), a + b), "elementwise"
assert np.allclose(ta.sum(axis=1).numpy(), a.sum(axis=1), rtol=1e-5), "reduction"
assert np.allclose((ta @ tb).numpy(), a @ b, rtol=1e-4, atol=1e-5), "matmul"
i = np.arange(300, dtype=np.int32) - 150
assert ((Tensor(i) * 3 + 7).numpy() == i * 3 + 7).all(), "int32"
print("ok")
"""


@pytest.mark.skipif(not la.corpus_available(), reason="clang-19 / ld.lld-19 not installed (./dev)")
def test_tinygrad_mockdsp_runs_on_hwemu(tmp_path):
    vendor_isa()
    shims = write_shims(tmp_path)
    log = tmp_path / "calls"
    shims[0].write_text(shims[0].read_text().replace("exec ", f"echo \"$@\" >> {log}\nexec ", 1))
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}", "MOCKDSP": "1", "DEV": "DSP",
           "CC": "clang-19"}
    r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
    assert len(log.read_text().splitlines()) >= 4  # every kernel ran on hwemu


USER_TEST = """
import os, shutil
from tinygrad import Tensor
def test_add_on_hwemus_hexagon_core():
    assert os.environ["MOCKDSP"] == "1" and "emu/dsp/launcher.py" in open(shutil.which("qemu-hexagon-static")).read()
    assert os.path.exists(os.environ["HWEMU_DSP_SERVER"])  # the programs fork from hwemu's server
    assert (Tensor([1.0, 2.0, 3.0]) + 1).tolist() == [2.0, 3.0, 4.0]
"""


@pytest.mark.skipif(not la.corpus_available(), reason="clang-19 / ld.lld-19 not installed (./dev)")
@pytest.mark.parametrize("how", ["pytest", "hwemu run"])
def test_plain_pytest_and_hwemu_run_reach_hwemu(tmp_path, how):
    """`MOCKDSP=1 DEV=DSP pytest` (the pytest plugin) and `hwemu run --dev DSP -- pytest` (which sets MOCKDSP=1)
    put hwemu's qemu-hexagon first on PATH, with CC left for hwemu to choose, and start its fork server."""
    vendor_isa()
    (tmp_path / "test_user.py").write_text(USER_TEST)
    env = {k: v for k, v in os.environ.items() if k not in ("CC", "MOCKDSP", "HWEMU")}
    pytest_cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py"]
    if how == "pytest":
        cmd, env = pytest_cmd, {**env, "MOCKDSP": "1", "DEV": "DSP"}
    else:
        cmd = [sys.executable, "-m", "emu.cli", "run", "--dev", "DSP", "--", *pytest_cmd]
    r = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert "1 passed" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]
