"""The command line of a generator that keeps one checked-in file in step with its
source: print the file, ``--write`` it, or ``--check`` it (exit 1 when stale)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def main(
    argv: list[str] | None,
    *,
    module: str,
    about: str | None,
    target: Path,
    render: Callable[[], str],
) -> int:
    root = Path(__file__).resolve().parent.parent
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=about)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help=f"write {target.relative_to(root)}")
    mode.add_argument("--check", action="store_true", help="exit 1 when that file is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.write:
        target.write_text(text)
    elif args.check:
        if not target.exists() or target.read_text() != text:
            print(f"{target} is stale: run python -m {module} --write", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(text)
    return 0
