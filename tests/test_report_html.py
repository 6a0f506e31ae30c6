"""Open report.html in headless Chromium and check that every embedded figure decodes.

A script injected into a copy of the page writes, once the page has loaded, how many <img>
elements there are and how many decoded (``naturalWidth > 0``); ``--dump-dom`` returns it. A
deliberately broken image in a second copy checks that the probe does detect a figure that fails.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from iclr26 import cli

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)

PROBE = """<script>
window.addEventListener('load', function () {
  var imgs = Array.from(document.images);
  var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length;
  var d = document.createElement('div'); d.id = 'img-probe';
  d.textContent = 'IMAGES ' + imgs.length + ' DECODED ' + ok;
  document.body.appendChild(d);
});
</script>"""


def _probe(page: Path, tmp: Path) -> tuple[int, int]:
    html = page.read_text()
    probed = tmp / f"probed-{page.stem}.html"
    probed.write_text(html.replace("</body>", PROBE + "</body>"))
    home = tmp / "chrome-home"
    home.mkdir(exist_ok=True)
    args = [CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
            f"--user-data-dir={home / 'profile'}", "--virtual-time-budget=10000", "--dump-dom",
            probed.as_uri()]
    res = subprocess.run(args, capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(home)})
    m = re.search(r"IMAGES (\d+) DECODED (\d+)", res.stdout)
    assert m, f"probe did not run (exit {res.returncode}): {res.stderr[-800:]}"
    return int(m.group(1)), int(m.group(2))


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_every_report_figure_decodes_in_chromium(tmp_path, fake_paper, capsys):
    out = tmp_path / "runs"
    for _ in range(2):
        assert cli.main(["run", "fake-paper", "--preset", "smoke", "--out", str(out)]) == 0
    assert cli.main(["report", str(out / "fake-paper-smoke"), str(out / "fake-paper-smoke-1")]) == 0
    page = out / "report.html"
    n_png = sum(len(list((d / "figures").glob("*.png"))) for d in (out / "fake-paper-smoke", out / "fake-paper-smoke-1"))
    assert n_png == 2
    total, decoded = _probe(page, tmp_path)
    assert total == n_png and decoded == total, (total, decoded)
    # the probe can fail: a corrupt PNG in a copy of the page is counted as not decoded
    broken = tmp_path / "broken.html"
    broken.write_text(page.read_text().replace("data:image/png;base64,", "data:image/png;base64,AAAA", 1))
    total_b, decoded_b = _probe(broken, tmp_path)
    assert total_b == n_png and decoded_b == n_png - 1, (total_b, decoded_b)
