"""Archive sink settings: where Parquet shards go and how large one may grow."""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator


class ArchiveSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    # A local folder or any URL pyarrow.fs understands (s3://bucket/prefix, gs://…).
    root: str = ".credence/archive"
    # One knob for both the file bound and the sink's batch span: the sink cuts batches at offset
    # multiples of this number, which is what makes a replay rewrite the same shard names.
    max_rows_per_shard: int = Field(default=50_000, ge=1)
    # Bound on a shard's file size: rows are counted at an estimate of their uncompressed size
    # plus room for the footer, so the compressed file stays below it.
    max_bytes_per_shard: int = Field(default=64 * 1024 * 1024, ge=32 * 1024)
    # How long an open (incomplete) span may wait before its rows so far are made visible.
    flush_interval_seconds: float = Field(default=60.0, gt=0)
    compression: Literal["zstd", "snappy", "gzip", "lz4", "none"] = "zstd"
    compression_level: int | None = None
    # Consumer group of the sink; the archive and evidence sinks append ".archive"/".evidence".
    group_id: str = "credence-sink"
    # For an s3:// root. Unset, the standard AWS variables apply (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID,
    # AWS_SECRET_ACCESS_KEY, AWS_REGION) and then the SDK's usual chain (profile, instance role).
    s3_endpoint_url: str | None = None  # an S3-compatible service, e.g. http://127.0.0.1:9000
    s3_access_key_id: str | None = None
    s3_secret_access_key: SecretStr | None = None
    s3_region: str | None = None

    @model_validator(mode="after")
    def _key_pair(self) -> "ArchiveSettings":
        if (self.s3_access_key_id is None) != (self.s3_secret_access_key is None):
            raise ValueError("set s3_access_key_id and s3_secret_access_key together, or neither")
        return self

    @property
    def s3_overridden(self) -> bool:
        """Whether any S3 connection setting is given here rather than left to the AWS variables."""
        return any(v is not None for v in (self.s3_endpoint_url, self.s3_access_key_id, self.s3_region))
