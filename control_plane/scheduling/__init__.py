"""The scheduling core: what the scheduler knows and decides, without any I/O.

Value types (:mod:`.state`), eligibility matching (:mod:`.matching`), the policy-ordered view of open
rounds (:mod:`.ordering`), round attempts and what the scheduler learns of clients (:mod:`.attempts`,
:mod:`.history`, :mod:`.round_timings`), speed tiers per eligibility class (:mod:`.tiers`), the
fastest-fill estimate (:mod:`.fastest_fill`), the order in
which waiting clients are woken (:mod:`.wake`) and how a round is opened (:mod:`.rounds`).

It has two drivers: the live control plane (:mod:`control_plane.scheduler`, :mod:`control_plane.binding`,
:mod:`control_plane.observations`), which feeds it from Redis events and gRPC calls, and the simulator
(:mod:`propius.simulator`), which feeds it from a discrete-event clock. Neither keeps a copy of a rule.
Nothing here imports Redis, SQL, gRPC or a scheduler library (``lint-imports`` checks it), so the
simulator loads none of them.
"""
