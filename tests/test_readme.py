"""The README's Python blocks run as written, and its status table agrees with the registry."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from iclr26 import registry

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_python_blocks():
    assert BLOCKS, "README has no ```python blocks"


@pytest.mark.parametrize("i", range(len(BLOCKS)))
def test_readme_block_runs(i, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(BLOCKS[i], f"README block {i}", "exec"), {"__name__": "__readme__"})


def test_status_table_matches_registry():
    text = README.read_text()
    for p in registry.PAPERS:
        row = next((line for line in text.splitlines() if line.startswith("|") and f"`{p.slug}`" in line), None)
        assert row is not None, f"no status row for {p.slug}"
        assert p.status in row, f"{p.slug}: README row does not say {p.status!r}: {row}"
