"""One Grid "send wave" = one Propius round: who bound, what was sent to whom, who has answered.

Pure bookkeeping, driven by the job's events (see :mod:`propius.flower.driver`). Replies arrive as
the round's collected payloads when it closes; until then the wave knows who *delivered* (an accepted
upload) and who is *gone* (released the round, or was dropped when its lease ran out), which is
enough to decide when nothing more can come.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from flwr.app import Message
from flwr.server.superlink.linkstate.utils import create_message_error_unavailable_res_message

from clients.flower.codec import CodecError, decode_bundle, stamp_id
from clients.flower.ids import node_id_for
from data_plane.tensors import PayloadError, decode

__all__ = ["Wave"]

log = logging.getLogger(__name__)


@dataclass
class Wave:
    round: int
    attempt: int
    demand: int
    target: int
    started_unix: float
    bound: dict[str, int] = field(default_factory=dict)  # client -> node, in bind order
    delivered: set[str] = field(default_factory=set)
    released: set[str] = field(default_factory=set)
    dropped: set[str] = field(default_factory=set)  # their lease ran out
    messages: dict[str, Message] = field(default_factory=dict)  # message id -> instruction
    warm_up: bool = False  # the run's first round: no messages, it only starts the clients' workers
    published: bool = False
    closing: bool = False
    closed: bool = False

    @property
    def nodes(self) -> list[int]:
        """Nodes still bound (a released client's node is not offered to the ServerApp)."""
        gone = self.released | self.dropped
        return [node for client, node in self.bound.items() if client not in gone]

    def addressed(self) -> set[str]:
        """Clients that have at least one message of this wave."""
        nodes = {message.metadata.dst_node_id for message in self.messages.values()}
        return {client for client, node in self.bound.items() if node in nodes}

    def undecided(self) -> set[str]:
        """Bound clients that have neither delivered nor gone: a reply (or decline) may still come."""
        return set(self.bound) - self.delivered - self.released - self.dropped

    def settled(self) -> bool:
        """True when every addressed client delivered or is gone: no further reply can arrive."""
        return self.published and not self.warm_up and not (self.addressed() & self.undecided())

    def covers_all_nodes(self) -> bool:
        nodes = {message.metadata.dst_node_id for message in self.messages.values()}
        return set(self.nodes) <= nodes

    def replies(self, payloads: Mapping[str, np.ndarray]) -> dict[str, Message]:
        """Match the collected payloads (client -> bundle) to this wave's messages.

        A reply counts only if it answers a message of this wave addressed to the uploading client's
        node and says it comes from that node; anything else is logged and dropped. A message whose
        node delivered without answering it, or is gone, gets the error reply Flower's SuperLink would
        give (reply unavailable, node unavailable); one still in progress gets none.
        """
        replies: dict[str, Message] = {}
        for client, payload in payloads.items():
            node = node_id_for(client)
            try:
                bundle = decode_bundle(decode(payload.tobytes()))
                answers = bundle.inflate(node)
            except (PayloadError, CodecError) as error:
                log.warning("round %d: unreadable reply of client %s: %s", self.round, client, error)
                continue
            for reply in answers:
                asked = self.messages.get(reply.metadata.reply_to_message_id)
                if asked is None or asked.metadata.dst_node_id != node or reply.metadata.src_node_id != node:
                    log.warning("round %d: dropping a reply of client %s to unknown message %s", self.round,
                                client, reply.metadata.reply_to_message_id[:12])
                    continue
                stamp_id(reply)
                replies.setdefault(asked.metadata.message_id, reply)
        gone = self.released | self.dropped
        client_of = {node: client for client, node in self.bound.items()}
        for message_id, message in self.messages.items():
            if message_id in replies:
                continue
            client = client_of.get(message.metadata.dst_node_id)
            if client in payloads:
                replies[message_id] = create_message_error_unavailable_res_message(message.metadata, "msg_unavail")
            elif client in gone:
                replies[message_id] = create_message_error_unavailable_res_message(message.metadata, "node_unavail")
        return replies
