"""LETEO-Fed csp."""
