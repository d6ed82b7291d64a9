"""How a call's arguments become a compiled signature (the cache key) and back.

Semantics follow JAX and Catalyst:

- Positional arguments (a `*args` tuple expanded) and keyword arguments the caller passes are
  traced, unless marked static with `static_argnums` (positions in the call) or
  `static_argnames` (parameter names, whether passed by position or by keyword).
- Parameters the caller leaves out keep their Python default: the function is traced without
  them, so `def f(x, flag=False): if flag: ...` works, and which parameters were given is part
  of the cache key.
- Static values must be hashable; their values are part of the cache key.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from cofactor.errors import CompileError, CompileTypeError
from cofactor.launcher import BufferSpec
from cofactor.tracing import pytree
from cofactor.tracing.tracer import normalize_dtype

_PY_SCALARS = {
    float: np.dtype(np.float64),
    int: np.dtype(np.int64),
    bool: np.dtype(np.bool_),
    complex: np.dtype(np.complex128),
}


@dataclass(frozen=True)
class ShapeDtype:
    """An abstract array argument for ahead-of-time compilation: `x: ShapeDtype((3,), float)`.

    Any object with `.shape` and `.dtype` (e.g. `jax.ShapeDtypeStruct`) works the same way.
    """

    shape: tuple[int, ...]
    dtype: Any = np.float64


class AutogradArgumentError(CompileTypeError):
    """An argument is an autograd tracer: `QJIT.__call__` then makes the call an autograd
    primitive (api_extensions/autograd_bridge.py) where it can."""


def _leaf_spec(x: Any, where: str) -> BufferSpec:
    """The BufferSpec of one dynamic argument leaf (raises a CompileError for bad input)."""
    dtype = _PY_SCALARS.get(type(x))
    if dtype is not None:
        if dtype is _INT:
            _check_int64(x, where)
        return BufferSpec((), dtype)
    if isinstance(x, np.ndarray | np.generic):
        if x.dtype.kind not in "biufc":
            raise CompileError(
                f"{where}: arrays of dtype {x.dtype} cannot be compiled; expected numbers "
                "(bool, int, float or complex)"
            )
        if x.dtype == np.uint64 and x.size and np.max(x) > _INT64_MAX:
            raise OverflowError(
                f"{where}: uint64 value {np.max(x)} does not fit in int64, the integer type "
                "of compiled code (convert it to float, or keep it below 2**63)"
            )
        return BufferSpec(tuple(x.shape), normalize_dtype(x.dtype))
    if isinstance(x, list | tuple):
        arr = np.asarray(x)
        if arr.dtype == object and all(type(v) is int for v in arr.flat):
            _check_int64(max(arr.flat, key=abs), where)
        return _leaf_spec(arr, where)
    if type(x).__name__ == "ArrayBox":  # autograd's, from qml.grad / a PennyLane optimizer
        raise AutogradArgumentError(
            f"{where}: autograd (qml.grad or a PennyLane optimizer called outside qjit) cannot "
            "differentiate a qjit-compiled function; take the gradient inside it instead, "
            "e.g. qml.qjit(qml.grad(cost)) or cofactor.grad in the compiled function"
        )
    raise CompileTypeError(
        f"{where}: Cannot interpret value of type {type(x).__name__}: cofactor cannot "
        f"compile with an argument of type {type(x).__name__}; expected a number, a numpy "
        "array, or a tuple/list/dict of them (or mark it static with static_argnums)"
    )


_BUILTIN_NAMES = {t.__name__: t for t in _PY_SCALARS}
_INT = _PY_SCALARS[int]
_INT64_MAX = 2**63 - 1


def _check_int64(value: int, where: str) -> None:
    """OverflowError for a Python int outside int64, as `np.int64(value)` raises."""
    if not -_INT64_MAX - 1 <= value <= _INT64_MAX:
        raise OverflowError(
            f"{where}: Python int too large to convert to C long ({value} is outside the "
            "int64 range of compiled code)"
        )


def _is_uint64(x: Any) -> bool:
    return getattr(x, "dtype", None) == np.uint64


class StaticValues:
    """The static arguments of a call, as part of a cache key.

    Python's `==` would make a NaN argument miss the cache on every call (NaN != NaN), would
    let -0.0 reuse code compiled for 0.0 (they are equal, but `1 / x` differs) and would let
    1, 1.0 and True share one compilation (JAX's and Catalyst's hash/eq keys do), though a
    program can tell them apart (`isinstance`, `n / 2` vs `n // 2`, the dtype of
    `np.full(2, n)`): the key compares a normalised form instead, in which NaNs are equal,
    the sign of a zero counts and every number carries its type."""

    __slots__ = ("values", "_norm", "_hash")

    def __init__(self, values: tuple) -> None:
        self.values = values
        self._norm = _normalise_static(values)
        self._hash = hash(self._norm)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StaticValues) and self._norm == other._norm

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"StaticValues({self.values!r})"


_NAN_KEY = object()
_ZERO_KEY = object()


def _normalise_static(value: Any) -> Any:
    if isinstance(value, float | np.floating):
        if value != value:
            return (_NAN_KEY, type(value))
        if value == 0:
            return (_ZERO_KEY, type(value), bool(np.signbit(value)))
        return (type(value), value)
    if isinstance(value, complex | np.complexfloating):
        return (type(value), _normalise_static(value.real), _normalise_static(value.imag))
    if isinstance(value, int | np.integer | np.bool_):  # (bool is an int)
        return (type(value), value)
    if isinstance(value, tuple | frozenset):  # (NamedTuples too: their fields are numbers)
        items = (_normalise_static(v) for v in value)
        return (type(value), tuple(items) if isinstance(value, tuple) else frozenset(items))
    return value


def _is_array_list(x: Any) -> bool:
    """Lists/tuples of plain numbers (as in `f([0.2, 0.3])`) travel as one array, and the
    program sees them as the same lists/tuples of traced numbers (so `a + b` joins two
    lists and `2 * a` repeats one, as in Python, PennyLane and Catalyst).

    Only numbers of one type are packed: numpy would convert `(0.5, True)` or
    `[2**60 + 1, 0.5]` to floats (a bool seen as 1.0, an int rounded), where Catalyst and
    JAX keep each element's own type; a mixed sequence stays a pytree of its numbers."""
    return _number_type(x) is not None


