"""Every RPC, fed random and mutated messages (hypothesis), against a real in-process control plane.

Properties: no call is answered UNKNOWN or INTERNAL; a refused call writes no Redis key under the test's
prefix and no SQL row; the service keeps serving; and a control plane restarted on the same Redis and
database after the run starts and lists its jobs.

Messages are built from the wire protocol's descriptors, so a new RPC or field is fuzzed without a
change here. Field values mix the hostile (NaN, infinities, huge numbers, NUL, deep or non-JSON
strings, random bytes) with real identifiers of a live job and a bound client, so calls also get past
authentication into the handlers proper. It runs in open mode and with auth on (API key, enrolled devices):
the audit log is left out of the footprint there, as a refused call of an authenticated caller is audited
(docs/security.md).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
import numpy as np
import pytest
import sqlalchemy as sa
from google.protobuf.descriptor import FieldDescriptor, MethodDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from control_plane.app import ControlPlane
from data_plane.tensors import encode
from propius.auth_cli import with_metadata
from propius.config import Settings
from propius.proto import DEVICE_TOKEN_HEADER
from propius.proto import propius_pb2 as pb
from propius.proto import propius_pb2_grpc as pb_grpc
from propius.specs import JobSpec
from tests.conftest import sync_redis

T = TypeVar("T")

METHODS: dict[str, MethodDescriptor] = {method.full_name: method for service in pb.DESCRIPTOR.services_by_name.values()
                                         for method in service.methods}
FORBIDDEN = {grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL}
MAY_HAVE_WRITTEN = {grpc.StatusCode.OK, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED}
TABLES = ("jobs", "rounds", "bindings", "events", "trace_events", "api_keys", "enrolment_tokens",
          "device_credentials", "fabric_meta", "fabric_states", "fabric_allocations", "fabric_pending")
# a valid fabric (one host, two accelerators) and one of its accelerators, so fabric calls get past validation
FABRIC_JSON = json.dumps({
    "sites": [{"id": "dc"}], "racks": [{"id": "r0", "site": "dc"}],
    "hosts": [{"id": "h0", "rack": "r0", "srg": {"power": "p", "board": "b", "tor": "t"}}],
    "accelerators": [{"id": f"h0-g{i}", "host": "h0", "index": i, "domain": "h0"} for i in range(2)]})
OWNER = "fuzz-owner"


class PlaneThread:
    """A control plane on an event loop of its own thread, so hypothesis can drive it from sync code."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.plane: ControlPlane | None = None

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self, settings: Settings) -> ControlPlane:
        self.plane = self.run(ControlPlane(settings).start())
        return self.plane

    def stop(self) -> None:
        if self.plane is not None:
            self.run(self.plane.stop(0.1))
            self.plane = None

    def close(self) -> None:
        self.stop()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        self.loop.close()


@dataclass(frozen=True)
class Live:
    """Real identifiers the fuzzer mixes into its messages."""

    job_id: str
    job_token: str
    client_id: str
    session_token: str
    offer_id: str
    round: int
    secrets: tuple[str, ...] = ()  # with auth on: the enrolment token and the devices' credentials

    def strings(self) -> list[str]:
        return [self.job_id, self.job_token, self.client_id, self.session_token, self.offer_id, *self.secrets]


@dataclass(frozen=True)
class Identities:
    """With auth on: what the fuzzer's channel presents, and secrets it mixes into messages."""

    metadata: tuple[tuple[str, str], ...]  # the API key of OWNER and fuzz-client's credential
    spare: tuple[tuple[str, str], ...]  # fuzz-spare's credential
    other_key: tuple[tuple[str, str], ...]  # another owner's API key
    secrets: tuple[str, ...]


