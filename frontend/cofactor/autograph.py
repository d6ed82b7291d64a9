"""`qjit(autograph=True)`: Python `if`/`for`/`while` on traced values become cofactor's
`cond`, `for_loop` and `while_loop`, as in Catalyst.

The source-to-source conversion is done by diastatic-malt (AutoGraph, maintained outside
TensorFlow), the converter Catalyst uses. malt rewrites the function so that each statement
calls a primitive (`ag__.if_stmt`, `ag__.for_stmt`, ...) with its branches/body as closures and
`get_state`/`set_state` functions for the variables they assign; this module provides those
primitives on top of cofactor's control flow:

- `if` on a traced predicate -> `cofactor.cond` (both branches traced; every variable they
  assign must be defined on both paths, with the same type); on a Python value -> Python `if`.
- `for i in range(...)` with a traced bound -> `cofactor.for_loop`; other loops (Python
  ranges, lists, arrays) run in Python, unrolled at trace time.
- `while` whose test is traced -> `cofactor.while_loop`; otherwise a Python loop.
- `x[i] = v`, `x[i] += v` and `x[i]` (malt's list and slice conversion, enabled as in
  Catalyst): a numpy array written with a traced value or indexed by a traced index becomes
  a traced copy (numpy's own `__setitem__`/`__getitem__` would need the values); other
  targets (traced arrays, lists, dicts) are indexed as written.

Functions called from a converted function are converted too when they are user code
(`converted_call`, as malt and Catalyst do): plain functions, methods, `functools.partial`s
and QNodes defined outside the libraries in `DO_NOT_CONVERT` (PennyLane, numpy, cofactor,
...) and outside Python's standard library. A function malt cannot convert (no source, e.g.
defined in `exec`) runs as written.
"""

from __future__ import annotations

import builtins
import copy
import functools
import inspect
import os
import sysconfig
import types
from collections.abc import Callable
from typing import Any

import numpy as np
from pennylane.exceptions import AutoGraphError as _PennyLaneAutoGraphError

from cofactor.api_extensions.autograph_controls import (
    autograph_disabled,
    disable_autograph,
    including,
    is_included,
)
from cofactor.autograph_items import get_item, is_traced, set_item, update_item_with_op
from cofactor.errors import CompileError


class AutoGraphError(CompileError, _PennyLaneAutoGraphError):
    """A program autograph cannot convert (Catalyst's and PennyLane's AutoGraphError)."""


__all__ = ["AutoGraphError", "autograph_source", "disable_autograph", "run_autograph"]


class TracedRange:
    """`range(...)` with a traced bound: iterated by `for_stmt` as one compiled loop."""

    def __init__(self, start: Any, stop: Any = None, step: Any = 1) -> None:
        if stop is None:
            start, stop = 0, start
        self.start, self.stop, self.step = start, stop, step

    def __iter__(self) -> Any:
        raise CompileError(
            "a range with a traced bound can only be iterated by a `for` statement of the "
            "converted function (autograph=True)"
        )


def _range(*args: Any) -> range | TracedRange:
    if any(is_traced(a) for a in args):
        return TracedRange(*args)
    return range(*args)


#: top-level packages whose functions are library code: called as written, never converted
DO_NOT_CONVERT = frozenset(
    {
        "autoray",
        "catalyst",
        "cofactor",
        "jax",
        "malt",
        "networkx",
        "numpy",
        "pennylane",
        "pennylane_lightning",
        "rustworkx",
        "scipy",
        "sympy",
        "xdsl",
    }
)


_STDLIB = os.path.realpath(sysconfig.get_paths()["stdlib"])
_SITE = tuple(os.path.realpath(sysconfig.get_paths()[k]) for k in ("purelib", "platlib"))


def _in_stdlib(file: str) -> bool:
    path = os.path.realpath(file)
    return path.startswith(_STDLIB + os.sep) and not path.startswith(_SITE)