def _number_type(x: Any) -> Any:
    """The one number type of a non-empty rectangular (nested) list/tuple of numbers (a
    Python type or a numpy dtype), else None."""
    if not isinstance(x, list | tuple) or not x or hasattr(x, "_fields"):
        return None  # (a namedtuple is a node: its fields are leaves, its class is kept)
    if all(type(v) in _PY_SCALARS or isinstance(v, np.generic) for v in x):
        types = {type(v) if type(v) in _PY_SCALARS else v.dtype for v in x}
    else:  # nested: rectangular only (ragged nesting stays a pytree of numbers)
        types = {_number_type(v) for v in x}
        if None in types or len({np.shape(v) for v in x}) != 1:
            return None
    return types.pop() if len(types) == 1 else None


def _promotes(src: BufferSpec, dst: BufferSpec) -> bool:
    # bool never promotes: a binary traced for ints computes `~x`, `x + x` or `x - y` as
    # integers (-2, 2) where numpy on bools gives logical results (False, True), so a bool
    # argument gets its own compilation. int -> float keeps Catalyst's promotion: the values
    # agree, only the result dtype follows the compiled signature.
    if src.dtype == np.bool_ and dst.dtype != np.bool_:
        return False
    return src.shape == dst.shape and np.can_cast(src.dtype, dst.dtype, "safe")


