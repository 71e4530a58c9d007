"""Export a job's recorded trace as a CCL-Bench data point: ``<name>/<name>.yaml``, ``rank<N>_trace.json``
per rank and ``run.sh``.

The export reads the store only, so it works on a finished job after the control plane has stopped, from a
store opened read-only. The folder is built beside its destination and renamed into place, so a reader
never sees half a data point, and a re-export never leaves stale rank files from an earlier, wider one.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from control_plane.store import Store
from data_plane.collectives.shard_pool import PoolTrace
from propius.config import Settings
from propius.fabric import Allocation, Fabric
from propius.specs import JobSpec
from propius.trace.card import Card, write_card
from propius.trace.chrome import NoTraceError, build_rank_traces
from propius.trace.format import RUN_SCRIPT, card_file, data_point_name, rank_file
from propius.trace.hardware import hardware_from_fabric
from propius.trace.runscript import run_script
from propius.trace.workload import JobFacts, build_card

if TYPE_CHECKING:
    from control_plane.job_service import TraceExporter

__all__ = [
    "UNKNOWN_POLICY",
    "NoTraceError",
    "data_point_exporter",
    "export_job",
    "read_only_sqlite_url",
    "replace_data_point",
    "recorded_policy",
    "try_export_job",
    "try_export_pool_trace",
    "write_data_point",
]

log = logging.getLogger(__name__)


def read_only_sqlite_url(path: Path) -> str:
    """A SQLAlchemy URL opening a SQLite store read-only (export never writes the store)."""
    return f"sqlite:///file:{path.resolve()}?mode=ro&uri=true"


UNKNOWN_POLICY = "unknown (not recorded)"
"""The card's policy for a job whose store predates recording it."""


def recorded_policy(store: Store, job_id: str) -> str | None:
    """The sharing policy the control plane ran when the job registered (its ``job_registered`` event)."""
    registered = store.events(job_id, limit=1, kind="job_registered")
    policy = json.loads(registered[0].detail_json).get("policy") if registered else None
    return policy if isinstance(policy, str) and policy else None


def write_data_point(out_dir: Path, name: str, card: Card, documents: Mapping[int, Any], script: str) -> Path:
    """Write the data point ``out_dir/<name>``: its card, one trace document per rank and ``run.sh``. Built
    beside its destination and renamed into place (:func:`replace_data_point`): a failure leaves nothing."""
    out_dir.mkdir(parents=True, exist_ok=True)
    built = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=out_dir))
    try:
        write_card(card, built / card_file(name))
        for rank, document in documents.items():
            (built / rank_file(rank)).write_text(json.dumps(document, separators=(",", ":")))
        (built / RUN_SCRIPT).write_text(script)
        (built / RUN_SCRIPT).chmod(0o755)
        built.chmod(0o755)
        replace_data_point(built, out_dir / name)
    except BaseException:
        shutil.rmtree(built, ignore_errors=True)
        raise
    return out_dir / name


def replace_data_point(built: Path, target: Path) -> None:
    """Move ``built`` to ``target``; an existing target is replaced only if it is a data point of that name."""
    if target.exists():
        if not (target / card_file(target.name)).is_file() and any(target.iterdir()):
            raise FileExistsError(f"{target} exists and is not a data point; not replacing it")
        shutil.rmtree(target)
    built.rename(target)


