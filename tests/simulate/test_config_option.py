"""``kqueue simulate --config FILE`` applies the Configuration's integrations, as one in FILEs does."""

from __future__ import annotations

from pathlib import Path

from .conftest import simulate_json

SAMPLES = Path(__file__).resolve().parents[2] / "config" / "samples"

CONFIG = """\
apiVersion: config.kqueue.io/v1alpha1
kind: Configuration
integrations:
  frameworks: [batch/job, pod, kubeflow.org/pytorchjob]
"""


def _state(doc: dict, key: str) -> str:
    return str(doc["workloads"][key]["state"])


def test_config_option_enables_the_frameworks_it_lists(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    inputs = [str(SAMPLES / "quickstart.yaml"), str(SAMPLES / "pytorchjob.yaml")]
    given = simulate_json(*inputs, "--config", str(config))
    keys = [k for k in given["workloads"] if "pytorch-simple" in k]
    assert len(keys) == 1, given["workloads"].keys()
    assert _state(given, keys[0]) in ("Admitted", "Finished")


def test_without_the_framework_the_pytorchjob_is_not_queued(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.replace(", kubeflow.org/pytorchjob", ""))
    inputs = [str(SAMPLES / "quickstart.yaml"), str(SAMPLES / "pytorchjob.yaml")]
    given = simulate_json(*inputs, "--config", str(config))
    assert not [k for k in given["workloads"] if "pytorch-simple" in k]
