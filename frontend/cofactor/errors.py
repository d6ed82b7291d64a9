"""The exceptions cofactor raises. Each one says what went wrong and what to do."""

from __future__ import annotations


class CompileError(Exception):
    """A program could not be compiled: bad input to `qjit`, or a toolchain stage failed.

    For toolchain failures, `stage` names the step ("cofactor-opt", "mlir-translate",
    "opt", "llc", "link", ...) and `tool_message` holds what the tool printed.
    """

    def __init__(self, message: str, *, stage: str | None = None, tool_message: str | None = None):
        self.stage = stage
        self.tool_message = tool_message
        text = message if stage is None else f"[{stage}] {message}"
        if tool_message:
            text = f"{text}\n{tool_message.strip()}"
        super().__init__(text)


class DifferentiableCompileError(CompileError):
    """A program cannot be differentiated as asked (no gradient rule, wrong argument type...)."""


class ToolchainNotFoundError(CompileError):
    """A tool of the pipeline (cofactor-opt, opt-15, the Enzyme plugin...) is missing."""


class RuntimeExecutionError(RuntimeError):
    """The runtime reported an error while a compiled program ran (bad wire, ...)."""


class CompileTypeError(CompileError, TypeError):
    """A program Catalyst refuses with a TypeError (e.g. cond branches returning different
    structures, the wrong number of tangents): catchable as either."""


class CompileValueError(CompileError, ValueError):
    """A program Catalyst refuses with a ValueError (e.g. a bad `method` or `argnums`, a
    tangent of the wrong shape): catchable as either."""


class CompileNotImplementedError(CompileError, NotImplementedError):
    """A program Catalyst refuses with a NotImplementedError (e.g. a measurement that
    mcm_method='one-shot' cannot gather over shots): catchable as either."""
