"""What an anonymization job asks for: its config, hierarchies, privacy models (k / l / t),
column kinds, TDS taxonomies and re-identification risk. Engine independent."""
