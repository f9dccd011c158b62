"""Grading a release apart from the algorithm: the independent verifier (:mod:`verify`) and the
job report's measurements (:mod:`measure`), computed from the written release."""
