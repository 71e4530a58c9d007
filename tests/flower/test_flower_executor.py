"""The flower-clientapp executor: Contexts across rounds and workers, failures as replies, isolation."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from flwr.app import ArrayRecord, ConfigRecord, Message, RecordDict
from flwr.common.constant import ErrorCode

from clients.executors import Task, load_executor
from clients.flower import contexts, workers
from clients.flower.codec import decode_bundle, encode_bundle, stamp_id
from clients.flower.contexts import MemoryContexts, RedisContexts, decode_context
from clients.flower.ids import node_id_for
from propius.specs import TaskConfig

from .conftest import APPS, TINYFED

CLIENT = "client-1"
NODE = node_id_for(CLIENT)


@pytest.fixture
def pool(monkeypatch) -> Iterator[workers.WorkerPool]:
    """A fresh worker pool and in-memory Context store for each test (the daemon's are process-wide)."""
    pool = workers.WorkerPool(1)
    store = MemoryContexts()
    monkeypatch.setattr("clients.executors.flower_app.worker_pool", lambda: pool)
    monkeypatch.setattr("clients.executors.flower_app.context_store", lambda: store)
    monkeypatch.setenv("PROPIUS_FLOWER_APPS", str(APPS))
    yield pool
    pool.close()


def task(app: str, message_type: str = "query", *, round_: int = 0, attempt: int = 0, manifest_attempt: int = 0,
         clientapp: str = "counterapp.client:app", run_id: int = 7) -> Task:
    message = Message(RecordDict({"q": ConfigRecord({})}), NODE, message_type)
    stamp_id(message)
    node_config = {str(NODE): {"partition-id": 3, "num-partitions": 10}}
    model = encode_bundle({NODE: [message]}, {"round": round_, "attempt": manifest_attempt, "node_config": node_config})
    options = {"app": str(APPS / app), "clientapp": clientapp, "run-id": str(run_id),
               "run-config": json.dumps({"step": 1})}
    config = TaskConfig(executor="flower-clientapp", options=options)
    return Task(job_id="j", round=round_, attempt=attempt, config=config, model=model, client_id=CLIENT, private={},
                seed=0)


def reply_of(result) -> Message:
    (reply,) = decode_bundle(result.update).inflate(NODE)
    return reply


def test_context_persists_across_rounds_and_worker_restarts(pool, redis_url, key_prefix, monkeypatch, flower_identity):
    store = RedisContexts(redis_url, key_prefix)
    monkeypatch.setattr("clients.executors.flower_app.context_store", lambda: store)
    executor = load_executor("flower-clientapp")
    counts, pids = [], []
    for round_ in range(3):
        reply = reply_of(executor.run(task("counter", round_=round_)))
        counts.append(reply.content["reply"]["n"])
        pids.append(reply.content["reply"]["pid"])
        assert reply.content["reply"]["partition"] == 3  # node_config carries Flower's partition keys
        if round_ == 1:
            pool.close()  # the node moves to a new worker: its Context comes back from Redis
    assert counts == [1, 2, 3]
    assert pids[0] == pids[1] != pids[2]  # one long-lived worker per app, until it went away
    assert decode_context(store.load(7, NODE)).state["counter"]["n"] == 3
    assert reply_of(executor.run(task("counter", run_id=8))).content["reply"]["n"] == 1  # per (run, node)


def test_a_raising_clientapp_gives_an_error_reply_and_keeps_the_context(pool, flower_identity):
    executor = load_executor("flower-clientapp")
    executor.run(task("counter"))
    failed = reply_of(executor.run(task("counter", "query.boom", round_=1)))
    assert failed.has_error()
    assert failed.error.code == ErrorCode.CLIENT_APP_RAISED_EXCEPTION
    assert "boom" in failed.error.reason
    assert reply_of(executor.run(task("counter", round_=2))).content["reply"]["n"] == 2  # state before the raise


def test_a_crashing_worker_is_replaced(pool, flower_identity):
    executor = load_executor("flower-clientapp")
    crashed = reply_of(executor.run(task("counter", "query.crash")))
    assert crashed.has_error() and crashed.error.code == ErrorCode.CLIENT_APP_CRASHED
    assert reply_of(executor.run(task("counter", round_=1))).content["reply"]["n"] == 1


def test_apps_whose_modules_share_a_name_run_in_separate_processes(pool, flower_identity):
    executor = load_executor("flower-clientapp")
    answers = [reply_of(executor.run(task(twin, clientapp="twinapp.client:app"))).content["reply"]
               for twin in ("twin-a", "twin-b", "twin-a")]
    assert [a["name"] for a in answers] == ["a", "b", "a"]
    assert answers[0]["pid"] == answers[2]["pid"] != answers[1]["pid"]


def test_a_message_of_another_attempt_is_declined(pool, flower_identity):
    executor = load_executor("flower-clientapp")
    stale = executor.run(task("counter", attempt=1, manifest_attempt=0))
    assert decode_bundle(stale.update).messages == {NODE: []}
    assert reply_of(executor.run(task("counter", attempt=1, manifest_attempt=1))).content["reply"]["n"] == 1


def test_contexts_are_kept_in_memory_without_redis(monkeypatch):
    monkeypatch.delenv("PROPIUS_REDIS_URL", raising=False)
    contexts.context_store.cache_clear()
    try:
        assert isinstance(contexts.context_store(), MemoryContexts)
    finally:
        contexts.context_store.cache_clear()


def test_only_apps_the_device_owner_listed_run(pool, monkeypatch, tmp_path, flower_identity):
    executor = load_executor("flower-clientapp")
    listed = task("counter").config
    assert executor.admits(listed)
    monkeypatch.setenv("PROPIUS_FLOWER_APPS", str(APPS / "counter"))
    assert executor.admits(listed) and not executor.admits(task("twin-a").config)
    outside = TaskConfig(executor="flower-clientapp", options={**listed.options, "app": str(APPS / "counter" / "..")})
    assert not executor.admits(outside)  # resolved: the parent of a listed app is not listed
    monkeypatch.delenv("PROPIUS_FLOWER_APPS")
    assert not executor.admits(listed)
    with pytest.raises(PermissionError, match="PROPIUS_FLOWER_APPS"):
        executor.run(task("counter"))
    # Workers were started for the admitted app only, nothing for a refused one.
    assert list(pool._workers) == [workers.AppRef(str(APPS / "counter"), "counterapp.client:app")]


def tinyfed_task(client: str, round_: int) -> Task:
    """One tinyfed train message for ``client``'s node, as the ServerApp's first wave sends it."""
    import torch  # tinyfed's model, built here as its ServerApp builds it
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 2))
    node = node_id_for(client)
    content = RecordDict({"arrays": ArrayRecord(model.state_dict()), "config": ConfigRecord({"lr": 0.1})})
    message = Message(content, node, "train")
    stamp_id(message)
    model_blob = encode_bundle({node: [message]}, {"round": round_, "attempt": 0,
                                                   "node_config": {str(node): {"partition-id": round_ % 10}}})
    options = {"app": str(TINYFED), "clientapp": "tinyfed.client_app:app", "run-id": "9", "run-config": "{}"}
    return Task(job_id="j", round=round_, attempt=0, config=TaskConfig(executor="flower-clientapp", options=options),
                model=model_blob, client_id=client, private={}, seed=0)


