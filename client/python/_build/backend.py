"""The SDK's build backend (PEP 517), in the tree and with nothing to download.

pip builds a project in an isolated environment into which it first installs the backend the
project names. With setuptools named, ``pip install ./client/python`` needs a package index even
when httpx and websockets are already installed (from Debian, say), and fails offline. This backend
is the standard library alone (tomllib, zipfile, tarfile, hashlib), so pip has nothing to fetch: it
builds the one pure-Python wheel the SDK is, from ``pyproject.toml``'s ``[project]`` table and
``src/pmx``. It reads Python 3.11's tomllib (3.10 needs the tomli package to build, not to run).
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import tarfile
import zipfile
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "pmx"


def _project() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]


def _dist_name(project: dict) -> str:
    return project["name"].replace("-", "_")


def _metadata(project: dict) -> str:
    """The core metadata (version 2.1) of the [project] table."""
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
        f"Summary: {project['description']}",
        f"Requires-Python: {project['requires-python']}",
        f"License: {project['license']['text']}",
    ]
    lines += [f"Classifier: {c}" for c in project.get("classifiers", [])]
    lines += [f"Requires-Dist: {d}" for d in project.get("dependencies", [])]
    for extra, deps in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {d}; extra == "{extra}"' for d in deps]
    lines.append("Description-Content-Type: text/markdown")
    readme = (ROOT / project["readme"]).read_text(encoding="utf-8")
    return "\n".join(lines) + "\n\n" + readme


def _package_files() -> list[Path]:
    """The package's files: its modules and its py.typed marker, nothing cached."""
    src = ROOT / "src" / PACKAGE
    return sorted(p for p in src.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def get_requires_for_build_wheel(config_settings=None) -> list[str]:
    return []


def get_requires_for_build_sdist(config_settings=None) -> list[str]:
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None) -> str:
    project = _project()
    dist = _dist_name(project)
    info = f"{dist}-{project['version']}.dist-info"
    wheel_name = f"{dist}-{project['version']}-py3-none-any.whl"
    entries: list[tuple[str, bytes]] = []
    for path in _package_files():
        entries.append((path.relative_to(ROOT / "src").as_posix(), path.read_bytes()))
    entries.append((f"{info}/METADATA", _metadata(project).encode()))
    entries.append((f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: pmx _build/backend.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n"))
    entries.append((f"{info}/top_level.txt", f"{PACKAGE}\n".encode()))
    record = [_record_line(name, data) for name, data in entries] + [f"{info}/RECORD,,"]
    entries.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as whl:
        for name, data in entries:
            whl.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data, zipfile.ZIP_DEFLATED)
    return wheel_name


def build_sdist(sdist_directory, config_settings=None) -> str:
    project = _project()
    base = f"{_dist_name(project)}-{project['version']}"
    files = [ROOT / "pyproject.toml", ROOT / project["readme"], Path(__file__)] + _package_files()
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as tar:
        for path in files:
            tar.add(path, arcname=f"{base}/{path.relative_to(ROOT).as_posix()}")
        pkg_info = _metadata(project).encode()
        member = tarfile.TarInfo(f"{base}/PKG-INFO")
        member.size = len(pkg_info)
        tar.addfile(member, io.BytesIO(pkg_info))
    return name
