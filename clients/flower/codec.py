"""Flower messages as Propius payloads, in Flower's own byte encoding.

A payload is a safetensors dictionary (what Propius rounds carry): one ``uint8`` tensor per Flower
object (Message, RecordDict, ArrayRecord, Array, ArrayChunk) named by its object id, the sha256 of its
deflated bytes, plus a JSON manifest saying which messages are for which node. Messages that share
content share objects, so a model broadcast to K nodes is one copy in the round's blob, which the data
plane stores once more by digest. Decoding checks every object against its id and inflates only
Flower's registered object types: nothing is unpickled or executed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from flwr.app import Message
from flwr.supercore.inflatable.inflatable_object import (
    UnexpectedObjectContentError,
    get_all_nested_objects,
    get_object_id,
    no_object_id_recompute,
)
from flwr.supercore.inflatable.inflatable_utils import inflate_object_from_contents, validate_object_content
from google.protobuf.message import DecodeError

__all__ = [
    "MANIFEST", "Bundle", "CodecError", "bundle_tensors", "decode_bundle", "deflate_message", "encode_bundle",
    "inflate_message", "stamp_id",
]

MANIFEST = "manifest"


class CodecError(ValueError):
    """A payload is not a well-formed bundle of Flower objects."""


@dataclass(frozen=True)
class Bundle:
    """Decoded payload: each node's message ids, the object contents they inflate from, and metadata."""

    messages: dict[int, list[str]]
    meta: dict[str, Any]
    contents: dict[str, bytes] = field(repr=False)

    def inflate(self, node_id: int) -> list[Message]:
        """The messages for ``node_id``, with their message ids set (Flower's: the object id)."""
        cache: dict = {}
        return [inflate_message(message_id, self.contents, cache) for message_id in self.messages.get(node_id, [])]


def inflate_message(message_id: str, contents: Mapping[str, bytes], cache: dict | None = None) -> Message:
    """The message ``message_id`` from deflated objects (checked against their ids by :func:`decode_bundle`)."""
    try:
        message = inflate_object_from_contents(message_id, contents, keep_object_contents=True,
                                               objects={} if cache is None else cache)
    except (KeyError, ValueError, DecodeError) as error:
        raise CodecError(f"message {message_id} cannot be inflated: {error}") from None
    if not isinstance(message, Message):
        raise CodecError(f"object {message_id} is a {type(message).__name__}, not a Message")
    message.metadata.__dict__["_message_id"] = message_id
    return message


def deflate_message(message: Message) -> dict[str, bytes]:
    """The deflated objects of a message whose id is set (:func:`stamp_id`), by object id."""
    with no_object_id_recompute():
        return {object_id: obj.deflate() for object_id, obj in get_all_nested_objects(message).items()}


def stamp_id(message: Message) -> str:
    """Give a message Flower's content-derived id (what SuperLink and SuperNode do) and return it."""
    with no_object_id_recompute():
        message.metadata.__dict__["_message_id"] = message.object_id
    return message.metadata.message_id


def encode_bundle(messages: Mapping[int, Sequence[Message]], meta: Mapping[str, Any] | None = None
                  ) -> dict[str, np.ndarray]:
    """Tensors for ``node_id -> messages``; objects shared between messages are stored once."""
    objects: dict[str, bytes] = {}
    index: dict[int, list[str]] = {}
    with no_object_id_recompute():
        for node_id, node_messages in messages.items():
            ids = index.setdefault(node_id, [])
            for message in node_messages:
                for object_id, obj in get_all_nested_objects(message).items():
                    if object_id not in objects:
                        objects[object_id] = obj.deflate()
                ids.append(message.object_id)
    return bundle_tensors(index, objects, meta)


def bundle_tensors(index: Mapping[int, Sequence[str]], objects: Mapping[str, bytes],
                   meta: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
    """Tensors for already deflated objects and ``node_id -> message ids``."""
    manifest = json.dumps({"messages": {str(node): list(ids) for node, ids in index.items()}, **(meta or {})})
    tensors = {object_id: np.frombuffer(content, np.uint8) for object_id, content in objects.items()}
    tensors[MANIFEST] = np.frombuffer(manifest.encode(), np.uint8)
    return tensors


def decode_bundle(tensors: Mapping[str, np.ndarray]) -> Bundle:
    if MANIFEST not in tensors:
        raise CodecError("payload has no manifest")
    try:
        manifest = json.loads(tensors[MANIFEST].tobytes())
        messages = {int(node): [str(i) for i in ids] for node, ids in manifest.pop("messages").items()}
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise CodecError(f"malformed manifest: {error}") from None
    contents = {}
    for object_id, array in tensors.items():
        if object_id == MANIFEST:
            continue
        content = array.tobytes()
        if get_object_id(content) != object_id:
            raise CodecError(f"object {object_id[:12]}… does not match its id")
        try:
            validate_object_content(content)
        except UnexpectedObjectContentError as error:
            raise CodecError(str(error)) from None
        contents[object_id] = content
    return Bundle(messages, manifest, contents)
