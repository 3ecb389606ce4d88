"""sinks — the Parquet archive: credence.archive and credence.evidence as hive-partitioned shards.

schema (record -> row), shards (deterministic, bounded, atomic files), consumer (the Kafka sink and
its span rule), dedup (first offset wins over at-least-once records), analytics (DuckDB views, query,
funnel, report), forget (removing a user).
"""