def test_an_admitted_app_loads_ahead_so_a_fresh_nodes_first_reply_is_as_prompt(pool, monkeypatch, flower_identity):
    """A daemon that only saw the run's offer (none of its devices served the warm-up round) has the app's
    workers loaded when its first message comes: the first reply takes about as long as the next ones."""
    monkeypatch.setenv("PROPIUS_FLOWER_APPS", str(TINYFED))
    executor = load_executor("flower-clientapp")
    first = tinyfed_task("fresh", 1)
    assert executor.admits(first.config)  # a device checking in sees the run's offer
    app = workers.AppRef(str(TINYFED), "tinyfed.client_app:app")
    loading = pool._workers.get(app, [])
    assert len(loading) == 1  # started by the offer, before any task
    deadline = time.monotonic() + 120  # generous: imports of torch and flwr on a loaded machine
    while not loading[0].ready:
        assert time.monotonic() < deadline, "the app's worker did not finish loading"
        time.sleep(0.05)

    seconds = []
    for task_ in [first] + [tinyfed_task(f"node-{i}", 1 + i) for i in range(1, 4)]:
        began = time.monotonic()
        reply = reply_of_node(executor.run(task_), task_.client_id)
        seconds.append(time.monotonic() - began)
        assert not reply.has_error(), reply.error
        assert reply.content["metrics"]["num-examples"] == 200  # tinyfed's partition size
    assert seconds[0] < 1.0 + 3 * max(seconds[1:]), seconds
    assert pool._workers[app] == loading and loading[0].pid is not None  # the same worker served them all


def reply_of_node(result, client: str) -> Message:
    (reply,) = decode_bundle(result.update).inflate(node_id_for(client))
    return reply
