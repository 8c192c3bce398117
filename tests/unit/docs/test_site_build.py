"""The documentation site builds strictly (a broken link, a missing page or a snippet that does not
exist fails `mkdocs build --strict`, as in `make docs`), and renders: headless Chromium (Debian's
`chromium`, installed by docker/prerequisites.sh) screenshots the landing page and a guide, and the
DOM it rendered holds the site's navigation with every section of mkdocs.yml. The screenshots are
kept in .docs-screenshots/ for a person to look at."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from docs.hooks.codeblocks import REPO

SHOTS = REPO / ".docs-screenshots"
PAGES = {"landing": "index.html", "guide": "guides/event-store/index.html"}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    mkdocs = Path(sys.executable).with_name("mkdocs")
    done = subprocess.run(
        [str(mkdocs), "build", "--strict", "--quiet", "--site-dir", str(out)],
        cwd=REPO,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr[-4000:]}"
    return out


def test_generated_pages_are_built(site: Path) -> None:
    for page in (
        "reference/cli",
        "reference/configuration",
        "reference/api",
        "performance",
        "performance/history",
    ):
        assert (site / page / "index.html").is_file(), page
    assert "MATERIALIZERS_TRIGGER" in (site / "reference/configuration/index.html").read_text()
    assert "--small-batch-rows" in (site / "reference/cli/index.html").read_text()


def chromium(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    assert binary, "chromium is not installed: run `make prerequisites` (docker/prerequisites.sh installs it)"
    command = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def sections() -> list[str]:
    config = yaml.load((REPO / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)
    return [next(iter(entry)) for entry in config["nav"]]


@pytest.mark.parametrize("name", sorted(PAGES))
def test_the_page_renders_its_navigation(name: str, site: Path, tmp_path: Path) -> None:
    url = (site / PAGES[name]).as_uri()
    dom = chromium("--virtual-time-budget=5000", "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'class="md-nav' in dom.stdout and "md-tabs" in dom.stdout, "no navigation rendered"
    missing = [s for s in sections() if s not in dom.stdout]
    assert not missing, f"navigation lacks {missing}"
    shot = tmp_path / f"{name}.png"
    taken = chromium("--window-size=1280,900", f"--screenshot={shot}", url)
    assert taken.returncode == 0 and shot.is_file(), taken.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 20_000, "the screenshot is nearly empty"
    SHOTS.mkdir(exist_ok=True)
    shutil.copy(shot, SHOTS / shot.name)