def export_job(
    store: Store,
    job_id: str,
    out_dir: Path,
    *,
    contributor: str = "propius",
    contact: str = "",
    launch_command: str | None = None,
    policy: str | None = None,
    transport: str = "grpc+redis",
    fabric: Fabric | None = None,
    allocation: Allocation | None = None,
) -> Path:
    """Write the data point of ``job_id`` under ``out_dir``; returns its folder ``out_dir/<name>``, ``<name>``
    after CCL-Bench's naming convention (:func:`propius.trace.format.data_point_name`).

    ``policy``: the card's sharing policy; default: the one recorded when the job registered.
    ``fabric`` and ``allocation`` (together): a cloud job's placement; the card's hardware section is then
    read from them (:func:`propius.trace.hardware.hardware_from_fabric`) instead of left null.
    Raises KeyError for an unknown job, NoTraceError for a job without a recorded round, and ValueError
    for only one of ``fabric`` and ``allocation`` (FabricError, a ValueError, for an allocation not on it).
    """
    if (fabric is None) != (allocation is None):
        raise ValueError("give both fabric and allocation, or neither")
    hardware = hardware_from_fabric(fabric, allocation) if fabric is not None and allocation is not None else None
    job = store.get_job(job_id)
    if job is None:
        raise KeyError(f"no such job {job_id!r}")
    records = store.trace_events(job_id)
    if not records:
        raise NoTraceError(f"job {job_id} ({job.name}) has no recorded round")
    traces = build_rank_traces(records)
    spec = JobSpec.parse(job.spec_json)
    facts = JobFacts(job, spec, store.rounds(job_id), store.bindings(job_id), records, traces)
    policy = policy or recorded_policy(store, job_id) or UNKNOWN_POLICY
    card = build_card(facts, contributor=contributor, contact=contact, policy=policy, transport=transport,
                      hardware=hardware)

    name = data_point_name(model=spec.task.model, demand=spec.demand, job=job.name, group=contributor)
    return write_data_point(Path(out_dir), name, card, traces.documents, run_script(spec, job_id, launch_command))


def try_export_job(store: Store, job_id: str, out_dir: Path, **options: Any) -> Path | None:
    """``export_job`` (same options) for the control plane's automatic export: a job that cannot be exported
    is logged, never an error of the RPC that completed it."""
    try:
        folder = export_job(store, job_id, out_dir, **options)
    except NoTraceError as error:
        log.info("trace export of job %s skipped: %s", job_id, error)
        return None
    except Exception:
        log.exception("trace export of job %s failed", job_id)
        return None
    log.info("job %s exported as a CCL-Bench data point: %s", job_id, folder)
    return folder


def try_export_pool_trace(store: Store, job_id: str, tier: PoolTrace, out_dir: Path,
                          fabric: Fabric | None) -> Path | None:
    """A sharded job's live shards' recorded collectives as a data point of their own
    (:func:`propius.trace.tier_export.export_pool_trace`); a failure is logged, never raised."""
    from propius.trace.tier_export import export_pool_trace

    try:
        job = store.get_job(job_id)
        if job is None:
            raise KeyError(f"no such job {job_id!r}")
        spec = JobSpec.parse(job.spec_json)
        folder = export_pool_trace(tier, out_dir, job=spec, launch_command=run_script(spec, job_id), fabric=fabric)
    except Exception:
        log.exception("export of job %s's aggregator shards' trace failed", job_id)
        return None
    log.info("job %s's aggregator shards exported as a CCL-Bench data point: %s", job_id, folder)
    return folder


def data_point_exporter(settings: Settings) -> TraceExporter:
    """The control plane's trace exporter (``ControlPlane(settings, trace_exporter=...)``): ``try_export_job``
    in a worker thread, into ``settings.trace_export_dir`` (else ``data_dir/traces``); the card names the policy
    recorded with the job. A sharded job's shards' recorded collectives (``tier``) become a second data point
    beside it (:func:`try_export_pool_trace`); the job's own is the one returned."""
    out_dir = settings.trace_export_dir or settings.data_dir / "traces"

    async def export(store: Store, job_id: str, *, placement: tuple[Fabric, Allocation] | None = None,
                     tier: PoolTrace | None = None) -> Path | None:
        fabric, allocation = placement if placement is not None else (None, None)
        if tier is not None:
            await asyncio.to_thread(try_export_pool_trace, store, job_id, tier, out_dir, fabric)
        return await asyncio.to_thread(try_export_job, store, job_id, out_dir, fabric=fabric, allocation=allocation)

    return export
