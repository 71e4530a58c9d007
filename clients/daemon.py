"""``propius-client``: one process hosting many simulated devices (or this machine as one device).

The process owns what is shared: the gRPC channel, the stop signal and the exit status. SIGTERM or
SIGINT stops new work; devices that finished training still upload, then the process exits 0. A
second signal exits at once.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import grpc
import typer
from pydantic import ValidationError

from clients.device import AgentConfig, DeviceAgent
from clients.enrolment import Credentials, enroll_devices
from clients.identity import DeviceIdentity, default_device_offset, detected_device, simulated_devices
from clients.transport import Stubs, open_channel
from propius.config import ChannelSecurity
from propius.specs import AttributeValue, DeviceClass

__all__ = ["app", "main", "run_devices"]

log = logging.getLogger(__name__)


async def run_devices(
    server: str,
    devices: Sequence[DeviceIdentity],
    *,
    stop: asyncio.Event,
    max_tasks: int | None,
    config: AgentConfig | None = None,
    security: ChannelSecurity | None = None,
    credentials: Credentials | None = None,
    enroll_token: str = "",
) -> dict[str, int]:
    """Run every device against ``server`` until ``stop`` (or ``max_tasks`` each); client_id -> tasks done.
    ``security``: the channel's TLS settings (None: from the environment). ``credentials``: the devices'
    credentials (none: the server runs in open mode); those missing are enrolled first with ``enroll_token``."""
    credentials = credentials or Credentials()
    async with open_channel(server, security) as channel:
        if enroll_token:
            await enroll_devices(channel, devices, enroll_token, credentials)
        stubs = Stubs.multiplexed(channel)  # the devices' client calls share one stream
        agents = [DeviceAgent(d, stubs, stop=stop, max_tasks=max_tasks, config=config,
                              credential=credentials.get(d.client_id)) for d in devices]
        try:
            counts = await asyncio.gather(*(agent.run() for agent in agents))
        finally:
            await stubs.close()
    return {agent.client_id: count for agent, count in zip(agents, counts, strict=True)}


async def _serve(server: str, devices: Sequence[DeviceIdentity], max_tasks: int | None,
                 security: ChannelSecurity, credentials: Credentials, enroll_token: str) -> dict[str, int]:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    main_task = asyncio.current_task()

    def on_signal() -> None:
        if stop.is_set():
            log.warning("second signal: exiting without waiting for uploads")
            if main_task is not None:
                main_task.cancel()
            return
        log.info("stopping: no new tasks; finished updates are still uploaded")
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    return await run_devices(server, devices, stop=stop, max_tasks=max_tasks, security=security,
                             credentials=credentials, enroll_token=enroll_token)


def _parse_attribute(text: str) -> tuple[str, AttributeValue]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise typer.BadParameter(f"expected NAME=VALUE, got {text!r}")
    try:
        return name, float(value)
    except ValueError:
        return name, value


app = typer.Typer(add_completion=False)
_PEM = {"exists": True, "dir_okay": False}  # a PEM file option: a missing file is a usage error


@app.command()
def serve(
    server: Annotated[str, typer.Option(help="control plane address host:port")] = "127.0.0.1:50051",
    devices: Annotated[int, typer.Option(min=1, help="simulated devices in this process")] = 1,
    device_offset: Annotated[int | None, typer.Option(
        min=0, help="index of the first device: devices N.. pick their phone model, dataset size, seed and stored "
                    "id by index. Default: a random offset, kept in --state-dir, so two daemons never simulate "
                    "the same phones and a restart comes back as the same devices")] = None,
    seed: Annotated[int, typer.Option(help="seed of device data and jitter")] = 0,
    state_dir: Annotated[Path | None, typer.Option(help="where client ids persist across restarts")] = None,
    max_tasks: Annotated[int | None, typer.Option(min=1, help="each device stops after this many tasks")] = None,
    detect: Annotated[bool, typer.Option(help="one device with this machine's real attributes")] = False,
    device_class: Annotated[DeviceClass, typer.Option(help="device class with --detect")] = DeviceClass.EDGE,
    attr: Annotated[list[str] | None, typer.Option(help="NAME=VALUE overriding a detected attribute")] = None,
    dataset_size: Annotated[int, typer.Option(min=1, help="private dataset size with --detect")] = 256,
    log_level: Annotated[str, typer.Option(help="DEBUG, INFO, WARNING")] = "INFO",
    tls_ca: Annotated[Path | None, typer.Option(**_PEM, help="CA the control plane's certificate must chain to; "
                                                              "default: system roots (env PROPIUS_TLS_CA)")] = None,
    tls_cert: Annotated[Path | None, typer.Option(**_PEM, help="this daemon's certificate, for a control plane "
                                                                "that requires one (env PROPIUS_TLS_CERT)")] = None,
    tls_key: Annotated[Path | None, typer.Option(**_PEM, help="its private key (env PROPIUS_TLS_KEY)")] = None,
    insecure: Annotated[bool, typer.Option("--insecure", help="plaintext, no TLS (env PROPIUS_INSECURE=1)")] = False,
    enroll_token: Annotated[str, typer.Option(envvar="PROPIUS_ENROLL_TOKEN", help="enrolment token "
                            "(`propius devices token create`): devices without a credential enrol with it")] = "",
    enroll_token_file: Annotated[Path | None, typer.Option(
        envvar="PROPIUS_ENROLL_TOKEN_FILE", exists=True, dir_okay=False,
        help="a file holding the enrolment token (`propius devices token create --out`), instead of "
             "--enroll-token")] = None,
    credential_file: Annotated[Path | None, typer.Option(help="the devices' credentials (mode 0600), reused on "
                               "restart; default: credentials.json in --state-dir")] = None,
) -> None:
    """Run devices against the control plane until SIGTERM/SIGINT (or --max-tasks each); TLS unless --insecure."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        security = ChannelSecurity.given(tls_ca, tls_cert, tls_key, insecure)
    except ValidationError as error:
        raise typer.BadParameter(error.errors()[0]["msg"]) from None
    if detect:
        overrides = dict(_parse_attribute(item) for item in attr or [])
        identities = [detected_device(seed, state_dir, device_class, overrides, dataset_size)]
    else:
        offset = default_device_offset(state_dir) if device_offset is None else device_offset
        identities = simulated_devices(devices, offset, seed, state_dir)
    log.info("%d device(s) against %s", len(identities), server)
    if credential_file is None and state_dir is not None:
        credential_file = state_dir / "credentials.json"
    if enroll_token_file is not None:
        if enroll_token:
            raise typer.BadParameter("give the token or its file, not both", param_hint="--enroll-token-file")
        enroll_token = enroll_token_file.read_text().strip()
    if enroll_token and credential_file is None:
        log.warning("no --state-dir or --credential-file: credentials are lost at exit, and a client id enrols once")
    credentials = Credentials(credential_file)
    try:
        done = asyncio.run(_serve(server, identities, max_tasks, security, credentials, enroll_token))
    except asyncio.CancelledError:
        raise typer.Exit(1) from None
    except grpc.aio.AioRpcError as error:  # only enrolment raises: the devices retry their own failures
        log.error("enrolment refused (%s): %s", error.code().name, error.details())
        raise typer.Exit(1) from None
    log.info("stopped after %d task(s)", sum(done.values()))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
