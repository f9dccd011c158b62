"""LETEO-Fed aggregator."""
