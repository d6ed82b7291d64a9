"""benchmarks/instructions.py: the callgrind dumps it reads, and how marks add up."""

from __future__ import annotations

from pathlib import Path

from benchmarks.instructions import by_mark, read_dumps


def _dump(path: Path, number: int, label: str, count: int) -> None:
    (path.parent / f"{path.name}.{number}").write_text(
        f"version: 1\ncreator: callgrind-3.19.0\ndesc: Trigger: Client Request: {label}\n"
        f"events: Ir\nfn=(1) main\n0 {count}\nsummary: {count}\ntotals: {count}\n"
    )


def test_dumps_are_read_in_numeric_order(tmp_path: Path) -> None:
    prefix = tmp_path / "callgrind.out"
    # (.10 after .9: numeric, not text order)
    for number in range(1, 11):
        _dump(prefix, number, f"<m{number}", number * 100)
    (tmp_path / "callgrind.out").write_text("summary: 5\n")  # the file at exit: no label
    dumps = read_dumps(str(prefix))
    assert [label for label, _ in dumps] == [f"<m{n}" for n in range(1, 11)]
    assert dumps[-1] == ("<m10", 1000)


def test_marks_are_inclusive_and_summed_over_calls() -> None:
    # a[ 10 b[ 20 ]b 30 ]a 5 b[ 7 ]b 1 end: the count of a dump is what ran before it
    dumps = [
        ("<a", 3),  # before the call's first mark
        ("<b", 10),
        (">b", 20),
        (">a", 30),
        ("<b", 5),
        (">b", 7),
        ("end", 1),
    ]
    inclusive, calls, total = by_mark(dumps)
    assert total == 76
    assert inclusive == {"a": 60, "b": 27}
    assert calls == {"a": 1, "b": 2}


def test_a_recursive_mark_counts_its_outer_call_once() -> None:
    dumps = [("<f", 0), ("<f", 4), (">f", 6), (">f", 8), ("end", 2)]
    inclusive, calls, total = by_mark(dumps)
    # the inner call's 6 lie inside the outer one too: counted once, not twice
    assert inclusive == {"f": 4 + 6 + 8}
    assert calls == {"f": 2}
    assert total == 20
