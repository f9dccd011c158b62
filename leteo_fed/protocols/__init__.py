"""Protocol math as pure functions: what the services compute, testable without a network."""

METHODS = ("pca", "dca", "lda", "mdr")
