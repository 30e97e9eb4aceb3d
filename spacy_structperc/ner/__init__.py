"""structperc_ner, the latent-variable perceptron NER (sun2009), writing doc.ents.

factory.py    the factory: default config and settings     component.py  the pipe (LatentEntityRecognizer)
features.py   templates, ner_features.v1                    encoding.py   BIO / BILOU classes
model.py      the model with the NER's own atoms            gazetteers.py name lists, jackknife, matching
aggregation.py  two-stage prediction aggregation's atoms
Shared: pipeline/sequence.py, pipeline/bio.py and readers.py (CoNLL-2003 and IOB2 readers). The
latent Viterbi decoder is Cython: _core/viterbi.pyx; the gazetteer matcher _core/gazetteer.pyx.
"""
from .component import LatentEntityRecognizer

__all__ = ["LatentEntityRecognizer"]
