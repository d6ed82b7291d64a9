"""Catalyst's `qjit` options that cofactor accepts only at their default values.

`qjit` takes every option Catalyst's `qjit` takes, so that programs written for Catalyst
run unchanged; an option set to a value cofactor cannot honour raises an error naming the
option and what to do instead.
"""

from __future__ import annotations

from typing import Any

# Catalyst's qjit options, and their default values: accepted with these values (and the ones
# `check_options` lets through), refused with a message naming the option otherwise.
CATALYST_DEFAULTS: dict[str, Any] = {
    "async_qnodes": False,
    "use_nameloc": False,
    "pipelines": None,
    "abstracted_axes": None,
    "disable_assertions": False,
    "circuit_transform_pipeline": None,
    "pass_plugins": None,
    "dialect_plugins": None,
    "skip_preprocess": False,
    "collect_decomp_rules": True,
}
_WHY_NOT: dict[str, str] = {
    "pipelines": "cofactor compiles with its own fixed pipeline (cofactor-opt, LLVM, Enzyme); "
    "custom MLIR pass pipelines are not supported",
    "circuit_transform_pipeline": "apply PennyLane transforms to the QNode instead (e.g. "
    "@qml.transforms.cancel_inverses under @qml.qnode); they run at trace time",
    "pass_plugins": "MLIR pass plugins are not supported",
    "dialect_plugins": "MLIR dialect plugins are not supported",
}


def check_options(options: dict[str, Any]) -> None:
    """Catalyst options at values cofactor cannot honour raise an error naming the option."""
    for name, value in options.items():
        default = CATALYST_DEFAULTS[name]
        if value is default or value == default:
            continue
        if name in ("pass_plugins", "dialect_plugins") and not value:
            continue  # an empty list/set is the same as none
        if name in ("async_qnodes", "use_nameloc", "disable_assertions"):
            # async_qnodes: QNodes run one after the other, with the same results;
            # use_nameloc only names IR values; disable_assertions is qjit's own option.
            continue
        if name == "abstracted_axes":
            # the axes stay static in the compiled code: each new shape compiles a new
            # version, with the same results (x.shape[0] is a Python int in the program)
            continue
        if name in ("skip_preprocess", "collect_decomp_rules"):
            continue  # as in Catalyst, these only act with program capture, which is off
        raise NotImplementedError(
            f"qjit option {name}={value!r} is not supported by cofactor: "
            f"{_WHY_NOT.get(name, 'leave it at its default')}"
        )
