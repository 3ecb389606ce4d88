"""The HTTP API /v1 on the workers: tenants' keys, prompt, recall, entries, feedback, cards, turns."""
