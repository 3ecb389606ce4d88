"""What a worker serves beyond the stream: explicit recall, /metrics and the read-only memory browser."""