def _is_user_code(fn: Any) -> bool:
    """Defined outside the DO_NOT_CONVERT libraries and Python's standard library (by
    file, so that a user's module named like a standard one, e.g. `test`, is converted)."""
    module = inspect.getmodule(fn)
    name = getattr(module, "__name__", None)
    if name is not None and is_included(name):  # qjit(autograph_include=[...])
        return True
    if name is None or name.split(".")[0] in DO_NOT_CONVERT:
        return False
    file = getattr(module, "__file__", None)
    if file is None:  # builtins; but a notebook's or REPL's __main__ is user code
        return name == "__main__"
    return not _in_stdlib(file)


def _options(user_requested: bool) -> Any:
    """malt's conversion options. The optional feature LISTS rewrites `x[i] = v`,
    `x[i] += v` and `x[i]` into the `set_item` / `update_item_with_op` / `get_item`
    primitives (and list idioms into malt's Python-list defaults), as Catalyst's does."""
    from malt.core import converter

    return converter.ConversionOptions(
        recursive=True,
        user_requested=user_requested,
        optional_features=(converter.Feature.LISTS,),
    )


def _convert(target: Callable) -> Callable | None:
    """`target` (a Python function) converted, or None when malt cannot convert it (no
    source code, a generator, ...): then it runs as written, as in malt and Catalyst."""
    from malt.core import converter

    if not inspect.isfunction(target) or inspect.isgeneratorfunction(target):
        return None
    if target.__code__.co_filename == "<string>":  # exec'd code: no source to read
        return None
    options = _options(user_requested=False)
    try:
        new_fn, _, _ = _transformer_instance().transform(target, converter.ProgramContext(options))
    except Exception:  # noqa: BLE001 - malt's own rule: what it cannot convert runs as-is
        return None
    return new_fn


def converted_call(fn: Callable, args: tuple, kwargs: dict | None, *_: Any, **__: Any) -> Any:
    """A call made by a converted function: `fn` converted first when it is user code."""
    kwargs = kwargs or {}
    if autograph_disabled():  # inside disable_autograph: called as written
        return fn(*args, **kwargs)
    if fn is builtins.range:
        return _range(*args)
    if isinstance(fn, functools.partial):
        return converted_call(fn.func, fn.args + tuple(args), {**fn.keywords, **kwargs})
    import pennylane as qml
    from malt.impl.api import is_autograph_artifact

    from cofactor.jit import QJIT

    if isinstance(fn, QJIT):  # a qjit function called by converted code: inlined, converted
        return converted_call(fn.user_function, args, kwargs)
    if isinstance(fn, qml.QNode):
        return _converted_qnode(fn)(*args, **kwargs)
    if any(fn is w for w in _wrapper_functions()):
        return _call_wrapper(fn, args, kwargs)
    transform = _with_converted_function(fn)
    if transform is not None:
        return transform(*args, **kwargs)
    if is_autograph_artifact(fn) or inspect.isclass(fn) or not _is_user_code(fn):
        return fn(*args, **kwargs)
    if inspect.isfunction(fn):
        new_fn = _convert(fn)
        return fn(*args, **kwargs) if new_fn is None else new_fn(*args, **kwargs)
    # a bound method, or an object of a user class with __call__: its function, with self
    func, self = (fn.__func__, fn.__self__) if inspect.ismethod(fn) else (type(fn).__call__, fn)
    new_fn = _convert(func) if _is_user_code(func) else None
    return fn(*args, **kwargs) if new_fn is None else new_fn(self, *args, **kwargs)


def _converted_qnode(qnode: Any) -> Any:
    from malt.impl.api import is_autograph_artifact

    converted_before = hasattr(qnode, "ag_unconverted")  # run_autograph's copy
    if _is_user_code(qnode.func) and not (converted_before or is_autograph_artifact(qnode.func)):
        return run_autograph(qnode)
    return qnode


@functools.cache
def _wrapper_functions() -> tuple:
    """Functions that take the user's function as their first argument (and call it while
    tracing): that function is converted too, as Catalyst's autograph does."""
    import pennylane as qml

    import cofactor

    names = ("adjoint", "ctrl", "grad", "value_and_grad", "jacobian", "vjp", "jvp", "vmap")
    ours = tuple(getattr(cofactor, n) for n in names)
    theirs = tuple(getattr(qml, n) for n in ("adjoint", "ctrl", "prod", "grad", "jacobian"))
    return ours + theirs + (qml.vjp, qml.jvp)


