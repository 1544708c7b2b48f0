"""The plugin's commands that need no cluster: help, version, completion, create --dry-run,
and bad input (exit status and a message naming what is wrong)."""

from __future__ import annotations

import pytest
import yaml
from click.testing import CliRunner, Result

from kqueue import __version__
from kqueue.cli.kubectl.main import COMPLETE_VAR, cli, complete_for_kubectl


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), prog_name="kubectl-kqueue")


def test_version() -> None:
    result = run("version")
    assert result.exit_code == 0
    assert result.stdout.startswith(f"Client Version: v{__version__}")


def test_completion_scripts_use_the_plugins_completion_variable() -> None:
    for shell in ("bash", "zsh", "fish"):
        result = run("completion", shell)
        assert result.exit_code == 0, result.output
        assert COMPLETE_VAR in result.stdout
        assert "kubectl-kqueue" in result.stdout


def test_completion_of_subcommands() -> None:
    result = CliRunner().invoke(
        cli,
        [],
        prog_name="kubectl-kqueue",
        env={COMPLETE_VAR: "bash_complete", "COMP_WORDS": "kubectl-kqueue st", "COMP_CWORD": "1"},
    )
    assert result.exit_code == 0
    assert "plain,stop" in result.stdout


def test_create_cluster_queue_dry_run_prints_the_object() -> None:
    result = run(
        "create",
        "clusterqueue",
        "cq",
        "--cohort",
        "c",
        "--nominal-quota",
        "default:cpu=9;memory=36Gi",
        "--dry-run",
        "-o",
        "yaml",
    )
    assert result.exit_code == 0, result.output
    cq = yaml.safe_load(result.stdout)
    assert cq["kind"] == "ClusterQueue"
    assert cq["spec"]["cohortName"] == "c"
    quota = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert quota == [
        {"name": "cpu", "nominalQuota": "9"},
        {"name": "memory", "nominalQuota": "36Gi"},
    ]


def test_create_by_short_name() -> None:
    result = run("create", "rf", "spot", "--node-labels", "instance-type=spot", "--dry-run")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "resourceflavor.kqueue.io/spot created (dry run)"


def test_bad_flag_value_is_a_usage_error_naming_flag_and_field() -> None:
    result = run("create", "cq", "cq", "--queuing-strategy", "Fifo", "--dry-run")
    assert result.exit_code == 2
    assert "spec.queueingStrategy: unsupported value 'Fifo'" in result.stderr
    assert "--queuing-strategy" in result.stderr


def test_bad_quantity_is_a_usage_error() -> None:
    result = run("create", "clusterqueue", "cq", "--nominal-quota", "default:cpu=lots")
    assert result.exit_code == 2
    assert "--nominal-quota 'default:cpu=lots': cpu: 'lots' is not a quantity" in result.stderr


def test_unknown_kind_is_refused() -> None:
    result = run("list", "jobs")
    assert result.exit_code == 2
    assert "No such command 'jobs'" in result.stderr


def test_unreadable_kubeconfig_is_an_error() -> None:
    result = run("list", "cq", "--kubeconfig", "/nonexistent/kubeconfig")
    assert result.exit_code == 1
    assert "cannot load the kubeconfig" in result.stderr


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        pytest.param(
            ["__complete", "st"],
            ["stop\tStop admission in a ClusterQueue or..."],
            id="a command, with its help",
        ),
        pytest.param(
            ["__completeNoDesc", "pending", ""],
            ["clusterqueue", "localqueue"],
            id="subcommands, no help",
        ),
        pytest.param(
            ["stop", ""],
            [
                "clusterqueue\tStop ClusterQueue NAME (spec.stopPolicy...",
                "localqueue\tStop LocalQueue NAME in -n NAMESPACE...",
                "workload\tStop Workload NAME in -n NAMESPACE...",
            ],
            id="as kubectl calls it: the words only",
        ),
        pytest.param(
            ["__completeNoDesc", "stop", "cq", "--keep"], ["--keep-already-running"], id="an option"
        ),
    ],
)
def test_completion_for_kubectl_speaks_cobras_protocol(
    argv: list[str], want: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    complete_for_kubectl(argv)
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == ":4"  # no file names
    assert lines[:-1] == want
