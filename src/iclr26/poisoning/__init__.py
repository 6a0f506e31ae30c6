"""Data poisoning. P4: unlearnable examples (MI-UE, error-minimising and random noise), defenses, MI proxies.

:mod:`~iclr26.poisoning.unlearnable` (``make_unlearnable``, ``mi_loss``), :mod:`~iclr26.poisoning.defenses`
(blur, median, bit depth, cutout, PGD adversarial training), :mod:`~iclr26.poisoning.mi` (within-class
covariance, Gaussian / KSG / feature-label MI), :mod:`~iclr26.poisoning.training` (seeded training and
feature reading for any ``nn.Module``) and :mod:`~iclr26.poisoning.models` (small feature CNNs).
"""

from iclr26.poisoning.defenses import (
    DEFENSES,
    bit_depth,
    cutout,
    gaussian_blur,
    median_blur,
    pgd_attack,
    preprocess,
    train_with_defense,
)
from iclr26.poisoning.mi import feature_label_mi, gaussian_mi, joint_pca, ksg_mi, within_class_covariance
from iclr26.poisoning.models import FeatureCNN, make_cnn
from iclr26.poisoning.training import (
    accuracy,
    extract_features,
    features_and_logits,
    predict,
    train_classifier,
)
from iclr26.poisoning.unlearnable import (
    METHODS,
    UnlearnableResult,
    balanced_batches,
    make_unlearnable,
    mi_loss,
    poison_loss,
    project,
    step_sizes,
)

__all__ = [
    "DEFENSES",
    "METHODS",
    "FeatureCNN",
    "UnlearnableResult",
    "accuracy",
    "balanced_batches",
    "bit_depth",
    "cutout",
    "extract_features",
    "feature_label_mi",
    "features_and_logits",
    "gaussian_blur",
    "gaussian_mi",
    "joint_pca",
    "ksg_mi",
    "make_cnn",
    "make_unlearnable",
    "median_blur",
    "mi_loss",
    "pgd_attack",
    "poison_loss",
    "predict",
    "preprocess",
    "project",
    "step_sizes",
    "train_classifier",
    "train_with_defense",
    "within_class_covariance",
]
