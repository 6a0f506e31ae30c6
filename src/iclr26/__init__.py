"""iclr26 — reference implementations and CPU reproductions of nineteen ICLR 2026 papers.

Library code lives in technique packages (``interp``, ``merging``, ``flows`` …); each paper's
reproduction lives in ``iclr26.experiments.<slug>`` and runs through ``iclr26 run <slug>``.
"""

__version__ = "0.1.0"
