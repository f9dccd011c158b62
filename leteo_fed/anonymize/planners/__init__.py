"""The algorithms' decisions, engine independent: Mondrian's round planner and TDS's planner.

Each engine computes the same per-round histograms or records (NumPy or Spark) and hands them to
the same planner, so both engines release the same table by construction."""
