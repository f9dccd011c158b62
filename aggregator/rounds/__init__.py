"""The round engine: one lifecycle for every protocol, one secure-sum path, one report intake."""