def _call_wrapper(fn: Callable, args: tuple, kwargs: dict) -> Any:
    """`adjoint(f)`, `grad(f)`, ... in a converted function: `f` converted when it is user
    code (an operator, a library function or a compiled object is passed as it is)."""
    import pennylane as qml

    name = getattr(fn, "__name__", "the wrapper")
    if not args:
        if kwargs:  # keyword arguments only (`grad(argnums=1)`, a decorator factory)
            return fn(**kwargs)
        raise ValueError(f"{name} requires at least one argument")
    first = args[0]
    if isinstance(first, qml.operation.Operator):
        return fn(*args, **kwargs)
    if not callable(first):
        raise ValueError(f"First argument to {name} must be callable or an Operation")
    return fn(_converting(first), *args[1:], **kwargs)


def _converting(inner: Callable) -> Callable:
    """`inner` as a wrapped function calls it: a user's QNode or function converted, anything
    else (a library function, a compiled object) as it is."""
    import pennylane as qml

    if isinstance(inner, qml.QNode):
        return _converted_qnode(inner)
    if not (inspect.isfunction(inner) and _is_user_code(inner)):
        return inner

    @functools.wraps(inner)  # (its signature: argnums and argument checks see it)
    def converting(*a: Any, **k: Any) -> Any:
        return converted_call(inner, a, k)

    return converting


def _with_converted_function(fn: Any) -> Any:
    """A `grad(f)`/`jacobian(f)`/`vmap(f)` object (cofactor's, or PennyLane's `qml.grad` /
    `qml.jacobian`) made before the converted code calls it, e.g. `qjit(grad(circuit),
    autograph=True)`: a copy whose `f` is converted, as Catalyst's autograph calls its own
    transforms through their wrapped function; None for any other object."""
    import pennylane as qml

    from cofactor.api_extensions.differentiation import Grad, Jacobian, ValueAndGrad
    from cofactor.api_extensions.vmap import VmapCallable

    if isinstance(fn, Grad | Jacobian | ValueAndGrad | VmapCallable):
        attribute = "fn"
    elif isinstance(fn, qml.grad | qml.jacobian):
        attribute = "_func"
    else:
        return None
    inner = getattr(fn, attribute)
    converted = _converting(inner)
    if converted is inner:
        return None
    copied = copy.copy(fn)
    setattr(copied, attribute, converted)
    return copied


def _check_defined(values: tuple, names: tuple[str, ...], what: str) -> tuple:
    from malt.operators.variables import Undefined

    for v, name in zip(values, names, strict=False):
        if isinstance(v, Undefined):
            # (Catalyst's words: the first for an `if`, the second for loops)
            lead = (
                f"Some branches did not define a value for variable {name!r}"
                if what == "an `if`"
                else f"{name!r} is potentially uninitialized"
            )
            raise AutoGraphError(
                f"{lead}: autograph: variable {name!r} is not defined on every path of {what} "
                "on a traced value; give it a value before the statement"
            )
        if isinstance(v, str | bytes) and what != "an `if`":
            raise AutoGraphError(
                f"{name!r} was initialized with type {type(v)}, which {what} on a traced value "
                "cannot carry from one iteration to the next (numbers, arrays and pytrees of "
                "them can): give it a numeric value before the loop"
            )
    return values


def if_stmt(
    pred: Any,
    true_fn: Callable[[], None],
    false_fn: Callable[[], None],
    get_state: Callable[[], tuple],
    set_state: Callable[[tuple], None],
    symbol_names: tuple[str, ...],
    _num_results: int,
) -> None:
    from cofactor.api_extensions.control_flow import cond, static_truth

    if not is_traced(pred):
        return true_fn() if static_truth(pred) else false_fn()

    init = get_state()

    def branch(fn: Callable[[], None]) -> Callable[[], tuple]:
        def run() -> tuple:
            set_state(init)  # each branch starts from the state before the `if`
            fn()
            return _check_defined(get_state(), symbol_names, "an `if`")

        return run

    with _functional_writes():
        results = cond(pred)(branch(true_fn)).otherwise(branch(false_fn))()
    set_state(results if isinstance(results, tuple) else (results,))


