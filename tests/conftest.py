"""Hypothesis profiles: CI (CI=true) runs a fixed, derandomized set of examples so that a submission's
result is reproducible; local runs explore new random examples every time."""
import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
