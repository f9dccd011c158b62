"""Public codebooks of the data sets the demos and docs use: bounds per column in natural units.

Bounds must be public, never read off the data a release is about. For scikit-learn's breast
cancer set they are the ranges its published description states (rounded outward: a codebook
states what a value can be, not what this sample holds); for UCI Adult, what the columns mean
(working-age adults, schooling coded 1..16, weekly hours 1..99, capital gains capped by the
census at 99,999, capital losses taken below 5,000).
examples/*.toml hold the same for the command line (`--codebook`; a test checks they agree).
"""

from __future__ import annotations

from leteo_fed.privacy.bounds import ColumnBounds, from_mapping

BREAST_CANCER: dict[str, tuple[float, float]] = {
    "mean_radius": (5, 30),
    "mean_texture": (5, 40),
    "mean_perimeter": (40, 200),
    "mean_area": (100, 2600),
    "mean_smoothness": (0.05, 0.17),
    "mean_compactness": (0.0, 0.35),
    "mean_concavity": (0.0, 0.45),
    "mean_concave_points": (0.0, 0.21),
    "mean_symmetry": (0.1, 0.31),
    "mean_fractal_dimension": (0.04, 0.1),
    "radius_error": (0.1, 3),
    "texture_error": (0.3, 5),
    "perimeter_error": (0.7, 22),
    "area_error": (6, 550),
    "smoothness_error": (0.0, 0.032),
    "compactness_error": (0.0, 0.14),
    "concavity_error": (0.0, 0.4),
    "concave_points_error": (0.0, 0.055),
    "symmetry_error": (0.0, 0.08),
    "fractal_dimension_error": (0.0, 0.03),
    "worst_radius": (7, 37),
    "worst_texture": (12, 50),
    "worst_perimeter": (50, 260),
    "worst_area": (180, 4300),
    "worst_smoothness": (0.07, 0.23),
    "worst_compactness": (0.0, 1.1),
    "worst_concavity": (0.0, 1.3),
    "worst_concave_points": (0.0, 0.3),
    "worst_symmetry": (0.15, 0.67),
    "worst_fractal_dimension": (0.05, 0.21),
}

ADULT: dict[str, tuple[float, float]] = {
    "age": (17, 90),
    "education-num": (1, 16),
    "hours-per-week": (1, 99),
    "capital-gain": (0, 99999),
    "capital-loss": (0, 5000),
}


def breast_cancer() -> tuple[ColumnBounds, ...]:
    return from_mapping(BREAST_CANCER, "the breast cancer codebook")


def adult() -> tuple[ColumnBounds, ...]:
    return from_mapping(ADULT, "the Adult codebook")
