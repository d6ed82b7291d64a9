"""The hypothesis settings the fuzzers here share: derandomized (the same examples on every
run) unless COFACTOR_FUZZ_SEED names a seed, no example database, no deadline (an example
compiles a program), and no "explain" phase (it would compile many more)."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import HealthCheck, Phase, seed, settings


def fuzz_settings(max_examples: int, seed_text: str | None) -> Callable:
    """A decorator for a `@given` test: `max_examples` examples, from `seed_text` if given."""

    def apply(fn: Callable) -> Callable:
        fn = settings(
            max_examples=max_examples,
            deadline=None,
            derandomize=seed_text is None,
            database=None,
            suppress_health_check=[
                HealthCheck.too_slow,
                HealthCheck.data_too_large,
                HealthCheck.filter_too_much,
            ],
            print_blob=True,
            phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
        )(fn)
        return seed(int(seed_text))(fn) if seed_text is not None else fn

    return apply
