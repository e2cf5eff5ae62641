"""The SDK installs as its README says on a machine whose pip reaches no package index: its build
backend is in the tree and the standard library alone (_build/backend.py), so pip's isolated build
has nothing to fetch. Installed with --no-index, the package imports from where pip put it, with its
type marker and the metadata pyproject.toml declares."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

SDK = Path(__file__).resolve().parent.parent


def test_installs_without_an_index(tmp_path: Path) -> None:
    target = tmp_path / "site"
    # --no-deps: httpx and websockets come from the system here (Debian's), which pip's --target
    # does not look at; --no-index: nothing may be fetched, the build backend least of all.
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--no-cache-dir",
                    "--disable-pip-version-check", "--target", str(target), str(SDK)],
                   check=True, capture_output=True, text=True, timeout=120)
    project = tomllib.loads((SDK / "pyproject.toml").read_text())["project"]
    check = ("import importlib.metadata as m, pathlib, pmx; "
             "print(pathlib.Path(pmx.__file__).parent); print(m.version('pmx-client')); "
             "print(sorted(m.requires('pmx-client')))")
    out = subprocess.run([sys.executable, "-c", check], cwd=tmp_path, check=True, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(target)}, timeout=60).stdout.splitlines()
    assert Path(out[0]) == target / "pmx", "pmx imported from elsewhere than the install"
    assert out[1] == project["version"]
    wanted = list(project["dependencies"]) + [f'{d}; extra == "{e}"' for e, deps in
                                              project["optional-dependencies"].items() for d in deps]
    assert out[2] == str(sorted(wanted))
    assert (target / "pmx" / "py.typed").exists(), "the type marker was not installed"
    assert sorted(p.name for p in (target / "pmx").glob("*.py")) == sorted(p.name for p in (SDK / "src" / "pmx").glob("*.py"))
