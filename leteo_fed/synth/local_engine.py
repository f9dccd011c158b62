"""In-process aggregates: NumPy over the encoded columns (bincount, reduceat, blocked Gram)."""

from __future__ import annotations

import numpy as np

from leteo_fed.synth.config import Column, SynthConfig
from leteo_fed.synth.encoding import Encoded, level, widths
from leteo_fed.synth.partition import cell_count, cell_ids
from leteo_fed.synth.statistics import Sums, pair_counter, split_pairs, summer


class LocalAggregator:
    """Exact aggregates of an `Encoded` table held in memory."""

    def __init__(self, encoded: Encoded, config: SynthConfig) -> None:
        self.encoded = encoded
        self.config = config
        self.n_classes = max(1, len(config.classes))

    def _codes(self, cols: list[Column]) -> np.ndarray:
        return np.column_stack([self.encoded.codes[c.name] for c in cols]).astype(np.int64)

    def cells(self, cols: list[Column]) -> np.ndarray:
        return cell_ids([level(self.encoded.codes[c.name], c) for c in cols], cols)

    def histogram(self, group: list[Column]) -> np.ndarray:
        cells = cell_count(group)
        flat = self.encoded.classes * cells + self.cells(group)
        return np.bincount(flat, minlength=self.n_classes * cells).reshape(self.n_classes, cells)

    def cluster_sums(
        self, group: list[Column], key_of_cell: np.ndarray, n_keys: int, numeric: list[Column]
    ) -> Sums:
        keys = key_of_cell[self.encoded.classes, self.cells(group)]
        return summer(widths(numeric), n_keys)(keys, self._codes(numeric))

    def pair_histograms(self, cols: list[Column]) -> dict[tuple[int, int], np.ndarray]:
        levels = [c.levels for c in cols]
        block = np.column_stack(
            [self.encoded.classes, *[level(self.encoded.codes[c.name], c) for c in cols]]
        ).astype(np.int64)
        flat = pair_counter(levels, self.n_classes)(block)
        return split_pairs(flat, levels, self.n_classes)
