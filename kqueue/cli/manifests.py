"""Reading manifest files for the CLI: files or ``-`` for stdin, exit status 2 on bad input."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from kqueue.api.loader import GeneratedNames, LoadError, LoadResult, load_text

EXIT_INVALID_INPUT = 2


class InvalidInput(click.ClickException):
    """Bad input: printed as-is (it already names file, document, object and field), exit 2."""

    exit_code = EXIT_INVALID_INPUT

    def format_message(self) -> str:
        return self.message


def read_manifests(
    paths: Sequence[str], *, warn: bool = True, migrate: bool = False
) -> LoadResult:
    """Load every object of ``paths`` (``-`` reads stdin); warnings go to stderr.

    Names generated for ``generateName`` objects are shared across the files (the same
    manifest given twice is two objects); ``migrate`` reads for ``kqueue convert``.
    """
    result = LoadResult()
    names = GeneratedNames()
    for path in paths:
        source = "<stdin>" if path == "-" else path
        try:
            if path == "-":
                text = sys.stdin.read()
            else:
                with open(path, encoding="utf-8") as fh:
                    text = fh.read()
        except OSError as err:
            raise InvalidInput(f"{source}: cannot read: {err.strerror or err}") from err
        except UnicodeDecodeError as err:
            raise InvalidInput(f"{source}: not UTF-8 text: {err}") from err
        try:
            part = load_text(text, source, names=names, migrate=migrate)
        except LoadError as err:
            raise InvalidInput(str(err)) from err
        result.objects.extend(part.objects)
        result.skipped.extend(part.skipped)
    if warn:
        for line in result.warnings:
            click.echo(f"warning: {line}", err=True)
    return result