def for_stmt(
    iterable: Any,
    extra_test: Callable[[], bool] | None,
    body_fn: Callable[[Any], None],
    get_state: Callable[[], tuple],
    set_state: Callable[[tuple], None],
    symbol_names: tuple[str, ...],
    _opts: dict,
) -> None:
    if not isinstance(iterable, TracedRange):
        for item in iterable:  # a Python loop, unrolled at trace time
            if extra_test is not None and not extra_test():
                break
            body_fn(item)
        return
    if extra_test is not None:
        raise CompileError(
            "autograph: `break`/`return` inside a `for` loop over a traced range is not "
            "supported; use a while loop"
        )
    from cofactor.api_extensions.control_flow import for_loop

    init = _check_defined(get_state(), symbol_names, "a `for` loop")

    def body(i: Any, *state: Any) -> tuple:
        set_state(state)
        body_fn(i)
        return _unpack(get_state())

    with _functional_writes():
        results = for_loop(iterable.start, iterable.stop, iterable.step)(body)(*init)
    if len(init) == 1:
        results = (results,)
    if init:
        set_state(tuple(results))


def while_stmt(
    loop_test: Callable[[], Any],
    loop_body: Callable[[], None],
    get_state: Callable[[], tuple],
    set_state: Callable[[tuple], None],
    symbol_names: tuple[str, ...],
    _opts: dict,
) -> None:
    test = loop_test()
    if not is_traced(test):
        while test:
            loop_body()
            test = loop_test()
        return
    from cofactor.api_extensions.control_flow import while_loop

    init = _check_defined(get_state(), symbol_names, "a `while` loop")

    def cond_fn(*state: Any) -> Any:
        set_state(state)
        return loop_test()

    def body(*state: Any) -> tuple:
        set_state(state)
        loop_body()
        return _unpack(get_state())

    with _functional_writes():
        results = while_loop(cond_fn)(body)(*init)
    if len(init) == 1:
        results = (results,)
    set_state(tuple(results))


def _functional_writes() -> Any:
    """The converted statement rebinds the arrays its bodies write (tracing/aliasing.py)."""
    from cofactor.tracing.aliasing import functional_writes

    return functional_writes()


def _logical(operands: tuple, array_fn: Callable, python_fn: Callable) -> Any:
    # As Catalyst's autograph: both operands are evaluated; all traced, or traced and Python
    # bools (`while x < 0.5 and n < 3:` with n still a Python int on the first test) ->
    # numpy's elementwise logical op (traced bools); otherwise Python's operator (`static
    # and traced` is the traced value, `traced and 5` needs a concrete bool and is refused).
    values = [f() for f in operands]
    traced = [is_traced(v) for v in values]
    static_bools = all(isinstance(v, bool | np.bool_) for v in values if not is_traced(v))
    if any(traced) and static_bools:
        return array_fn(*values)
    return python_fn(*values)


def and_(a: Callable, b: Callable) -> Any:
    return _logical((a, b), np.logical_and, lambda x, y: x and y)


def or_(a: Callable, b: Callable) -> Any:
    return _logical((a, b), np.logical_or, lambda x, y: x or y)


def not_(a: Any) -> Any:
    return _logical((lambda: a,), np.logical_not, lambda x: not x)


def if_exp(pred: Any, if_true: Callable[[], Any], if_false: Callable[[], Any], *_: Any) -> Any:
    """`a if pred else b`: on a traced `pred`, a `cond` whose branches give `a` and `b` (both
    traced; they must have the same structure, as an `if` statement's variables)."""
    from cofactor.api_extensions.control_flow import cond, static_truth

    if not is_traced(pred):
        return if_true() if static_truth(pred) else if_false()
    with _functional_writes():
        return cond(pred)(if_true).otherwise(if_false)()


