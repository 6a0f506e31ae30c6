"""Language models for the interpretability core: loading, site adapters, tiny model organisms."""

from iclr26.lm.loading import load_model
from iclr26.lm.organism import WordTokenizer, tiny_config, tiny_lm
from iclr26.lm.sites import (
    ModelAdapter,
    Site,
    canonical_name,
    get_adapter,
    list_sites,
    register_family,
    resolve_site,
)
from iclr26.lm.train import (
    ORGANISM_FIELDS,
    ORGANISM_MARKERS,
    Stage,
    TrainLog,
    add_chat_template,
    cached_organism,
    document_stage,
    organism_chat_template,
    organism_config,
    organisms_home,
    train_lm,
    train_organism,
)

__all__ = [
    "load_model",
    "tiny_lm",
    "tiny_config",
    "WordTokenizer",
    "train_lm",
    "TrainLog",
    "train_organism",
    "organism_config",
    "Stage",
    "document_stage",
    "ORGANISM_FIELDS",
    "add_chat_template",
    "organism_chat_template",
    "ORGANISM_MARKERS",
    "cached_organism",
    "organisms_home",
    "ModelAdapter",
    "Site",
    "canonical_name",
    "get_adapter",
    "list_sites",
    "resolve_site",
    "register_family",
]
