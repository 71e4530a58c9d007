"""``query``: count in ``context.state``; ``query.boom``: change the state, then raise; ``query.crash``: exit."""

import os

from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp

app = ClientApp()


def _count(context: Context) -> int:
    return int(context.state["counter"]["n"]) if "counter" in context.state else 0


@app.query()
def query(msg: Message, context: Context) -> Message:
    n = _count(context) + int(context.run_config["step"])
    context.state["counter"] = ConfigRecord({"n": n})
    partition = int(context.node_config.get("partition-id", -1))
    reply = ConfigRecord({"n": n, "pid": os.getpid(), "partition": partition})
    return Message(RecordDict({"reply": reply}), reply_to=msg)


@app.query("boom")
def boom(msg: Message, context: Context) -> Message:
    context.state["counter"] = ConfigRecord({"n": 1000})
    raise RuntimeError("boom")


@app.query("crash")
def crash(msg: Message, context: Context) -> Message:
    os._exit(3)
