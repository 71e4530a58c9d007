"""One long-lived aggregator shard of a job (``python -m data_plane.collectives.live_worker``).

Started by :class:`data_plane.collectives.shard_pool.ShardPool` with one end of a socket pair; it imports
torch once, joins the shards' process group (gloo, or NCCL with a GPU per shard) and then serves frames
(:mod:`data_plane.collectives.frames`) until the socket closes, which is also what happens when the
control plane dies:

- ``fold`` (round, attempt, the generation of the control plane's aggregator of it, weight; body: the
  update's safetensors bytes, validated by the control plane and checked again here): fold it into this
  shard's partial sum of that attempt (:class:`data_plane.fold.WeightedSum`); a fold of another attempt
  or generation (an attempt taken over and folded again) starts a new partial.
- ``reduce`` (round, attempt, generation, the pool's step number, the folds the control plane counted for
  this shard, the model's schema in pack order, the algorithm and group order the control plane's selector
  chose): move the partial to the common unit :data:`data_plane.collectives.tier_worker.UNIT`, pack it
  (zeros for an empty cohort), AllReduce it with every shard, and rank 0 answers the mean as safetensors
  bytes. A shard whose count or schema disagrees still joins the collective (its peers must not hang) and
  answers an error. torch.profiler records each reduce as ``ProfilerStep#<step>`` (the pack, then the
  collective) into ``<trace dir>/``:func:`step_trace_name`; a shard keeps its last ``--keep-traces``, so a
  job's export carries real collectives.

Nothing arrives pickled; an error in a fold is answered and the shard goes on; an error in a collective
is answered and the shard exits (its group is no longer usable).
"""

from __future__ import annotations

import argparse
import socket
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from data_plane.collectives.frames import recv_frame, send_frame
from data_plane.collectives.process_group import default_backend, shard_device
from data_plane.collectives.tier_worker import UNIT
from data_plane.fold import WeightedSum
from data_plane.tensors import Schema, check_finite, decode, encode, schema

__all__ = ["PACK_RANGE", "main", "step_trace_name"]

PACK_RANGE = "tier_pack_partial"
"""The profiler range around a shard's move of its partial sums to the common unit and packing (compute)."""


def step_trace_name(rank: int, step: int) -> str:
    """The file of one reduce's trace; zero-padded, so names sort as steps do."""
    return f"rank{rank}-{step:09d}.json"


def _schema(entries: list[list[Any]]) -> Schema:
    return {str(name): (str(dtype), tuple(int(d) for d in shape)) for name, dtype, shape in entries}