def _unpack(state: tuple) -> Any:
    """Loop bodies return one carried value as itself, several as a tuple."""
    if not state:
        return None
    return state[0] if len(state) == 1 else state


_PRIMITIVES = {
    "if_stmt": if_stmt,
    "if_exp": if_exp,
    "for_stmt": for_stmt,
    "while_stmt": while_stmt,
    "converted_call": converted_call,
    "and_": and_,
    "or_": or_,
    "not_": not_,
    "get_item": get_item,
    "set_item": set_item,
    "update_item_with_op": update_item_with_op,
}


def _transformer() -> Any:
    from malt.impl.api import PyToPy

    class Transformer(PyToPy):
        """malt's Python-to-Python converter, with cofactor's primitives as `ag__`."""

        _locals = None

        def get_extra_locals(self) -> dict:
            if self._locals is None:
                extra = super().get_extra_locals()
                # malt's module of primitives, ours on top
                module = types.ModuleType("cofactor_autograph_primitives")
                module.__dict__.update(vars(extra["ag__"]))
                module.__dict__.update(_PRIMITIVES)
                self._locals = {**extra, "ag__": module}
            return self._locals

    return Transformer()


_TRANSFORMER = None


def _transformer_instance() -> Any:
    global _TRANSFORMER
    if _TRANSFORMER is None:
        _TRANSFORMER = _transformer()
    return _TRANSFORMER


def run_autograph(fn: Callable, include: tuple = ()) -> Callable:
    """`fn` converted (a QNode: a copy whose function is converted); the functions of the
    modules in `include` are converted too while it runs."""
    try:
        from malt.core import converter
    except ImportError as err:
        raise ImportError(
            "qjit(autograph=True) needs the diastatic-malt package: pip install diastatic-malt"
        ) from err
    import pennylane as qml

    options = _options(user_requested=True)
    target = fn.func if isinstance(fn, qml.QNode) else fn
    if not isinstance(fn, qml.QNode) and not inspect.isfunction(target):
        if not callable(target):
            raise AutoGraphError(f"Unsupported object for transformation: {type(target)}")

        # a method or a callable object (a user's class, a vmap, a cond): called as a
        # converted function calls it (a user's __call__ is converted, cofactor's are not),
        # as Catalyst converts a lambda that calls it
        def call_object(*args: Any, **kwargs: Any) -> Any:
            return converted_call(target, args, kwargs)

        return including(call_object, tuple(include)) if include else call_object
    try:
        new_fn, _, _ = _transformer_instance().transform(target, converter.ProgramContext(options))
    except Exception as err:
        raise AutoGraphError(
            f"autograph could not convert {getattr(target, '__name__', target)}: {err}"
        ) from err
    new_fn.ag_unconverted = target  # as malt's own converted functions (and Catalyst's)
    if include:
        new_fn = including(new_fn, tuple(include))
    if isinstance(fn, qml.QNode):
        qnode = copy.copy(fn)
        qnode.func = new_fn
        qnode.ag_unconverted = fn  # the converted QNode names its source, as Catalyst's
        return qnode
    return new_fn


def autograph_source(fn: Any) -> str:
    """The source code autograph made of `fn` (Catalyst's `autograph_source`): `fn` may be a
    qjit object, a QNode or a function converted by a qjit(autograph=True) (directly, or
    because a converted function called it)."""
    import pennylane as qml

    from cofactor.jit import QJIT

    if isinstance(fn, QJIT):
        fn = fn.user_function
    if isinstance(fn, qml.QNode):
        fn = fn.func
    if hasattr(fn, "ag_unconverted"):  # converted by run_autograph
        return inspect.getsource(fn)
    cached = _TRANSFORMER._cache[fn] if _TRANSFORMER is not None and inspect.isfunction(fn) else {}
    for factory in cached.values():
        return inspect.getsource(factory.module)
    raise AutoGraphError(
        f"{getattr(fn, '__name__', fn)}: the function was not converted by AutoGraph; "
        "autograph_source shows the code of functions compiled with qjit(autograph=True) "
        "(or called by one, after its first compilation)"
    )
