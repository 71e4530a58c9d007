import hashlib
import random

import pytest

from clients.attributes import detect_profile
from clients.backoff import Backoff
from clients.transport import TransferError, read_blob, upload_messages
from propius.proto import propius_pb2 as pb


def test_backoff_doubles_to_the_cap_with_jitter() -> None:
    backoff = Backoff(random.Random(0), initial_s=0.2, cap_s=5.0)
    delays = [backoff.next() for _ in range(8)]
    for delay, base in zip(delays, [0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0], strict=True):
        assert 0.8 * base <= delay <= 1.2 * base
    backoff.reset()
    assert backoff.next() <= 0.24


def test_upload_is_header_then_chunks() -> None:
    header = pb.UploadUpdateRequest(client_id="c", job_id="j", round=2)
    messages = list(upload_messages(header, b"x" * 2500, chunk_bytes=1000))
    assert messages[0] == header
    assert [len(m.data) for m in messages[1:]] == [1000, 1000, 500]


async def _stream(*chunks: pb.BlobChunk):
    for chunk in chunks:
        yield chunk


async def test_read_blob_checks_size_and_digest() -> None:
    data = b"abcdef"
    digest = hashlib.sha256(data).hexdigest()
    first = pb.BlobChunk(data=data[:4], total_size=6, digest=digest)
    assert await read_blob(_stream(first, pb.BlobChunk(data=data[4:]))) == data
    with pytest.raises(TransferError, match="ended"):
        await read_blob(_stream(pb.BlobChunk(data=data[:4], total_size=6)))
    with pytest.raises(TransferError, match="digest"):
        await read_blob(_stream(pb.BlobChunk(data=b"abcdeg", total_size=6, digest=digest)))


def test_detected_profile_has_public_attributes_and_overrides() -> None:
    profile = detect_profile("me", labels={"os": "android"}, numeric={"ram": 3})
    assert profile.numeric["cpus"] >= 1 and profile.numeric["ram"] == 3
    assert profile.labels["gpu"] in {"yes", "no"} and profile.labels["os"] == "android"
