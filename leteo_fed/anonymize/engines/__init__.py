"""The engines that run an anonymization job: the interface (:mod:`base`), the choice of one
(:mod:`choice`), and the implementations :mod:`local` (pyarrow + NumPy, in process) and
:mod:`spark`."""
