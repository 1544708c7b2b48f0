"""Entry point of ``kubectl-kqueue``: kubectl runs it as ``kubectl kqueue ...`` when it is on
the PATH (kubectl's plugin discovery: an executable named ``kubectl-<plugin>``)."""

from __future__ import annotations

import platform
import sys
from datetime import UTC, datetime

import click
from click.shell_completion import ShellComplete, get_completion_class

from kqueue import __version__
from kqueue.cli.cluster import cluster_objects
from kqueue.cli.explain import print_explanation
from kqueue.cli.kubectl.common import AliasGroup, Target, cluster_options, complete_names
from kqueue.cli.kubectl.create import create_group
from kqueue.cli.kubectl.listing import list_group, pending_group
from kqueue.cli.kubectl.ops import resume_group, stop_group

PROG = "kubectl-kqueue"
# Click's completion protocol: the shell calls the program with this variable set.
COMPLETE_VAR = "_KUBECTL_KQUEUE_COMPLETE"


@click.group(
    name="kqueue", cls=AliasGroup, context_settings={"help_option_names": ["-h", "--help"]}
)
def cli() -> None:
    """kqueue's kubectl plugin: queues, positions, pending reasons; stop, resume, create.

    \b
    kubectl kqueue list workloads -A
    kubectl kqueue pending clusterqueue cluster-queue
    kubectl kqueue stop clusterqueue cluster-queue --keep-already-running
    kubectl kqueue create clusterqueue cq --nominal-quota "default:cpu=9;memory=36Gi"
    """


cli.add_command(list_group)
cli.add_command(pending_group)
cli.add_command(stop_group)
cli.add_command(resume_group)
cli.add_command(create_group)


@cli.command()
@click.argument("workload", shell_complete=complete_names("workloads"))
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text")
@cluster_options
def explain(target: Target, workload: str, output: str) -> None:
    """Why WORKLOAD (a Workload, or a Job or Pod, in -n NAMESPACE) is pending, or why it has
    its flavors: kqueue explain on the cluster of the kubeconfig."""
    key = workload if "/" in workload else f"{target.namespace}/{workload}"
    print_explanation(
        cluster_objects(target.kubeconfig, target.context), key, output, now=datetime.now(UTC)
    )


@cli.command()
def version() -> None:
    """Print the plugin's version."""
    click.echo(f"Client Version: v{__version__} (kqueue, python {platform.python_version()})")


@cli.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script for kubectl-kqueue.

    \b
    source <(kubectl-kqueue completion bash)
    """
    cls = get_completion_class(shell)
    assert cls is not None
    click.echo(cls(cli, {}, PROG, COMPLETE_VAR).source())


def main() -> None:
    cli(prog_name=PROG, complete_var=COMPLETE_VAR)


# Cobra's directive for "complete only these words, no file names".
_NO_FILE_COMPLETION = 4


def complete_for_kubectl(argv: list[str] | None = None) -> None:
    """``kubectl_complete-kqueue``: completion of ``kubectl kqueue ...`` in kubectl's own shell
    completion. kubectl runs it as ``kubectl_complete-kqueue __complete ARGS... WORD`` and reads
    one candidate per line (``value<TAB>help``), then ``:<directive>`` (cobra's protocol)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("__complete", "__completeNoDesc"):
        describe = args.pop(0) == "__complete"
    else:
        describe = True
    incomplete = args.pop() if args else ""
    completer = ShellComplete(cli, {}, PROG, COMPLETE_VAR)
    for item in completer.get_completions(args, incomplete):
        help_text = (item.help or "").splitlines()[0] if describe and item.help else ""
        click.echo(f"{item.value}\t{help_text}" if help_text else str(item.value))
    click.echo(f":{_NO_FILE_COMPLETION}")


if __name__ == "__main__":
    main()
