"""`./dev`'s deb-src entry for the Hexagon vendor download, derived from the machine's own apt sources (deb822
`.sources` stanzas or one-line `sources.list` entries, sources.list(5)): the same URIs, suites, components and keyring,
whatever archive they name. The function runs in bash on sources files in a temporary folder."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

DEV = Path(__file__).resolve().parent.parent / "dev"
pytestmark = pytest.mark.skipif(shutil.which("bash") is None or shutil.which("awk") is None, reason="needs bash, awk")

MIRROR_STANZA = ("Types: deb\n# a comment\nURIs: http://mirror.invalid/debian\nSuites: trixie trixie-updates\n"
                 "Components: main contrib\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")
ONE_LINE = "deb [signed-by=/usr/share/keyrings/k.gpg] http://mirror.invalid/debian trixie main non-free-firmware\n"


def _derived(etc: Path) -> str:
    """deb_src_of_configured_sources's output for the apt folder `etc`, run under the `set -euo pipefail` of ./dev."""
    script = (f"set -euo pipefail; source <(sed -n '/^deb_src_of_configured_sources()/,/^}}/p' '{DEV}'); "
              f"entry=$(deb_src_of_configured_sources '{etc}'); printf '%s' \"$entry\"")
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _apt(tmp_path: Path, sources: str = "", sources_list: str = "") -> Path:
    (tmp_path / "sources.list.d").mkdir()
    if sources:
        (tmp_path / "sources.list.d" / "mirror.sources").write_text(sources)
    if sources_list:
        (tmp_path / "sources.list").write_text(sources_list)
    return tmp_path


def test_deb822_stanza_with_main_becomes_deb_src(tmp_path):
    other = "Types: deb\nURIs: http://mirror.invalid/other\nSuites: nodistro\nComponents: contrib\n"
    disabled = "Enabled: no\nTypes: deb\nURIs: http://mirror.invalid/old\nSuites: trixie\nComponents: main\n"
    etc = _apt(tmp_path, f"{other}\n{disabled}\n{MIRROR_STANZA}", ONE_LINE)
    assert _derived(etc) == "Types: deb-src\n" + MIRROR_STANZA.split("\n", 1)[1].rstrip("\n")


def test_one_line_entry_with_main_becomes_deb_src(tmp_path):
    etc = _apt(tmp_path, "Types: deb\nURIs: http://mirror.invalid/x\nSuites: s\nComponents: mainline\n",
               "# deb http://mirror.invalid/commented trixie main\ndeb http://mirror.invalid/ports trixie contrib\n"
               + ONE_LINE)
    assert _derived(etc) == ("deb-src [signed-by=/usr/share/keyrings/k.gpg] http://mirror.invalid/debian trixie main "
                             "non-free-firmware")


def test_no_source_with_main_gives_nothing(tmp_path):
    assert _derived(_apt(tmp_path, "", "deb http://mirror.invalid/debian trixie contrib\n")) == ""
    assert _derived(tmp_path / "absent") == ""
