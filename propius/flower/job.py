"""The SDK job a Flower run drives, plus the one call it needs that ``AsyncJob`` lacks: ``end_round``.

A Grid closes a round itself when every message it sent is answered or its node is gone (or the
ServerApp's timeout passed), rather than waiting for the round's deadline.
"""

from __future__ import annotations

from propius.proto import propius_pb2 as pb
from propius.sdk import AsyncJob, retrying

__all__ = ["FlowerJob"]


class FlowerJob(AsyncJob):
    async def end_round(self, round_: int) -> pb.RoundInfo:
        request = pb.EndRoundRequest(job_id=self.job_id, job_token=self.token, round=round_)
        return await retrying(lambda: self._jobs.EndRound(request))
