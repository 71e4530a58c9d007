"""The per-class gauges name a bounded number of classes: the rest are summed under ``other``."""

from __future__ import annotations

from control_plane.metrics import MAX_CLASS_LABELS, Metrics, class_label
from control_plane.scheduling.class_queues import ClassQueue


def test_classes_past_the_cap_are_summed_as_other() -> None:
    metrics = Metrics()
    keys = [f'{{"ram":{{"min":{i}.0}}}}' for i in range(MAX_CLASS_LABELS + 5)]
    metrics.set_queues([ClassQueue(key=key, supply=10, open_rounds=1, waiting_jobs=1, open_slots=1, waiting_clients=0)
                        for key in keys])
    samples = [sample for family in metrics.registry.collect() if family.name == "propius_class_supply"
               for sample in family.samples]
    assert len(samples) == MAX_CLASS_LABELS + 1
    assert samples[-1].labels == {"class": "other"} and samples[-1].value == 50


def test_a_long_class_is_shortened_and_stays_unique() -> None:
    first, second = '{"label":"' + "a" * 200 + '1"}', '{"label":"' + "a" * 200 + '2"}'
    assert len(class_label(first)) == 80 and class_label(first) != class_label(second)
    assert class_label("{}") == "{}"
