"""Diffusion models: a small conditional DDPM on diffusers parts (:mod:`~iclr26.diffusion.ddpm`, the shared base),
memorization detection and mitigation (P6, :mod:`~iclr26.diffusion.memorization`) and post-training
quantization with meta-weighting (P18, :mod:`~iclr26.diffusion.ptq`)."""

from iclr26.diffusion.ddpm import (
    DDPM,
    DDPMConfig,
    MLPDenoiser,
    cached_ddpm,
    cfg_eps,
    ddim_sample,
    images_to_latents,
    latents_to_images,
    q_sample,
    tiny_sd_pipeline,
    train_ddpm,
)
from iclr26.diffusion.memorization import (
    CallCounter,
    MemorizationScores,
    PipelineDenoiser,
    denoising_score,
    memorization_score,
    mitigate_prompt,
    nearest_distance,
    replication_threshold,
    select_timesteps,
    tpr_at_fpr,
)

__all__ = [
    "DDPM",
    "DDPMConfig",
    "MLPDenoiser",
    "cached_ddpm",
    "cfg_eps",
    "ddim_sample",
    "images_to_latents",
    "latents_to_images",
    "q_sample",
    "tiny_sd_pipeline",
    "train_ddpm",
    "CallCounter",
    "MemorizationScores",
    "PipelineDenoiser",
    "denoising_score",
    "memorization_score",
    "mitigate_prompt",
    "nearest_distance",
    "replication_threshold",
    "select_timesteps",
    "tpr_at_fpr",
]
