"""Domain model, Parquet artifacts, profiles and the discrete-event engine."""