def _identities(plane: ControlPlane) -> Identities:
    store, now = plane.identities, 0.0
    _, key = store.create_key(OWNER, ("submit", "read"), now)
    _, other = store.create_key("someone-else", ("submit",), now)
    _, token = store.create_enrolment(1000, 3600.0, time.time())
    _, client = store.enroll(token, "fuzz-client", time.time())
    _, spare = store.enroll(token, "fuzz-spare", time.time())
    return Identities(metadata=(("authorization", f"Bearer {key}"), (DEVICE_TOKEN_HEADER, str(client))),
                      spare=((DEVICE_TOKEN_HEADER, str(spare)),), other_key=(("authorization", f"Bearer {other}"),),
                      secrets=(str(token), str(client), str(spare)))


@pytest.fixture(params=["open", "keys"])
def fuzz_settings(request, redis_url, key_prefix, sqlite_url, tmp_path) -> Settings:
    return Settings(redis_url=redis_url, key_prefix=key_prefix, database_url=sqlite_url, data_dir=tmp_path, port=0,
                    max_wait_s=0.2, chunk_bytes=64 * 1024, max_update_bytes=1 << 20, max_model_bytes=1 << 20,
                    auth=request.param, key_burst=100_000, device_burst=100_000)


@pytest.fixture
def running(fuzz_settings) -> Iterator[PlaneThread]:
    thread = PlaneThread()
    thread.start(fuzz_settings)
    yield thread
    thread.close()


def _live(channel: grpc.Channel, spare_metadata: tuple[tuple[str, str], ...] = (),
          secrets: tuple[str, ...] = ()) -> Live:
    """A running job with a published model, and a client bound to its round, over the real API."""
    jobs, clients = pb_grpc.JobServiceStub(channel), pb_grpc.ClientServiceStub(channel)
    spec = JobSpec.parse({"name": "fuzzed", "demand": 2, "schedule_timeout_s": 3600, "execution_timeout_s": 3600})
    job = jobs.RegisterJob(pb.RegisterJobRequest(spec_json=spec.to_json()))
    jobs.StartRound(pb.StartRoundRequest(job_id=job.job_id, job_token=job.job_token))
    model = encode({"w": np.zeros(4, np.float32)})
    pb_grpc.DataServiceStub(channel).PublishModel(
        iter([pb.PublishModelRequest(job_id=job.job_id, job_token=job.job_token, round=0, data=model)]))
    profile = pb.ClientProfile(client_id="fuzz-client")
    checkin = clients.CheckIn(pb.CheckInRequest(profile=profile, wait_s=5.0))
    accept = clients.Accept(pb.AcceptRequest(client_id="fuzz-client", session_token=checkin.session_token,
                                             offer_id=checkin.offers[0].offer_id))
    assert accept.bound
    spare = clients.CheckIn(pb.CheckInRequest(profile=pb.ClientProfile(client_id="fuzz-spare"), wait_s=5.0),
                            metadata=spare_metadata)
    return Live(job.job_id, job.job_token, "fuzz-client", checkin.session_token, spare.offers[0].offer_id, 0,
                secrets)


def _hostile_strings(live: Live) -> st.SearchStrategy[str]:
    valid_spec = JobSpec.parse({"name": "fz", "demand": 1}).to_json()
    return st.one_of(
        st.sampled_from(live.strings()),
        st.sampled_from([
            "", "\x00", "a\x00b", "x" * 300, valid_spec, valid_spec.replace('"demand":1', '"demand":NaN'),
            json.dumps({"name": "fz", "demand": 1, "rounds": 2**63}), '{"loss": 0.5}', '{"loss": Infinity}',
            "[" * 50_000, "[" * 3000 + "]" * 3000, "not json", f"{live.job_id}.0.0.x", f"{live.job_id}.9.9.9.9",
            FABRIC_JSON, "h0-g1", JobSpec.parse({"name": "fz", "demand": 1, "cloud": {"count": 1}}).to_json(),
        ]),
        st.text(max_size=24),
    )