class _Shard:
    def __init__(self, sock: socket.socket, rank: int, world: int, device: Any, traces: Path, keep: int) -> None:
        self.sock, self.rank, self.world, self.device = sock, rank, world, device
        self.traces, self.keep = traces, keep
        self.key: tuple[int, int, int] | None = None
        self.partial = WeightedSum()
        self.count = 0

    def serve(self) -> None:
        backend = "nccl" if self.device.type == "cuda" else "gloo"
        send_frame(self.sock, {"op": "ready", "rank": self.rank, "backend": backend})
        while (frame := recv_frame(self.sock)) is not None:
            header, body = frame
            if header.get("op") == "fold":
                try:
                    self.fold(header, body)
                except Exception as error:  # noqa: BLE001 - answered; the control plane gives the claim back
                    send_frame(self.sock, {"ok": False, "error": f"{type(error).__name__}: {error}"})
                else:
                    send_frame(self.sock, {"ok": True, "count": self.count})
            elif header.get("op") == "reduce":
                reply, mean = self.reduce(header)
                send_frame(self.sock, reply, mean)
            else:
                send_frame(self.sock, {"ok": False, "error": f"unknown op {header.get('op')!r}"})

    def fold(self, header: dict[str, Any], body: bytearray) -> None:
        key = (int(header["round"]), int(header["attempt"]), int(header["generation"]))
        if key != self.key:
            self.key, self.partial, self.count = key, WeightedSum(), 0
        tensors = decode(body)
        check_finite(tensors)
        if self.partial.schema is not None and self.partial.schema != schema(tensors):
            raise ValueError("schema mismatch with this shard's earlier updates")
        self.partial.fold(tensors, float(header["weight"]))
        self.count += 1

    def reduce(self, header: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        from torch.profiler import ProfilerActivity, profile, record_function

        key = (int(header["round"]), int(header["attempt"]), int(header["generation"]))
        step = int(header["step"])
        layout = _schema(header["schema"])
        expected = int(header["expected"])
        error = ""
        count = self.count if key == self.key else 0
        if count != expected:
            error = f"shard {self.rank} folded {count} updates of round {key}, the control plane counted {expected}"
        elif expected and self.partial.schema != layout:
            error = f"shard {self.rank}: its updates' schema differs from the model's"
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.device.type == "cuda" else [])
        with profile(activities=activities) as prof, record_function(f"ProfilerStep#{step}"):
            with record_function(PACK_RANGE):
                tensor = self._packed(layout, ok=bool(expected) and not error)
            arrival = time.time()
            summed = self._collective(tensor, header)
        finish = time.time()
        prof.export_chrome_trace(str(self.traces / step_trace_name(self.rank, step)))
        for old in sorted(self.traces.glob(f"rank{self.rank}-*.json"))[:-self.keep]:
            old.unlink(missing_ok=True)
        self.key, self.partial, self.count = None, WeightedSum(), 0  # the attempt is over: free its sums
        reply: dict[str, Any] = {"ok": not error, "error": error, "arrival": arrival, "finish": finish}
        if error or self.rank != 0:
            return reply, b""
        total = WeightedSum.empty(layout)
        total.unpack(summed)
        reply["total_weight"] = total.weight * UNIT
        return reply, encode(total.mean())

    def _packed(self, layout: Schema, *, ok: bool) -> Any:
        """This shard's sums in the common unit, packed in the model's order; zeros when it has none to give
        (the shard still takes part, or the others' collective would hang)."""
        import torch

        if ok:
            self.partial.rescale(UNIT)
            self.partial.schema = layout  # equal, but packed in the model's order, as every shard packs
            flat = self.partial.pack()
        else:
            flat = WeightedSum.empty(layout).pack()
        return torch.from_numpy(flat).to(self.device)

    def _collective(self, tensor: Any, header: dict[str, Any]) -> Any:
        """The step's AllReduce; a failure is answered and ends this shard (its group is broken)."""
        from data_plane.collectives.gloo import stragglar_allreduce

        try:
            if header["algorithm"] == "stragglar" and self.world >= 3:
                tensor = stragglar_allreduce(tensor, [int(r) for r in header["order"]], self.rank)
            else:
                import torch.distributed as dist

                dist.all_reduce(tensor)
            return tensor.cpu().numpy()
        except Exception as error:  # noqa: BLE001 - answered, then this shard exits: its group is broken
            send_frame(self.sock, {"ok": False, "error": f"collective failed: {error}"})
            sys.exit(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fd", type=int, required=True, help="this shard's end of the control plane's socket pair")
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--store", required=True, help="the process group's file store (fresh per pool)")
    parser.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto",
                        help="auto: NCCL when CUDA has a device per shard (every shard decides alike), else gloo")
    parser.add_argument("--timeout-s", type=float, default=300.0)
    parser.add_argument("--trace-dir", required=True, help="where each reduce's torch.profiler trace goes")
    parser.add_argument("--keep-traces", type=int, default=64, help="the most recent traces this shard keeps")
    args = parser.parse_args()
    sock = socket.socket(fileno=args.fd)

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    if args.backend == "auto":
        args.backend = default_backend(args.world)
    device = shard_device(args.backend, args.rank)
    dist.init_process_group(args.backend, store=dist.FileStore(args.store, args.world), rank=args.rank,
                            world_size=args.world, timeout=timedelta(seconds=args.timeout_s))
    try:
        _Shard(sock, args.rank, args.world, device, Path(args.trace_dir), max(1, args.keep_traces)).serve()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
