"""How `make test` orders its builds and cluster tests (docs/local-cluster.md, "CI"): a build
nothing waits for runs at a lower CPU priority, a session started beside a prebuild knows it is
running, and the tests that need an operator run after the rest."""

from __future__ import annotations

import itertools
import json
import os
import re
import stat
import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from _pytest.mark.expression import Expression

from kqueue.localcluster import build, operators, prebuild
from tests.fixtures import operators as operator_fixtures
from tests.fixtures import tools

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fake_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `go` on PATH that prints the niceness it runs at (what nice(1) prints without a command)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    go = bin_dir / "go"
    go.write_text("#!/bin/sh\nnice\n")
    go.chmod(go.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return go


@pytest.mark.parametrize("nice", [0, 10])
def test_a_build_runs_go_at_the_niceness_asked(fake_go: Path, tmp_path: Path, nice: int) -> None:
    log = tmp_path / "build.log"
    build._run_go(["version"], cwd=tmp_path, log_file=log, label="x", nice=nice)
    printed = int(log.read_text().splitlines()[-1])
    assert printed == min(19, os.nice(0) + nice)  # 19 is the lowest priority


def test_prebuild_running_is_true_only_while_a_prebuild_holds_its_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KQUEUE_CACHE_DIR", str(tmp_path))
    assert not build.prebuild_running()
    with build.prebuilding():
        assert build.prebuild_running()
    assert not build.prebuild_running()


def _item(nodeid: str, *fixtures: str) -> Any:
    return SimpleNamespace(nodeid=nodeid, fixturenames=list(fixtures))


def test_the_work_units_needing_an_operator_run_last_in_their_order() -> None:
    items = [
        _item("tests/controller_e2e/test_jobset.py::test_a", "cluster", "jobset_operator"),
        _item("tests/cluster/test_control_plane.py::test_b", "cluster"),
        # one test of a file needs an operator: the whole file (its work unit) moves
        _item("tests/controller_e2e/test_trainjob.py::test_plain", "cluster"),
        _item("tests/gang_e2e/test_gang.py::test_c", "cluster"),
        _item("tests/controller_e2e/test_trainjob.py::test_c", "trainer_operator"),
        _item("tests/reliability/test_crash.py::test_d", "cluster"),
    ]
    config = SimpleNamespace(rootpath=ROOT)
    operator_fixtures._operator_tests_last(config, items)  # type: ignore[arg-type]
    assert [i.nodeid for i in items] == [
        "tests/cluster/test_control_plane.py::test_b",
        "tests/gang_e2e/test_gang.py::test_c",
        "tests/reliability/test_crash.py::test_d",
        "tests/controller_e2e/test_jobset.py::test_a",
        "tests/controller_e2e/test_trainjob.py::test_plain",
        "tests/controller_e2e/test_trainjob.py::test_c",
    ]


def test_beside_a_prebuild_the_operators_are_waited_for_by_their_first_test(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At collection nothing is built (the other tests start once the control plane is up);
    the first test needing Trainer waits for JobSet's and Trainer's builds, once."""
    built: list[str] = []
    monkeypatch.setattr(operator_fixtures.operators, "built", lambda _op: None)
    monkeypatch.setattr(operator_fixtures.build, "prebuild_running", lambda: True)
    monkeypatch.setattr(
        operator_fixtures.operators, "ensure_built", lambda op, **_kw: built.append(op.name)
    )
    trainjob = _item("tests/controller_e2e/test_trainjob.py::test_c", "trainer_operator")
    plain = _item("tests/cluster/test_control_plane.py::test_b", "cluster")
    config = pytest.Config.__new__(pytest.Config)
    config.stash = pytest.Stash()
    config.pluginmanager = SimpleNamespace(get_plugin=lambda _name: None)  # type: ignore[assignment]
    session = SimpleNamespace(config=config, items=[plain, trainjob])
    session.config.option = SimpleNamespace(collectonly=False)  # type: ignore[attr-defined]

    operator_fixtures.pytest_collection_finish(session)  # type: ignore[arg-type]
    assert built == []
    for item in (plain, trainjob, trainjob):
        item.config = config
        run = operator_fixtures.pytest_runtest_protocol(item, None)
        next(run)  # the test would run here
        with pytest.raises(StopIteration):
            run.send(None)
    assert built == ["jobset", "trainer"]


def _phases() -> dict[str, str]:
    text = (ROOT / "hack" / "test-phases.sh").read_text()
    return dict(re.findall(r"^([A-Z_]+)='([^']*)'$", text, re.M))


def _markers() -> list[str]:
    ini = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    return [m.split(":", 1)[0] for m in ini["markers"]]


def test_the_pytest_runs_of_make_test_share_out_every_test_exactly_once() -> None:
    """Whatever markers a test carries, exactly one run of hack/test.sh selects it."""
    phases = _phases()
    assert set(phases) == {"UNIT_TESTS", "CLUSTER_PARALLEL", "CLUSTER_SERIAL"}
    markers = _markers()
    assert {"cluster", "serial"} <= set(markers)
    compiled = {name: Expression.compile(expr) for name, expr in phases.items()}
    for n in range(len(markers) + 1):
        for carried in itertools.combinations(markers, n):
            runs = [
                name
                for name, expr in compiled.items()
                if expr.evaluate(lambda marker, carried=carried: marker in carried)
            ]
            assert len(runs) == 1, f"a test marked {carried or 'nothing'} is selected by {runs}"


def test_the_prebuild_builds_the_control_plane_first_and_the_rest_at_a_lower_priority(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[tuple[str, int]] = []

    def record(name: str, nice: int) -> Path:
        built.append((name, nice))
        return Path()

    monkeypatch.setattr(prebuild.build, "ensure_component", lambda c, nice=0: record(c.name, nice))
    monkeypatch.setattr(
        prebuild.operators, "ensure_built", lambda op, nice=0: record(op.name, nice)
    )
    streams = {}
    for name, stream in prebuild.STREAMS.items():
        built.clear()
        stream()
        streams[name] = list(built)
    late = prebuild.LATE_NICE
    assert late > 0
    assert list(streams.values()) == [
        [("kubernetes", 0)],
        [
            ("etcd", 0),
            ("kwok", 0),
            ("helm", late),
            *((op, late) for op in operators.default_names()),
        ],
    ]


def _fake_builds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, built: list[str]
) -> dict[str, build.Component]:
    """ensure_component made to write a component's binaries and stamp, recording its name."""
    monkeypatch.setenv("KQUEUE_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("KQUEUE_BIN_DIR", raising=False)

    def fake(c: build.Component, *, force: bool = False, nice: int = 0) -> Path:
        built.append(c.name)
        out = build.cache_dir() / "bin" / c.dir_name
        out.mkdir(parents=True, exist_ok=True)
        for _, name in c.binaries:
            (out / name).write_text("")
        (out / build.STAMP).write_text(json.dumps({"recipe": c.recipe()}))
        return out

    monkeypatch.setattr(build, "ensure_component", fake)
    return {c.name: c for c in build.components()}


def test_a_cluster_never_waits_for_helm_and_finds_it_in_the_set_once_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[str] = []
    _fake_builds(tmp_path, monkeypatch, built)
    set_dir = build.ensure_binaries()
    assert sorted(built) == ["etcd", "kubernetes", "kwok"]
    assert build.binaries_ready() == set_dir
    assert (set_dir / "kube-apiserver").is_symlink()
    assert not (set_dir / "helm").exists()

    built.clear()
    helm = build.tool("helm")
    assert built == ["helm"]
    assert helm.name == "helm" and helm.parent.name == f"helm-{build.HELM_VERSION}"
    assert build.ensure_binaries() == set_dir  # the set links what is built
    assert (set_dir / "helm").resolve() == helm.resolve()


def test_the_build_command_builds_the_tools_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[str] = []
    _fake_builds(tmp_path, monkeypatch, built)
    assert build.main([]) == 0
    assert sorted(built) == ["etcd", "helm", "kubernetes", "kwok"]


def test_a_tool_no_component_builds_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_builds(tmp_path, monkeypatch, [])
    with pytest.raises(build.BuildError, match="no component builds 'promtool-x'"):
        build.tool("promtool-x")


def _run_protocol(item: Any) -> None:
    run = tools.pytest_runtest_protocol(item, None)
    next(run)  # the test would run here
    with pytest.raises(StopIteration):
        run.send(None)


def test_a_test_needing_helm_waits_for_its_build_once_before_it_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[str] = []
    monkeypatch.setattr(tools, "_BUILT", {})
    monkeypatch.setattr(tools.build, "tool", lambda name: built.append(name) or Path("/b/helm"))
    config = SimpleNamespace(pluginmanager=SimpleNamespace(get_plugin=lambda _name: None))
    plain = _item("tests/chart/test_values_schema.py::test_a")
    needs = _item("tests/chart/test_render.py::test_b", "helm", "helm_bin")
    for item in (plain, needs, needs):
        item.config = config
        _run_protocol(item)
        assert built == ([] if item is plain else ["helm"])


def test_a_failed_tool_build_fails_each_test_needing_it_naming_the_tool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    attempts: list[str] = []

    def fail(name: str) -> Path:
        attempts.append(name)
        raise build.BuildError("helm v3.22.0: `go build` failed (exit 1)")

    monkeypatch.setattr(tools, "_BUILT", {})
    monkeypatch.setattr(tools.build, "tool", fail)
    for _ in range(2):
        with pytest.raises(pytest.fail.Exception, match=r"building helm failed: helm v3\.22\.0"):
            tools._path("helm")
    assert attempts == ["helm"]  # one attempt a session
