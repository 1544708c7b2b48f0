"""Entry point of the `kqueue` command.

Each subcommand lives in its own module and is registered here, so adding one is one line.
"""

from __future__ import annotations

import importlib
import platform

import click

from kqueue import __version__

# module path, attribute: the click command each module exports. Modules are imported lazily so
# `kqueue --help` stays fast and a broken optional subcommand cannot take the others down.
_SUBCOMMANDS: dict[str, tuple[str, str]] = {}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *_SUBCOMMANDS])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in _SUBCOMMANDS:
            module, attr = _SUBCOMMANDS[cmd_name]
            cmd = getattr(importlib.import_module(module), attr)
            assert isinstance(cmd, click.Command)
            return cmd
        return super().get_command(ctx, cmd_name)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kqueue")
def cli() -> None:
    """kqueue: queueing, quota and gang admission for batch workloads on Kubernetes."""


@cli.command()
def version() -> None:
    """Print the kqueue version."""
    click.echo(f"kqueue {__version__} (python {platform.python_version()})")


def register(name: str, module: str, attr: str) -> None:
    _SUBCOMMANDS[name] = (module, attr)


register("convert", "kqueue.cli.convert", "convert")
register("generate", "kqueue.cli.generate", "generate")
register("run", "kqueue.cli.run", "run")
register("simulate", "kqueue.cli.simulate", "simulate")
register("explain", "kqueue.cli.explain", "explain_command")
register("dashboard", "kqueue.cli.dashboard", "dashboard")


def main() -> None:
    cli(prog_name="kqueue")


if __name__ == "__main__":
    main()
