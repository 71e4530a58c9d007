"""A ClientApp worker process: ``python -m clients.flower.worker APP_DIR CLIENTAPP_REF``.

It loads the app's ClientApp once, says so with a ``ready`` frame, and then serves messages until its
stdin closes, so a node's message costs a pipe round trip, not a Python start and an import of torch.
Each request is a message as deflated Flower objects plus the node's Context
(:mod:`clients.flower.framing`); the worker inflates it, builds or decodes the Context, runs the
ClientApp and answers with the reply's objects, id-stamped and deflated, and the updated Context. An
exception of the ClientApp becomes a Flower error reply, as on a SuperNode, and leaves the Context as
it was. The protocol owns the process's original stdout; whatever the app prints goes to stderr.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import BinaryIO

from flwr.app import Context, Error, Message, RecordDict
from flwr.clientapp.client_app import ClientApp, LoadClientAppError
from flwr.common.constant import ErrorCode
from flwr.supercore.object_ref import load_app
from flwr.supercore.task_identity import TaskIdentity

from clients.flower.codec import deflate_message, inflate_message, stamp_id
from clients.flower.contexts import decode_context, encode_context
from clients.flower.framing import READY, Exchange, read_exchange, write_exchange, write_frames

__all__ = ["main"]


def _load(app_dir: str, ref: str) -> ClientApp:
    app = load_app(ref, LoadClientAppError, app_dir)
    if not isinstance(app, ClientApp):
        raise LoadClientAppError(f"{ref} is a {type(app).__name__}, not a ClientApp")
    return app


def _error_reply(message: Message, code: int, error: BaseException) -> Message:
    return Message(Error(code=code, reason=f"{type(error)}:<'{error}'>"), reply_to=message)


def _warm_up_torch() -> None:
    """Pay torch's one-time start-up now, while the worker is loading, not in the first message.

    The first backward pass and optimizer step of a process import and initialise a good deal lazily
    (about 1 s of CPU here, against ~2 ms for a small training step). A step on a private tensor with a
    zero learning rate triggers it and touches no state the app can see (no RNG, no global setting).
    """
    torch = sys.modules.get("torch")
    if torch is None:  # the app does not use torch
        return
    weight = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.SGD([weight], lr=0.0)
    (weight * 2.0).sum().backward()
    optimizer.step()


def serve(app_dir: str, ref: str, requests: BinaryIO, replies: BinaryIO) -> None:
    try:
        app: ClientApp | None = _load(app_dir, ref)
        load_error: BaseException | None = None
    except Exception as error:  # noqa: BLE001 - reported to every message, as Flower does
        app, load_error = None, error
    else:
        with contextlib.suppress(Exception):  # only an optimisation
            _warm_up_torch()
    write_frames(replies, [READY])
    while (request := read_exchange(requests)) is not None:
        message = inflate_message(request.message_id, request.objects)
        head = request.header
        if request.context:
            context = decode_context(request.context)
        else:
            context = Context(run_id=head["run_id"], node_id=head["node_id"], node_config={}, state=RecordDict(),
                              run_config=head["run_config"])
        context.node_config = head["node_config"]
        TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 0, context.run_id, context.node_id
        updated = b""  # unchanged
        if app is None:
            reply = _error_reply(message, ErrorCode.LOAD_CLIENT_APP_EXCEPTION, load_error)
        else:
            try:
                reply = app(message=message, context=context)
                updated = encode_context(context)
            except Exception as error:  # noqa: BLE001 - a failing ClientApp is a reply, not a dead worker
                reply = _error_reply(message, ErrorCode.CLIENT_APP_RAISED_EXCEPTION, error)
        write_exchange(replies, Exchange(stamp_id(reply), deflate_message(reply), updated))


def main() -> None:
    app_dir, ref = sys.argv[1:3]
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    serve(app_dir, ref, sys.stdin.buffer, replies)


if __name__ == "__main__":
    main()
