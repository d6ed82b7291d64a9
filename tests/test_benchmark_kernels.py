"""The kernels section of benchmarks/ (issue 14): the order its rounds are timed in, and
one small worker run through the runtime."""

from __future__ import annotations

from benchmarks import kernels


def test_each_round_goes_over_every_row_before_the_next_round():
    order = kernels.round_order(["a", "b", "c"], 4)
    assert order == [
        (0, "a"), (0, "b"), (0, "c"),
        (1, "c"), (1, "b"), (1, "a"),
        (2, "a"), (2, "b"), (2, "c"),
        (3, "c"), (3, "b"), (3, "a"),
    ]  # fmt: skip
    # a row's rounds are spread over the whole run, not back to back
    positions = [i for i, (_, label) in enumerate(order) if label == "a"]
    assert positions[-1] - positions[0] >= len(order) - 3


def test_worker_times_every_selected_row_in_every_round():
    # n = 12 keeps it fast; the rows' arrays (wires, parameters) must outlive the set-up
    # loop, since the rounds call the kernels after it
    spec = {"sizes": [12], "rounds": 3, "min_round_s": 0.001, "gates": ["ECR", "CZ, middle"]}
    out = kernels.task_kernels(spec)
    rows = out["sizes"]["12"]["kernels"]
    assert set(rows) == {
        "2q dense (ECR), low",
        "2q dense (ECR), middle",
        "2q dense (ECR), far apart",
        "CZ, middle",
    }
    for label, e in rows.items():
        assert len(e["one_s"]) == len(e["default_s"]) == len(e["pass_s"]) == 3, label
        assert all(t > 0 for t in e["one_s"] + e["pass_s"]), label
    assert rows["2q dense (ECR), middle"]["touched"] == 1.0
    assert rows["CZ, middle"]["touched"] == 0.25
