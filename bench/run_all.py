"""Run every side-by-side benchmark once, in sequence (``make bench``).

Each script prints its own markdown table; results recorded in BENCHMARKS.md come from these
scripts. Anchor libraries come from the ``bench`` extra: ``pip install -e '.[bench]'``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = [
    ["sae_train.py", "--rounds", "4"],
    ["matching.py", "--sizes", "4096", "16384", "65536", "--exact-mem-gb", "3"],
    ["capture.py", "--batch", "4", "--seq", "64", "--repeats", "15", "--threads", "1"],
    ["merging_vs_fusionbench.py", "--hidden", "128", "--layers", "2", "--tasks", "4", "--wudi-iters", "20"],
    ["fdfi_vs_official.py"],
    ["interp_part2.py", "--threads", "1", "--repeats", "5"],
    ["poisoning.py"],
    ["est.py"],
    ["rangeformer_logdet.py", "--threads", "1"],
    ["memorization_score.py", "--prompts", "8", "--threads", "1"],
    ["humof_forward.py", "--threads", "1", "--repeats", "20"],
    ["ampo_advantage.py"],
    ["hyper_set_step.py", "--threads", "1", "--repeats", "10"],
    ["sae_edit_overhead.py", "--threads", "1", "--repeats", "5"],
    ["ptq_calibration.py", "--iters", "20", "--threads", "1"],
]


def main() -> int:
    failed = []
    for script, *args in SCRIPTS:
        print(f"\n## bench/{script} {' '.join(args)}\n", flush=True)
        rc = subprocess.call([sys.executable, str(HERE / script), *args])
        if rc != 0:
            failed.append(script)
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
