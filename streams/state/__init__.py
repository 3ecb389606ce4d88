"""A worker's scope state: the changelog-backed tables, their codec, redo record, fencing and restore,
and the per-partition bookkeeping (positions, duplicate marks, ownership) that makes a batch durable once."""
