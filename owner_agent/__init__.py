"""LETEO-Fed owner agent."""