def _field_value(field: FieldDescriptor, live: Live, depth: int) -> st.SearchStrategy[Any]:
    kind = field.type
    if kind == FieldDescriptor.TYPE_STRING:
        return _hostile_strings(live)
    if kind == FieldDescriptor.TYPE_BYTES:
        return st.one_of(st.binary(max_size=48), st.just(encode({"w": np.ones(4, np.float32)})),
                         st.just(encode({"w": np.full(4, np.finfo(np.float32).max, np.float32)})))
    if kind in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return st.one_of(st.floats(width=64 if kind == FieldDescriptor.TYPE_DOUBLE else 32),
                         st.sampled_from([0.0, 1.0, 1e-9, 0.1, 1.5e308, -1.0, 1e12]))
    if kind == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if kind == FieldDescriptor.TYPE_ENUM:
        return st.sampled_from([value.number for value in field.enum_type.values])
    if kind in (FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32):
        return st.one_of(st.integers(0, 3), st.integers(0, 2**32 - 1))
    if kind in (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64):
        return st.one_of(st.integers(0, 3), st.integers(0, 2**64 - 1))
    if kind in (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SFIXED32):
        return st.integers(-(2**31), 2**31 - 1)
    if kind in (FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_SINT64, FieldDescriptor.TYPE_SFIXED64):
        return st.integers(-(2**63), 2**63 - 1)
    assert kind == FieldDescriptor.TYPE_MESSAGE, field.full_name
    return _message(GetMessageClass(field.message_type), live, depth + 1)


def _message(cls: type[Message], live: Live, depth: int = 0) -> st.SearchStrategy[Message]:
    """Messages of ``cls`` with a random subset of fields set to hostile or real values."""
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for field in cls.DESCRIPTOR.fields:
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            key = _field_value(field.message_type.fields_by_name["key"], live, depth)
            value = _field_value(field.message_type.fields_by_name["value"], live, depth)
            fields[field.name] = st.dictionaries(key, value, max_size=3)
        elif depth > 2 and field.type == FieldDescriptor.TYPE_MESSAGE:
            continue
        elif field.is_repeated:
            fields[field.name] = st.lists(_field_value(field, live, depth), max_size=3)
        else:
            fields[field.name] = _field_value(field, live, depth)

    @st.composite
    def build(draw: st.DrawFn) -> Message:
        message = cls()
        for name, strategy in fields.items():
            if not draw(st.booleans()):
                continue
            value = draw(strategy)
            target = getattr(message, name)
            if isinstance(value, dict):
                for k, v in value.items():
                    if isinstance(v, Message):
                        target[k].CopyFrom(v)
                    else:
                        target[k] = v
            elif isinstance(value, list):
                for item in value:
                    target.add().CopyFrom(item) if isinstance(item, Message) else target.append(item)
            elif isinstance(value, Message):
                target.CopyFrom(value)
            else:
                setattr(message, name, value)
        return message

    return build()


@st.composite
def _payload(draw: st.DrawFn, cls: type[Message], live: Live) -> bytes:
    """A message's bytes: well-formed, mutated (flipped, cut or padded) or random."""
    choice = draw(st.sampled_from(["message", "mutated", "random"]))
    if choice == "random":
        return draw(st.binary(max_size=64))
    data = bytearray(draw(_message(cls, live)).SerializeToString())
    if choice == "mutated" and data:
        for _ in range(draw(st.integers(1, 3))):
            at = draw(st.integers(0, len(data) - 1))
            data[at] = draw(st.integers(0, 255))
        if draw(st.booleans()):
            data = data[: draw(st.integers(0, len(data)))] + draw(st.binary(max_size=8))
    return bytes(data)


def _call(channel: grpc.Channel, method: MethodDescriptor, payloads: list[bytes]) -> grpc.StatusCode:
    path = f"/{method.containing_service.full_name}/{method.name}"
    try:
        if method.client_streaming and method.server_streaming:
            for _ in channel.stream_stream(path)(iter(payloads), timeout=1.5):
                pass
        elif method.client_streaming:
            channel.stream_unary(path)(iter(payloads), timeout=3.0)
        elif method.server_streaming:
            for _ in channel.unary_stream(path)(payloads[0], timeout=1.0):
                pass
        else:
            channel.unary_unary(path)(payloads[0], timeout=3.0)
    except grpc.RpcError as error:
        return error.code()
    return grpc.StatusCode.OK


