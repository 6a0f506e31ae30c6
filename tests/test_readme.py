"""The README's Python blocks run as written, and its status table agrees with the registry."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from iclr26 import registry

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_python_blocks():
    assert BLOCKS, "README has no ```python blocks"


@pytest.mark.parametrize("i", range(len(BLOCKS)))
def test_readme_block_runs(i, tmp_path):
    # each block in a fresh interpreter, as a user would paste it (no state leaks between blocks)
    out = subprocess.run([sys.executable, "-c", BLOCKS[i]], cwd=tmp_path, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, f"README block {i} failed:\n{out.stderr[-3000:]}"


def test_status_table_is_generated_from_the_declarations():
    from iclr26.status import BEGIN, END, status_markdown

    text = README.read_text()
    assert BEGIN in text and END in text, "README has no generated status table"
    block = text[text.index(BEGIN): text.index(END) + len(END)]
    assert block == status_markdown(), "README's status table is stale: paste `iclr26 status --markdown` into it"


def test_status_table_matches_registry():
    text = README.read_text()
    for p in registry.PAPERS:
        row = next((line for line in text.splitlines() if line.startswith("|") and f"`{p.slug}`" in line), None)
        assert row is not None, f"no status row for {p.slug}"
        assert p.status == "implemented" or "planned" in row, f"{p.slug}: README row does not say planned: {row}"
