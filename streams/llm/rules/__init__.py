"""The deterministic offline backend and the lexical rules behind it."""
