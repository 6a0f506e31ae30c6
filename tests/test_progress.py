"""Progress bars: off in logs and tests (ICLR26_PROGRESS=0 or no terminal), the Hugging Face libraries' included."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

# saves and reloads a tiny HF causal LM: transformers draws "Writing model shards" and "Loading weights" bars
_SAVE_LOAD = textwrap.dedent("""
    import sys, tempfile
    from transformers import AutoModelForCausalLM
    from iclr26.core.progress import quiet_library_bars
    from iclr26.lm.organism import tiny_lm
    if sys.argv[1] == "quiet":
        quiet_library_bars()
    d = tempfile.mkdtemp()
    tiny_lm().save_pretrained(d)
    AutoModelForCausalLM.from_pretrained(d)
""")


@pytest.mark.parametrize("mode", ["quiet", "as-is"])
def test_library_bars_follow_iclr26_progress(mode):
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_PROGRESS_BARS"}
    env["ICLR26_PROGRESS"] = "0"
    r = subprocess.run([sys.executable, "-c", _SAVE_LOAD, mode], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    # without the switch the bars are there (so the quiet case can fail); with it, none
    assert ("Loading weights" in r.stderr) == (mode == "as-is"), r.stderr[-2000:]


def test_bars_on_leaves_library_bars_alone(monkeypatch):
    from iclr26.core.progress import quiet_library_bars

    monkeypatch.setenv("ICLR26_PROGRESS", "1")
    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS", raising=False)
    quiet_library_bars()
    assert "HF_HUB_DISABLE_PROGRESS_BARS" not in os.environ


def test_a_run_turns_library_bars_off(monkeypatch, tmp_path, fake_paper):
    from iclr26 import engine

    calls = []
    monkeypatch.setattr(engine, "quiet_library_bars", lambda: calls.append(1))
    engine.run_paper("fake-paper", preset="smoke", out=tmp_path)
    assert calls == [1]
