"""Whole models: probing off-the-shelf transformers (``_probe``), reading and re-drawing their
initialisation (``_real``), and the small language model and its training loop (``_lm``,
``_training``) that the chapters train."""
from ._lm import LMConfig as LMConfig, TinyLM as TinyLM, fit as fit
from ._training import TrainingRun as TrainingRun, train_masked_lm as train_masked_lm
