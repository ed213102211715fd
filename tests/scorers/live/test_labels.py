"""Labels as the live model holds them (scorers/live/labels.py): columns give back the labels they were given."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from collectors.records import Label
from scorers.live.labels import HeldLabels, count_of, slots_of
from scorers.lookups import current_labels, down_labels
from tests.helpers import T0

# Few reviewers, values, files and times: equal times and several labels of one reviewer on one decision are common.
_labels = st.builds(
    lambda m, value, reviewer, path, line, generation, note: Label(
        T0 + timedelta(minutes=m), "d1", value, reviewer, path, line, generation, note),
    st.integers(-3, 3), st.sampled_from(["up", "down"]), st.sampled_from(["ana", "bo"]),
    st.sampled_from(["labels/a.jsonl", "labels/b.jsonl"]), st.integers(1, 2**40), st.integers(0, 2),
    st.none() | st.text(max_size=5))


@given(st.lists(_labels, min_size=1, max_size=8))
def test_a_decisions_labels_come_back_as_given_and_answer_as_the_pure_lookups(labels: list[Label]) -> None:
    """Held and made again, the labels are the ones given, in arrival order; each reviewer's current labels and the
    current ``down`` ones are what scorers/lookups.py finds in the labels themselves."""
    held = HeldLabels()
    slots = [held.add(lb) for lb in labels]
    filed: int | tuple[int, ...] = slots[0] if len(slots) == 1 else tuple(slots)
    assert list(slots_of(filed)) == slots and count_of(filed) == len(labels)
    assert held.labels(filed) == labels
    assert held.current_values(filed) == [lb.value for lb in current_labels(labels)]
    assert held.current_down(filed) == down_labels(current_labels(labels))
    assert held.label(held.latest(filed)).ts == max(lb.ts for lb in labels)
    assert len(held.kinds) == len({(lb.value, lb.reviewer, lb.path, lb.generation) for lb in labels})


def test_a_slot_let_go_is_given_to_the_next_label_without_its_note() -> None:
    """Letting a label go frees its slot for the next one (memory follows the window), and its note goes with it."""
    held = HeldLabels()
    first = held.add(Label(T0, "d1", "down", "ana", "labels/a.jsonl", 7, note="why"))
    second = held.add(Label(T0, "d2", "up", "ana", "labels/a.jsonl", 8))
    assert held.label(first).note == "why" and len(held) == 2
    held.drop(first)
    assert len(held) == 1 and not held.notes
    # Strings of their own, as from a parser.
    again = held.add(Label(T0 + timedelta(hours=1), "d3", "".join(["u", "p"]), "bo", "/".join(["labels", "a.jsonl"]),
                           9))
    assert again == first and len(held.ts) == 2
    assert held.label(again) == Label(T0 + timedelta(hours=1), "d3", "up", "bo", "labels/a.jsonl", 9)
    assert held.label(second) == Label(T0, "d2", "up", "ana", "labels/a.jsonl", 8)
    # Each combination's strings held once across combinations (the value of two reviewers' labels: one string).
    ana, bo = held.kinds[held.kind[second]], held.kinds[held.kind[again]]
    assert ana[0] is bo[0] and ana[2] is bo[2]
