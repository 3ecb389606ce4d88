"""sinks — what leaves the pipeline: a sink interface and the Parquet archive that implements it.

base (the Sink contract), consumer (the loop that drives any sink and commits only what it made
durable), registry (the sinks CREDENCE_SINKS can name), parquet (credence.archive and
credence.evidence as hive-partitioned shards, and its span rule), schema (record -> row), shards
(deterministic, bounded, atomic files), identities (first offset wins over at-least-once records),
analytics (DuckDB views, query, funnel, report), forget (removing a user).
"""