@dataclass(frozen=True)
class Layout:
    """Which parameters a call gave, and which of its argument slots are static.

    Slots are the call's positional arguments (`*args` expanded), then its keyword
    arguments in the order `_bind` gives them."""

    n_pos: int
    kw_names: tuple[str, ...]
    static: tuple[bool, ...]

    @staticmethod
    def positional(n: int, static_argnums: tuple[int, ...] = ()) -> Layout:
        return Layout(n, (), tuple(i in static_argnums for i in range(n)))

    def rebuild(self, static: tuple, dynamic: list[Any]) -> tuple[tuple, dict[str, Any]]:
        """The call's positional and keyword arguments from its static and dynamic values."""
        static_iter, dynamic_iter = iter(static), iter(dynamic)
        values = [next(static_iter) if s else next(dynamic_iter) for s in self.static]
        return tuple(values[: self.n_pos]), dict(
            zip(self.kw_names, values[self.n_pos :], strict=True)
        )


class CallBinder:
    """Binds calls of one function: checks `static_argnums`/`static_argnames` once, then
    turns each call into a Layout and its slot values."""

    def __init__(
        self,
        signature: inspect.Signature,
        name: str,
        static_argnums: Any = None,
        static_argnames: Any = None,
    ) -> None:
        self.signature = signature
        self.name = name
        params = list(signature.parameters.values())
        self.pos_names = tuple(
            p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        )
        self.has_var_pos = any(p.kind is p.VAR_POSITIONAL for p in params)
        self.has_var_kw = any(p.kind is p.VAR_KEYWORD for p in params)
        self.argnums = self._check_argnums(static_argnums)
        self.argnames = self._check_argnames(static_argnames)
        # a static positional parameter is static by name too (passed as `n=3`), as in JAX
        for n in self.argnums:
            if 0 <= n < len(self.pos_names):
                self.argnames = self.argnames | {self.pos_names[n]}
        self.has_static = bool(self.argnums or self.argnames)

    def _check_argnums(self, static_argnums: Any) -> tuple[int, ...]:
        if static_argnums is None:
            return ()
        nums = (static_argnums,) if isinstance(static_argnums, int) else static_argnums
        try:
            nums = tuple(nums)
        except TypeError:
            nums = (static_argnums,)
        for n in nums:
            if not isinstance(n, int | np.integer) or isinstance(n, bool):
                raise TypeError(
                    f"The `static_argnums` argument to qjit must be an int or a sequence of "
                    f"ints, got {static_argnums!r}"
                )
        n_pos = len(self.pos_names)
        if self.has_var_pos:
            # positions into the actual call (a *args tuple expanded); checked per call
            if any(n < 0 for n in nums):
                raise CompileError(
                    f"static_argnums={static_argnums!r}: negative positions are ambiguous for "
                    f"{self.name}, which takes *args; give positions from the start of the call"
                )
            return tuple(sorted({int(n) for n in nums}))
        for n in nums:
            if not -n_pos <= n < n_pos:
                raise CompileError(
                    f"static_argnums={n} is beyond the valid range: {self.name} takes "
                    f"{n_pos} positional argument(s)"
                )
        return tuple(sorted({int(n) % n_pos for n in nums}))

    def _check_argnames(self, static_argnames: Any) -> frozenset[str]:
        if static_argnames is None:
            return frozenset()
        names = (static_argnames,) if isinstance(static_argnames, str) else static_argnames
        try:
            names = tuple(names)
        except TypeError:
            names = (static_argnames,)
        if not all(isinstance(n, str) for n in names):
            raise TypeError(
                f"The `static_argnames` argument to qjit must be a str or a sequence of str, "
                f"got {static_argnames!r}"
            )
        params = self.signature.parameters
        unknown = [
            n
            for n in names
            if n not in params
            or params[n].kind is inspect.Parameter.VAR_POSITIONAL
            or params[n].kind is inspect.Parameter.VAR_KEYWORD
        ]
        if unknown and not self.has_var_kw:
            raise ValueError(
                f"qjitted function {self.name} has invalid argname "
                f"{{{', '.join(map(repr, unknown))}}} in static_argnames. Function does not "
                "take these args."
            )
        argnames = frozenset(names)
        for name in argnames & set(self.pos_names):
            self.argnums = tuple(sorted({*self.argnums, self.pos_names.index(name)}))
        return argnames

    def bind(self, args: tuple, kwargs: dict[str, Any]) -> tuple[Layout, list[Any]]:
        """The call's layout and its slot values (positional, then keyword)."""
        if not kwargs and not self.has_static:
            # the common case: a call with positional arguments only, nothing static
            try:
                self.signature.bind(*args)
            except TypeError as err:
                raise TypeError(f"{self.name}: {err}") from None
            return Layout(len(args), (), (False,) * len(args)), list(args)
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as err:
            raise TypeError(f"{self.name}: {err}") from None
        pos = bound.args
        kw = bound.kwargs
        if self.has_var_pos:
            beyond = [n for n in self.argnums if n >= len(pos)]
            if beyond:
                raise CompileError(
                    f"static_argnums={beyond[0]} is beyond the valid range of "
                    f"[0, {len(pos)}) for this call of {self.name}"
                )
        static = tuple(i in self.argnums for i in range(len(pos))) + tuple(
            name in self.argnames for name in kw
        )
        return Layout(len(pos), tuple(kw), static), [*pos, *kw.values()]


