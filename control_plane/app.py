"""The control plane as one object: state, services and scheduler loop wired together.

``ControlPlane`` is what ``propius up`` runs and what tests start in-process; several instances on
one Redis and database act as shards of client traffic (every shard serves every RPC; a round's
uploads must reach the shard that opened it, see :mod:`control_plane.rounds`). It listens with TLS or
mutual TLS, or in plaintext only when ``insecure`` is set (:mod:`control_plane.tls`).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import logging

import grpc
from redis.asyncio import RedisCluster

from control_plane.audit import AuditLog
from control_plane.auth import Guard
from control_plane.binding import Binder
from control_plane.client_service import ClientService
from control_plane.cluster_pipe import ClusterPipe, cluster_pipe_supported
from control_plane.dashboard_http import DashboardServer
from control_plane.dashboard_state import DashboardSource
from control_plane.data_service import DataService
from control_plane.events import EventBus
from control_plane.fabric_manager import FabricManager
from control_plane.fabric_service import FabricService
from control_plane.fabric_store import FabricStore
from control_plane.hot_state import HotState
from control_plane.identity_store import IdentityStore
from control_plane.job_service import JobService, TraceExporter
from control_plane.jobs import JobRegistry
from control_plane.journal import Journal
from control_plane.metrics import Metrics
from control_plane.redis_client import connect
from control_plane.redis_pipe import RedisPipe, ScriptedPipe, pipe_supported
from control_plane.round_metrics import RoundLatency
from control_plane.rounds import RoundManager
from control_plane.scheduler import Scheduler, SchedulerView
from control_plane.scheduling.class_queues import class_queues, waiting_by_class
from control_plane.store import Store
from control_plane.tls import server_credentials
from control_plane.wire import DecodeGuard
from data_plane.collectives.cost import LinkCost, placement_link
from policies import ProfilePolicy, configured_policy
from policies.placement.registry import load_placement
from propius.config import Settings
from propius.fabric.request import CloudRequest
from propius.proto import propius_pb2_grpc as pb_grpc

__all__ = ["ControlPlane", "TraceExporter", "grpc_options"]

log = logging.getLogger(__name__)


def grpc_options(settings: Settings) -> list[tuple[str, int]]:
    """The server's options. Messages are chunks: a little headroom over the chunk size is enough. Port
    reuse is off: with it, a second control plane on a taken port would start and share its connections."""
    size = settings.chunk_bytes + (1 << 20)
    # gRPC queues calls that arrive faster than the event loop takes them up; past its default of 1,000
    # queued calls it cancels them (CANCELLED, nothing logged): a burst of check-ins would lose some.
    return [("grpc.max_receive_message_length", size), ("grpc.max_send_message_length", size),
            ("grpc.so_reuseport", 0), ("grpc.server.max_pending_requests", settings.max_pending_calls)]


def _freeze_startup_heap() -> None:
    """Move what is alive once the first control plane of a process is up (modules, schemas, the plane)
    out of the cyclic collector's way. Full collections then scan only what came after: measured under
    binding load, they went from 40-60 ms pauses of the event loop to under 3 ms. Once per process, so
    a test process starting many planes does not freeze their garbage."""
    if gc.get_freeze_count() == 0:
        gc.collect()
        gc.freeze()


class ControlPlane:
    def __init__(self, settings: Settings, *, trace_exporter: TraceExporter | None = None) -> None:
        """``trace_exporter`` writes completed jobs' traces: every job's where ``settings.trace_export_dir`` is
        set, else those whose CompleteJob asks for it (``propius up`` passes
        :func:`propius.trace.export.data_point_exporter`); None: no job is exported."""
        if not settings.redis_url:
            raise ValueError("ControlPlane needs a redis_url; `propius up` starts an embedded one")
        if settings.trace_export_dir is not None and trace_exporter is None:
            log.warning("trace_export_dir is set but the control plane has no trace exporter: no job is exported")
        self.credentials = server_credentials(settings)  # before any connection: a plane that may not listen fails fast
        self.settings = settings
        self.trace_exporter = trace_exporter
        # Blocking pools: under a burst, requests queue for a connection instead of failing.
        # One server or a Redis Cluster (a ``redis+cluster://`` URL, see control_plane.redis_client)
        self.redis = connect(settings.redis_url, decode_responses=True, max_connections=settings.redis_connections)
        self.raw_redis = connect(settings.redis_url, decode_responses=False,
                                 max_connections=settings.redis_connections)
        self.store = Store(settings.resolved_database_url())
        self.identities = IdentityStore(self.store.engine)
        self.audit = AuditLog(self.identities, settings.audit_max_rows, settings.audit_retention_s)
        # A lean connection for check-ins and binds (one per node on a cluster; redis-py does them for TLS URLs)
        self.pipe: ScriptedPipe | None = None
        if pipe_supported(settings.redis_url):
            self.pipe = RedisPipe(settings.redis_url)
        elif cluster_pipe_supported(settings.redis_url):
            assert isinstance(self.redis, RedisCluster)
            self.pipe = ClusterPipe(self.redis)
        self.hot = HotState(self.redis, settings.key_prefix, keep_s=settings.blob_ttl_s, pipe=self.pipe)
        self.guard = Guard(settings, self.identities, self.redis, self.pipe)
        self.bus = EventBus(self.redis, self.hot.events_channel)
        self.jobs = JobRegistry(self.store, max_live_per_owner=settings.max_jobs_per_owner,
                                idle_ttl_s=settings.job_idle_ttl_s)
        self.metrics = Metrics()
        self.journal = Journal(self.store, spill_dir=settings.data_dir / "journal")
        self.rounds = RoundManager(settings, self.hot, self.raw_redis, self.store, self.journal, self.bus, self.jobs,
                                   self.metrics, link_of=self._shard_link)
        policy = configured_policy(settings.policy, settings.policy_options, settings.policy_profile)
        # what traces and logs name: the policy, or the profile that replaced it
        from_profile = settings.policy_profile is not None and isinstance(policy, ProfilePolicy)
        self.policy_name = f"profile:{policy.profile}" if from_profile else settings.policy
        self.view = SchedulerView(self.hot, self.jobs, policy, settings)  # fed events by the binder
        self.binder = Binder(settings, self.hot, self.jobs, self.view, self.journal, self.bus, self.metrics)
        self.scheduler = Scheduler(settings, self.view, self.jobs)
        self.fabric = FabricManager(
            FabricStore(self.store.engine), load_placement(settings.placement, **settings.placement_options),
            journal=self.journal, bus=self.bus, request_of=self._cloud_request, is_finished=self._finished,
            max_waiting=settings.fabric_max_waiting)
        self.bus.add_listener(RoundLatency(self.metrics, self.bus.id).on_event)
        self.dashboard = DashboardSource(settings, self.hot, self.jobs, self.view, self.binder.waiting.client_ids,
                                         lambda: self.address)
        self.dashboard_server: DashboardServer | None = None
        self._queues_at = 0.0
        tick = (self.rounds.check_hot_state, self.rounds.take_over_orphans, self.view.refresh_states,
                self.binder.reap_leases, self.rounds.sweep_deadlines, self._flush, self._observe_queues,
                self.fabric.refresh, self.rounds.retire_pools)
        for task in tick:
            self.scheduler.every_tick(task)
        self.server: grpc.aio.Server | None = None
        self.port = 0

    def _cloud_request(self, job_id: str) -> CloudRequest | None:
        job = self.jobs.cached(job_id)
        return job.spec.cloud if job is not None else None

    def _shard_link(self, job_id: str) -> LinkCost | None:
        """The slowest hop of the job's placement on the fabric, for its aggregator shards' selector."""
        view = self.fabric.view
        allocation = view.state.allocations.get(job_id) if view is not None else None
        return placement_link(view.fabric, allocation.accelerators) if view and allocation else None

    def _finished(self, job_id: str) -> bool:
        job = self.jobs.cached(job_id)
        return job is not None and job.finished

    async def _flush(self, _now: float) -> None:
        await self.journal.flush()
        await self.audit.flush()

    async def _observe_queues(self, now: float) -> None:
        """The classes' queues for the metrics, once per supply estimate (a pass over the waiting clients)."""
        if now - self._queues_at < self.settings.supply_period_s:
            return
        self._queues_at = now
        waiting = waiting_by_class(self.binder.waiting.client_ids(), self.view.classes_of)
        self.metrics.set_queues(class_queues(self.view.snapshot().views, self.view.supply, waiting))

    @property
    def dashboard_port(self) -> int:
        """The dashboard's port; 0 while it is off."""
        return self.dashboard_server.port if self.dashboard_server is not None else 0

    @property
    def transport(self) -> str:
        """plaintext, tls or mtls: how clients reach this plane."""
        if self.credentials is None:
            return "plaintext"
        return "mtls" if self.settings.tls_require_client_cert else "tls"

    @property
    def address(self) -> str:
        return f"{self.settings.host}:{self.port}"

    async def start(self) -> ControlPlane:
        """Connect, recover open rounds and listen; on failure, what was started is stopped and the error
        raised (an address in use is an ``OSError`` with ``errno.EADDRINUSE``)."""
        try:
            return await self._start()
        except BaseException:
            await self.stop(grace_s=0)
            raise

    async def _start(self) -> ControlPlane:
        await self.redis.ping()
        await self.bus.start()
        if adopted := self.journal.adopt_orphans():
            log.info("journal: writing %d records a stopped control plane left on disk", adopted)
        await self.journal.flush()
        await self.rounds.recover()
        await self.scheduler.refresh()
        await self.view.refresh_states()
        await self.fabric.start()
        self.server = grpc.aio.server(options=grpc_options(self.settings))
        services = (
            (pb_grpc.add_JobServiceServicer_to_server,
             JobService(self.jobs, self.rounds, self.hot, self.bus, self.journal, self.settings.finished_job_ttl_s,
                        store=self.store, exporter=self.trace_exporter,
                        export_every_job=self.settings.trace_export_dir is not None, policy=self.policy_name,
                        guard=self.guard, audit=self.audit, fabric=self.fabric)),
            (pb_grpc.add_FabricServiceServicer_to_server,
             FabricService(self.fabric, guard=self.guard, audit=self.audit, jobs=self.jobs)),
            (pb_grpc.add_ClientServiceServicer_to_server,
             ClientService(self.settings, self.binder, self.hot, self.jobs, self.view, self.store, guard=self.guard,
                           audit=self.audit)),
            (pb_grpc.add_DataServiceServicer_to_server,
             DataService(self.settings, self.rounds, self.binder, self.hot, self.jobs, guard=self.guard,
                         audit=self.audit)),
        )
        for add, servicer in services:
            add(servicer, DecodeGuard(self.server))  # undecodable requests: INVALID_ARGUMENT
        address = f"{self.settings.host}:{self.settings.port}"
        try:
            if self.credentials is None:
                self.port = self.server.add_insecure_port(address)
            else:
                self.port = self.server.add_secure_port(address, self.credentials)
        except RuntimeError:  # gRPC's "Failed to bind": the port is taken (or the host is not ours)
            self.port = 0
        if self.port == 0:
            raise OSError(errno.EADDRINUSE, f"cannot listen on {address}: the address is in use or not local")
        await self.server.start()
        if self.credentials is None:
            log.warning("listening in plaintext (insecure) on %s: anyone on the network can read and forge its "
                        "traffic", self.address)
        self.scheduler.start()
        if self.settings.metrics_port:
            self.metrics.serve(self.settings.metrics_port, self.settings.host)
        if self.settings.dashboard_port:
            self.dashboard_server = DashboardServer(
                self.settings.host, self.settings.dashboard_port, self.settings.dashboard_token, self.dashboard.json,
                self.metrics.exposition, asyncio.get_running_loop())
            self.dashboard_server.start()
        _freeze_startup_heap()
        log.info("control plane listening on %s (%s, policy %s, auth %s)", self.address, self.transport,
                 self.policy_name, self.settings.auth)
        if self.settings.auth == "open":
            log.warning("auth is open: anyone who reaches %s may submit, read and drive any job and check in as "
                        "any client (docs/security.md)", self.address)
        return self

    async def stop(self, grace_s: float = 2.0) -> None:
        self.scheduler.stop()
        if self.dashboard_server is not None:  # from a thread: a request in flight waits on this loop
            await asyncio.to_thread(self.dashboard_server.stop)
            self.dashboard_server = None
        if self.server is not None:
            await self.server.stop(grace_s)
        with contextlib.suppress(Exception):
            await self.journal.flush()
        with contextlib.suppress(Exception):
            await self.rounds.shards.retire()
        with contextlib.suppress(Exception):
            await self.rounds.pools.close()
        with contextlib.suppress(Exception):
            await self.audit.flush()
        self.journal.close()
        await self.bus.stop()
        if self.pipe is not None:
            self.pipe.close()
        await self.redis.aclose()
        await self.raw_redis.aclose()
        self.store.close()

    async def __aenter__(self) -> ControlPlane:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
