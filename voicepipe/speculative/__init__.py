"""Speculative decoding, text and audio alike: the protocols (types), acceptance rules
(accept, rules), K controllers (adaptive), the one loop (loop), model-free proposers
(ngram, replies, hybrid, skeleton), the drafter spec parser (drafter), sampling, replay.
"""
