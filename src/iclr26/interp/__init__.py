"""Interpretability core: activation capture over real Hugging Face modules (and, in sibling modules,
SAEs, feature matching and training). Import submodules directly, e.g. ``from iclr26.interp.capture import
capture``; this package imports nothing heavy on its own."""

from iclr26.interp.capture import Capture, RunningMoments, capture, iter_batches

__all__ = ["capture", "iter_batches", "Capture", "RunningMoments"]
