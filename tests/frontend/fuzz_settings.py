"""The hypothesis settings the fuzzers here share: COFACTOR_FUZZ_EXAMPLES examples (each
fuzzer has its default), derandomized (the same examples on every run) unless
COFACTOR_FUZZ_SEED names a seed, no example database, no deadline (an example
compiles a program), and no "explain" phase (it would compile many more)."""

from __future__ import annotations

import os
from collections.abc import Callable

from hypothesis import HealthCheck, Phase, seed, settings


def fuzz_settings(default_examples: int) -> Callable:
    """A decorator for a `@given` test, with the examples and seed the environment asks for."""
    max_examples = int(os.environ.get("COFACTOR_FUZZ_EXAMPLES", str(default_examples)))
    seed_text = os.environ.get("COFACTOR_FUZZ_SEED")

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
