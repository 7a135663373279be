"""How many examples the hypothesis tests that search deeper when asked draw (profiles: tests/conftest.py)."""
from hypothesis import settings


def examples(modest: int, deep: int) -> int:
    """`deep` under the `explore` profile, else `modest` (the `dev` and `ci` profiles). Called when a test module is
    imported, after pytest has loaded the profile."""
    return deep if settings.get_current_profile_name() == "explore" else modest
