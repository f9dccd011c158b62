"""The Spark engine: rows stay on the executors, the driver sees counts and summaries only."""
