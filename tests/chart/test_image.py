"""The container image, as far as it can be checked without a container engine.

No image can be built where the tests run, so the Dockerfile's shape is checked statically and
its build and install steps (``pip wheel .``, then ``pip install <wheel>`` into a fresh venv) are
run for real in a clean virtual environment. Dependencies come from a local wheelhouse filled by
``pip download`` on first use (``$KQUEUE_CACHE_DIR/wheelhouse``): the resolution is the same as
from the index, without downloading ~40 wheels on every run.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from kqueue import __version__
from kqueue.localcluster.build import cache_dir
from tests.chart.conftest import CHART, ROOT

DOCKERFILE = ROOT / "Dockerfile"


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out: list[tuple[str, str]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile_is_multi_stage_non_root_and_runs_the_controller() -> None:
    ins = _instructions()
    args = dict(a.split("=", 1) for w, a in ins if w == "ARG" and "=" in a)
    assert args["PYTHON_IMAGE"] == "python:3.11-slim"
    froms = [a for w, a in ins if w == "FROM"]
    assert froms == ["${PYTHON_IMAGE} AS build", "${PYTHON_IMAGE}"]
    stages: list[list[tuple[str, str]]] = []
    for word, rest in ins:
        if word == "FROM":
            stages.append([])
        elif stages:
            stages[-1].append((word, rest))
    build, runtime = stages
    assert any(w == "RUN" and "pip wheel" in a and " ." in a for w, a in build)
    install = [a for w, a in runtime if w == "RUN"]
    assert any("python -m venv /opt/kqueue" in a and "pip install /wheels/" in a for a in install)
    # Nothing of the source tree reaches the runtime stage.
    assert not any(w in ("COPY", "ADD") for w, _ in runtime)
    assert ("USER", "65532:65532") in runtime
    assert runtime[-1] == ("ENTRYPOINT", '["kqueue", "run"]')


def test_chart_image_values_point_at_the_dockerfile_image() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert values["image"]["repository"] == "ghcr.io/kqueue/kqueue"
    assert values["image"]["tag"] == ""  # the appVersion
    assert chart["appVersion"] == __version__
    # The pod's user is the image's.
    assert values["podSecurityContext"]["runAsUser"] == 65532


def _run(*argv: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv], cwd=cwd, capture_output=True, text=True, timeout=900, check=False
    )


def _ok(res: subprocess.CompletedProcess[str], what: str) -> None:
    assert res.returncode == 0, f"{what} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}"


def _pip_offline_then_online(
    pip: Path, wheelhouse: Path, fill: list[str], *args: str
) -> subprocess.CompletedProcess[str]:
    """``pip <args>`` from the wheelhouse; on a miss, ``pip download`` what is needed, retry."""
    offline = ("--no-index", "--find-links", str(wheelhouse))
    res = _run(pip, *args, *offline)
    if res.returncode == 0:
        return res
    _ok(_run(pip, "download", "--quiet", "--dest", wheelhouse, *fill), "pip download")
    return _run(pip, *args, *offline)


# On a cold cache the wheelhouse is filled from the index first, and in `make test` this runs at
# nice 15 beside the cluster tests: a cold CI run took over 10 minutes here (each pip call is
# bounded by _run's own timeout).
@pytest.mark.timeout(1800)
def test_wheel_builds_and_installs_into_a_clean_venv(tmp_path: Path) -> None:
    """The Dockerfile's two steps: `pip wheel .` and `pip install <wheel>` in a new venv."""
    wheelhouse = cache_dir() / "wheelhouse"
    wheelhouse.mkdir(parents=True, exist_ok=True)
    venv = tmp_path / "venv"
    # A clean venv: no system site-packages, nothing but pip.
    _ok(_run(sys.executable, "-m", "venv", venv), "python -m venv")
    pip = venv / "bin" / "pip"
    cfg = (venv / "pyvenv.cfg").read_text()
    assert "include-system-site-packages = false" in cfg

    build_requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"][
        "requires"
    ]
    dist = tmp_path / "dist"
    res = _pip_offline_then_online(
        pip,
        wheelhouse,
        build_requires,
        "wheel",
        "--quiet",
        "--no-deps",
        "--wheel-dir",
        str(dist),
        str(ROOT),
    )
    _ok(res, "pip wheel .")
    wheels = list(dist.glob("kqueue-*.whl"))
    assert [w.name for w in wheels] == [f"kqueue-{__version__}-py3-none-any.whl"]

    # --no-compile only saves time: byte-compilation does not change what gets installed.
    res = _pip_offline_then_online(
        pip, wheelhouse, [str(wheels[0])], "install", "--quiet", "--no-compile", str(wheels[0])
    )
    _ok(res, "pip install <wheel>")
    res = _run(venv / "bin" / "kqueue", "version", cwd=tmp_path)
    _ok(res, "kqueue version")
    assert res.stdout.startswith(f"kqueue {__version__} ")
    # The console script really comes from the venv, not from the repository's checkout.
    res = _run(venv / "bin" / "python", "-c", "import kqueue; print(kqueue.__file__)", cwd=tmp_path)
    _ok(res, "import kqueue")
    assert res.stdout.strip().startswith(str(venv))
    # The image's entrypoint, with the flag the chart's Deployment passes.
    res = _run(venv / "bin" / "kqueue", "run", "--help", cwd=tmp_path)
    _ok(res, "kqueue run --help")
    assert "--config" in res.stdout
