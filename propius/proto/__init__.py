"""The wire protocol: ``propius.proto`` and its generated modules, and the call metadata it defines."""

DEVICE_TOKEN_HEADER = "x-propius-device-token"
"""Metadata of a device's unary and streaming client calls: its credential from ``ClientService.Enroll``
(a Multiplex stream carries it in each ``ClientCall.device_token`` instead). Job calls carry
``authorization: Bearer <API key>``."""
