"""The Propius data plane: model fan-out and update aggregation, backed by plain Redis.

Tensors travel as safetensors bytes (:mod:`data_plane.tensors`); models are content-addressed chunked
blobs (:mod:`data_plane.blobs`); updates fold into a streaming weighted FedAvg
(:mod:`data_plane.aggregator`), or on a job's live aggregator shards (:mod:`data_plane.sharded`), or are
kept whole for jobs that aggregate themselves (:mod:`data_plane.collector`).
"""

from data_plane.aggregator import RoundAggregator
from data_plane.blobs import BlobRef, BlobStore
from data_plane.claims import ClaimSet, accepted_key
from data_plane.collector import RoundCollector
from data_plane.tensors import PayloadError, Schema, check_finite, decode, encode, schema
from data_plane.updates import AddResult, Aggregate, AggregateFailed, RoundUpdates, UpdateRejected

__all__ = [
    "AddResult",
    "Aggregate",
    "AggregateFailed",
    "BlobRef",
    "BlobStore",
    "ClaimSet",
    "PayloadError",
    "RoundAggregator",
    "RoundCollector",
    "RoundUpdates",
    "Schema",
    "UpdateRejected",
    "accepted_key",
    "check_finite",
    "decode",
    "encode",
    "schema",
]
