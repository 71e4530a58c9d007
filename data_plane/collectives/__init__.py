"""Collectives among aggregator shards: StragglAR schedules (:mod:`.schedule`), their α-β cost against Ring
and RHD (:mod:`.cost`), the straggler tracker and per-round selector (:mod:`.selector`), and a gloo runner
that replays a schedule with point-to-point transfers in real processes (:mod:`.gloo`, needs torch), and the
sharded aggregation tier whose shard processes fold their cohorts and AllReduce (:mod:`.tier`, needs torch),
and a job's long-lived shards that its rounds fold into (:mod:`.shard_pool`, :mod:`.live_worker`, :mod:`.frames`)."""

from data_plane.collectives.cost import LinkCost
from data_plane.collectives.schedule import Op, Schedule, ScheduleError, Transfer, check_schedule, stragglar_schedule
from data_plane.collectives.selector import Algorithm, Choice, Selector, StragglerTracker

__all__ = [
    "Algorithm",
    "Choice",
    "LinkCost",
    "Op",
    "Schedule",
    "ScheduleError",
    "Selector",
    "StragglerTracker",
    "Transfer",
    "check_schedule",
    "stragglar_schedule",
]
