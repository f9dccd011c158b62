"""Release reports: one self-contained HTML page beside every central release (anonymize,
dp-kmeans, synthesize) that a data protection officer can read without the JSON."""
