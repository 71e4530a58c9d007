"""Answers ``query`` with its own name; both twins import as ``twinapp.client``."""

import os

from flwr.app import ConfigRecord, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import ServerApp

NAME = "b"
app = ClientApp()
server = ServerApp()


@app.query()
def query(msg, context):
    return Message(RecordDict({"reply": ConfigRecord({"name": NAME, "pid": os.getpid()})}), reply_to=msg)
