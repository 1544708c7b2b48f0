"""``kqueue generate``: files derived from the API models."""

from __future__ import annotations

from pathlib import Path

import click

from kqueue.api import crds


@click.group()
def generate() -> None:
    """Generate files from kqueue's API models."""


@generate.command("crds")
@click.option(
    "--output-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("api"),
    show_default=True,
    help="Directory to write <plural>.kqueue.io.yaml and reference.md into.",
)
def crds_command(output_dir: Path) -> None:
    """Write the CustomResourceDefinitions of kqueue.io/v1alpha1 and the API reference."""
    output_dir.mkdir(parents=True, exist_ok=True)
    for name, text in crds.files().items():
        path = output_dir / name
        if path.exists() and path.read_text() == text:
            continue
        path.write_text(text)
        click.echo(f"wrote {path}")