class Footprint:
    """Redis keys under the test's prefix and SQL row counts, to compare around a refused call."""

    def __init__(self, redis_url: str, prefix: str, database_url: str) -> None:
        self._redis = sync_redis(redis_url)
        self._pattern = f"{prefix}:*"
        self._engine = sa.create_engine(database_url)

    def keys(self) -> set[bytes]:
        """State keys: not the rate limits' buckets, which every authenticated call spends from (and which
        expire once refilled)."""
        return {key for key in self._redis.scan_iter(match=self._pattern, count=1000) if b"{rate:" not in key}

    def rows(self) -> dict[str, int]:
        with self._engine.connect() as conn:
            return {table: conn.execute(sa.text(f"SELECT COUNT(*) FROM {table}")).scalar_one() for table in TABLES}

    def close(self) -> None:
        self._redis.close()
        self._engine.dispose()


def test_every_rpc_survives_random_and_mutated_messages(running, fuzz_settings, redis_url):
    plane = running.plane
    assert plane is not None
    raw = grpc.insecure_channel(plane.address)
    keys_on = fuzz_settings.auth == "keys"
    ids = _identities(plane) if keys_on else Identities((), (), (), ())
    channel = with_metadata(raw, ids.metadata)
    footprint = Footprint(redis_url, fuzz_settings.key_prefix, fuzz_settings.database_url)
    live = _live(channel, ids.spare, ids.secrets)
    refused: dict[grpc.StatusCode, int] = {}

    @settings(max_examples=250, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(data=st.data())
    def fuzz(data: st.DataObject) -> None:
        method = METHODS[data.draw(st.sampled_from(sorted(METHODS)), label="method")]
        cls = GetMessageClass(method.input_type)
        count = data.draw(st.integers(1, 3)) if method.client_streaming else 1
        payloads = [data.draw(_payload(cls, live), label="payload") for _ in range(count)]
        running.run(plane.journal.flush())
        keys, rows = footprint.keys(), footprint.rows()
        code = _call(channel, method, payloads)
        assert code not in FORBIDDEN, f"{method.name} answered {code}"
        if code not in MAY_HAVE_WRITTEN:
            refused[code] = refused.get(code, 0) + 1
            running.run(plane.journal.flush())
            assert footprint.keys() <= keys, f"{method.name} refused ({code}) but wrote Redis keys"
            assert footprint.rows() == rows, f"{method.name} refused ({code}) but wrote SQL rows"

    try:
        fuzz()
        assert refused.get(grpc.StatusCode.INVALID_ARGUMENT, 0) > 0  # the fuzzer did reach the validation
        # Still serving: a valid registration and a read of it.
        jobs = pb_grpc.JobServiceStub(raw)
        spec = JobSpec.parse({"name": "after-fuzz", "demand": 1, "owner": "someone-else"}).to_json()
        job = jobs.RegisterJob(pb.RegisterJobRequest(spec_json=spec), metadata=ids.other_key)
        assert jobs.GetJob(pb.GetJobRequest(job_id=job.job_id), metadata=ids.other_key).name == "after-fuzz"
        if keys_on:  # and some were refused for who made them (another device's client id, a missing role)
            assert refused.get(grpc.StatusCode.PERMISSION_DENIED, 0) > 0
    finally:
        raw.close()
        footprint.close()

    running.stop()  # and a restart on the same Redis and database comes up and serves
    restarted = running.start(fuzz_settings)
    with grpc.insecure_channel(restarted.address) as channel:
        listed = pb_grpc.JobServiceStub(channel).ListJobs(pb.ListJobsRequest(include_finished=True),
                                                          metadata=ids.other_key)
        assert job.job_id in {info.job_id for info in listed.jobs}
