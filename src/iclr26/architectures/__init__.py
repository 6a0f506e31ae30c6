"""Architectures: Hyper-SET (P17), RangeFormer (P15)."""
