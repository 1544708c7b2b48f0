"""Headless Chromium (Debian's ``chromium`` package) for the web view's tests.

Installed on first use the way ``make test`` installs what it needs: ``apt-get update`` then
``apt-get install -y chromium`` when it is not on the PATH. If it cannot be installed the test
fails saying why; it never skips.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest

_NAMES = ("chromium", "chromium-browser")


def _found() -> str | None:
    return next((p for n in _NAMES if (p := shutil.which(n))), None)


def ensure_chromium() -> str:
    found = _found()
    if found:
        return found
    apt = shutil.which("apt-get")
    if apt is None:
        pytest.fail("chromium is not installed and there is no apt-get to install it with")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    for args in (["update"], ["install", "-y", "chromium"]):
        res = subprocess.run(
            [*sudo, apt, *args], capture_output=True, text=True, timeout=900, env=env, check=False
        )
        if res.returncode != 0:
            pytest.fail(
                f"chromium is not installed and `apt-get {' '.join(args)}` failed "
                f"({res.returncode}):\n{res.stderr[-2000:]}"
            )
    found = _found()
    if not found:
        pytest.fail("apt-get install -y chromium succeeded but no chromium is on the PATH")
    return found


@dataclass(frozen=True)
class Chromium:
    binary: str
    profile: Path

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                self.binary,
                "--headless",
                "--no-sandbox",  # tests run as root in containers
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--hide-scrollbars",
                f"--user-data-dir={self.profile}",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def dump_dom(self, url: str) -> str:
        res = self._run("--dump-dom", url)
        assert res.returncode == 0 and res.stdout.strip(), (
            f"chromium --dump-dom {url} failed ({res.returncode}): {res.stderr[-2000:]}"
        )
        return res.stdout

    def screenshot(self, url: str, path: Path, *, width: int = 1280, height: int = 900) -> Path:
        res = self._run(f"--screenshot={path}", f"--window-size={width},{height}", url)
        assert res.returncode == 0 and path.is_file(), (
            f"chromium --screenshot {url} failed ({res.returncode}): {res.stderr[-2000:]}"
        )
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
        return path


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    text: str = ""


class _Collector(HTMLParser):
    """Every element with its attributes and its text (its descendants' included)."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[Element] = []
        self._open: list[Element] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        el = Element(tag, {k: v or "" for k, v in attrs})
        self.elements.append(el)
        if tag not in {"meta", "br", "img", "input", "link", "hr"}:
            self._open.append(el)

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self._open) - 1, -1, -1):
            if self._open[i].tag == tag:
                del self._open[i:]
                break

    def handle_data(self, data: str) -> None:
        for el in self._open:
            el.text += data


def elements(dom: str) -> list[Element]:
    parser = _Collector()
    parser.feed(dom)
    return parser.elements


def select(dom: str, *, tag: str | None = None, cls: str | None = None, **attrs: str) -> list[Element]:
    """Elements of ``dom`` with ``tag``, the class ``cls`` and these attributes (``data_x`` is
    ``data-x``; ``id_`` is ``id``)."""
    want = {k.rstrip("_").replace("_", "-"): v for k, v in attrs.items()}
    return [
        e
        for e in elements(dom)
        if (tag is None or e.tag == tag)
        and (cls is None or cls in e.attrs.get("class", "").split())
        and all(e.attrs.get(k) == v for k, v in want.items())
    ]
