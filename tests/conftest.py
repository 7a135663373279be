"""Hypothesis profiles: `dev` (the default) draws new random examples on every run, `ci` (CI=true) a fixed,
derandomized set, so that a submission's result is reproducible; both draw the modest counts the tests name.
`explore` (`./dev test --hypothesis-profile=explore`) draws new random examples, in the thousands where a test names
a deeper count (depth.examples). Whole-wave examples are large and the machines are shared, so the timing and size
health checks are off (they judge the machine, not the code)."""
import os
import sys

# pytest caches the modules it rewrites (tests, and hwemu's own, whose pytest plugins mark the packages) only where
# bytecode may be written; where PYTHONDONTWRITEBYTECODE is set, every xdist worker would rewrite them all again on
# every run (seconds each). Like `./dev`'s compileall for hwemu's modules, the suite writes this bytecode (before
# importing hypothesis, whose package its plugin marks too).
sys.dont_write_bytecode = False

from hypothesis import HealthCheck, settings  # noqa: E402

_COMMON = dict(deadline=None, print_blob=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])
settings.register_profile("ci", derandomize=True, **_COMMON)
settings.register_profile("dev", **_COMMON)
settings.register_profile("explore", **_COMMON)
settings.load_profile("ci" if os.environ.get("CI") else "dev")  # pytest's --hypothesis-profile loads another
# A translator bug on the compile thread fails the test (a wave fault) rather than running interpreted (jit.py).
os.environ.setdefault("HWEMU_STRICT", "1")

# The dispatch watchdog runs with its default (60 s of engine CPU time, which waiting on a loaded machine does not
# spend): a correct kernel of the corpora never reaches it; the watchdog's own tests set their budgets explicitly.
