"""Pieces of Flower on Propius that need no server: codec, partitions, app config."""

from __future__ import annotations

import numpy as np
import pytest
from flwr.app import ArrayRecord, ConfigRecord, Message, RecordDict

from clients.flower.codec import MANIFEST, CodecError, decode_bundle, encode_bundle, stamp_id
from data_plane.tensors import decode, encode
from propius.flower.partitions import PartitionMap
from propius.flower.project import FlowerProject, RunOptions

from .conftest import APPS, TINYFED


def test_a_broadcast_is_stored_once_and_decodes_per_node(flower_identity):
    model = RecordDict({"arrays": ArrayRecord([np.arange(50_000, dtype=np.float32)]), "config": ConfigRecord({})})
    messages = {node: [Message(model, node, "train")] for node in range(1, 11)}
    ids = {node: stamp_id(m[0]) for node, m in messages.items()}
    payload = encode(encode_bundle(messages, {"round": 3}))
    assert 200_000 < len(payload) < 2 * 200_000  # one copy of the 200 kB array, not ten
    bundle = decode_bundle(decode(payload))
    assert bundle.meta == {"round": 3}
    (message,) = bundle.inflate(7)
    assert message.metadata.message_id == ids[7] == message.object_id
    assert message.metadata.dst_node_id == 7
    np.testing.assert_array_equal(message.content["arrays"].to_numpy_ndarrays()[0], np.arange(50_000))


def test_a_tampered_object_is_refused(flower_identity):
    message = Message(RecordDict({"c": ConfigRecord({"x": 1})}), 5, "query")
    stamp_id(message)
    tensors = encode_bundle({5: [message]})
    name = next(n for n in tensors if n != MANIFEST)
    tensors[name] = tensors[name].copy()
    tensors[name][-1] ^= 1
    with pytest.raises(CodecError, match="does not match its id"):
        decode_bundle(tensors)
    with pytest.raises(CodecError, match="no manifest"):
        decode_bundle({name: tensors[name]})


def test_partitions_stay_with_their_node_and_never_collide():
    partitions = PartitionMap(4)
    first = partitions.assign([10, 11, 12, 13])
    assert first == {10: 0, 11: 1, 12: 2, 13: 3}
    second = partitions.assign([13, 14, 10, 15])  # 11 and 12 left, 14 and 15 came
    assert second[13] == 3 and second[10] == 0 and {second[14], second[15]} == {1, 2}
    assert sorted(partitions.assign([20, 21, 22, 23, 24]).values()) == [0, 0, 1, 2, 3]  # more nodes than partitions


def test_project_reads_flower_and_propius_tables():
    tinyfed = FlowerProject.load(TINYFED)
    assert (tinyfed.fab_id, tinyfed.serverapp) == ("bench/tinyfed", "tinyfed.server_app:app")
    assert tinyfed.run_config({"lr": 0.2}) == {"num-server-rounds": 3, "local-epochs": 1, "lr": 0.2}
    with pytest.raises(ValueError):
        tinyfed.run_config({"no-such-key": 1})
    spec, partitions = tinyfed.job_spec(9, tinyfed.run_config({}), RunOptions(demand=5, requirements={
        "public": {"cpu_f": {"min": 7}}}))
    assert (spec.demand, spec.over_selection, partitions, spec.task.executor) == (5, 1.0, 5, "flower-clientapp")
    assert spec.aggregation == "collect" and spec.task.options["run-id"] == "9"
    legacy = FlowerProject.load(APPS / "legacyapp")
    assert legacy.job_spec(1, {}, RunOptions())[0].demand == 8  # [tool.propius]
    assert legacy.job_spec(1, {}, RunOptions(demand=3))[0].demand == 3  # flags win
