"""The pure domain: entries, evidence math, tiers, lifecycle, rendering, sweeps.

No Kafka, HTTP, Arrow or DuckDB here, and no clock reads: time is always a parameter (``now``/``at``).
"""
