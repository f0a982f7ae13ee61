"""Install a lock file, then the project on top of it, into the project's virtual environment.

uv installs the lock in seconds where pip takes about 45 s (most of a fresh clone's set-up
before the tests), so it is used when it can be had (`pip install uv`); pip does the same job
when it cannot. Both check every hash of the lock and read the same package sources: uv is
given the indexes and find-links pip is configured with (`pip config list`, `PIP_*`), and picks
the best version across them as pip does (the hashes rule out a swapped file either way).

Usage: python tools/install_locked.py VENV LOCKFILE
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

# pip's configuration keys (any scope) and the uv flag each one becomes
SOURCE_FLAGS = {
    "index-url": "--index-url",
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
}


def uv_source_flags(pip_config: str) -> list[str]:
    """uv's flags for the package sources in `pip config list` output (`scope.key='value'`
    lines; a value may hold several space-separated URLs). Duplicates are given once."""
    flags: list[str] = []
    for line in pip_config.splitlines():
        key, sep, quoted = line.partition("=")
        flag = SOURCE_FLAGS.get(key.rsplit(".", 1)[-1])
        if not sep or flag is None:
            continue
        for value in shlex.split(quoted)[0].split() if quoted.strip() else []:
            pair = [flag, value]
            if not any(flags[i : i + 2] == pair for i in range(0, len(flags), 2)):
                flags += pair
    return flags


def uv_commands(venv: Path, lock: str, pip_config: str) -> list[list[str]]:
    base = [str(venv / "bin" / "uv"), "pip", "install", "--quiet", "--python"]
    base += [str(venv / "bin" / "python"), "--index-strategy", "unsafe-best-match"]
    base += uv_source_flags(pip_config)
    return [base + ["--require-hashes", "-r", lock], base + ["--no-deps", "-e", "."]]


def pip_commands(venv: Path, lock: str) -> list[list[str]]:
    pip = [str(venv / "bin" / "pip"), "install", "--quiet"]
    return [pip + ["--require-hashes", "-r", lock], pip + ["--no-deps", "-e", "."]]


def run_all(commands: Sequence[Sequence[str]]) -> bool:
    return all(subprocess.run(list(command)).returncode == 0 for command in commands)


def main(argv: Sequence[str]) -> int:
    if len(argv) != 2:
        print(__doc__.rsplit("Usage: ", 1)[1].strip(), file=sys.stderr)
        return 2
    venv, lock = Path(argv[0]), argv[1]
    pip = str(venv / "bin" / "pip")
    has_uv = (venv / "bin" / "uv").exists() or run_all([[pip, "install", "--quiet", "uv"]])
    if has_uv:
        config = subprocess.run([pip, "config", "list"], capture_output=True, text=True)
        if run_all(uv_commands(venv, lock, config.stdout)):
            return 0
        print("uv could not install the lock: installing it with pip", file=sys.stderr)
    else:
        print("uv is not available: installing the lock with pip", file=sys.stderr)
    return 0 if run_all(pip_commands(venv, lock)) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
