"""Self-explainable GNNs and faithfulness metrics of their explanations, incl. EST (P9).

:mod:`~iclr26.graphs.segnn` — a GSAT-style SE-GNN (ACR-GNN extractor + classifier on the selection) on
torch-geometric and its training recipes (planted extractor targets, end-to-end GSAT);
:mod:`~iclr26.graphs.faithfulness` — Fid±, RFid±, CF-Fid, Suff/Nec and EST for any model that maps a
PyG batch to class probabilities and node scores.
"""