def split_slots(
    layout: Layout, values: list[Any], name: str, pos_names: tuple[str, ...] = ()
) -> tuple[list[Any], Any, tuple[BufferSpec, ...], StaticValues]:
    """Dynamic leaves, their tree and specs, and the static values of one bound call."""
    static = []
    dynamic = []
    for i, (is_static, a) in enumerate(zip(layout.static, values, strict=True)):
        if is_static:
            try:
                hash(a)
            except TypeError:
                where = _slot_name(layout, i, pos_names)
                raise CompileError(
                    f"static argument {where} of {name} must be hashable, got "
                    f"{type(a).__name__} (pass a tuple instead of a list, or make it dynamic)"
                ) from None
            static.append(a)
        else:
            dynamic.append(a)
    leaves: list[Any] = []
    subtrees = []
    for a in dynamic:
        sub_leaves, sub_tree = pytree.flatten(a, pack=_is_array_list)
        leaves += sub_leaves
        subtrees.append(sub_tree)
    tree = ("tuple", tuple(subtrees))
    specs = tuple(_leaf_spec(x, f"{name}: argument leaf {i}") for i, x in enumerate(leaves))
    return leaves, tree, specs, StaticValues(tuple(static))


def _slot_name(layout: Layout, i: int, pos_names: tuple[str, ...]) -> str:
    if i < layout.n_pos:
        return f"{i} ({pos_names[i]!r})" if i < len(pos_names) else str(i)
    return repr(layout.kw_names[i - layout.n_pos])


def annotation_specs(fn: Callable, signature: inspect.Signature) -> tuple | None:
    """Abstract arguments from type annotations (`x: float`, `y: ShapeDtype(...)`) if every
    parameter is positional and has one; None otherwise (JIT mode). A function without
    parameters has one signature, `()`: compiled when decorated, as in Catalyst."""
    params = list(signature.parameters.values())
    if not params:
        return ()
    if any(p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params):
        return None
    try:
        hints = inspect.get_annotations(fn, eval_str=True)
    except Exception:
        return None
    # qml.grad(f) / qml.jacobian(f) have no __annotations__ but carry f's signature as
    # __signature__ (its annotations are strings under `from __future__ import annotations`)
    carried = not hints and getattr(fn, "__signature__", None) is not None
    specs = []
    for p in params:
        ann = p.annotation if carried else hints.get(p.name)
        ann = _BUILTIN_NAMES.get(ann, ann) if isinstance(ann, str) else ann
        if ann in _PY_SCALARS:
            specs.append(BufferSpec((), _PY_SCALARS[ann]))
        elif hasattr(ann, "shape") and hasattr(ann, "dtype"):
            specs.append(BufferSpec(tuple(ann.shape), normalize_dtype(ann.dtype)))
        else:
            return None
    return tuple(specs)


__all__ = [
    "CallBinder",
    "Layout",
    "ShapeDtype",
    "StaticValues",
    "annotation_specs",
    "split_slots",
]
