"""The Cython core: hashed conjunction features, averaged weights, update rules and decoders.

Nothing here imports spaCy. Inputs are numpy arrays of atoms (one row per token) and outputs are
class/action ids, so the core can be tested and reused without a Doc in sight.
"""
