"""`vjp` and `jvp` (Catalyst's signatures and argument checks) on top of the differentiation
requests of `differentiation`: a vjp is one `gradient.vjp` with the user's cotangents (or a
finite-difference Jacobian contracted with them), a jvp contracts the Jacobian with the
tangents. Invalid arguments raise Catalyst's exception types (docs/gradients.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from cofactor.api_extensions.diff_function import fn_name, is_leaf
from cofactor.api_extensions.differentiation import _Request
from cofactor.errors import CompileError, CompileTypeError, CompileValueError
from cofactor.launcher import BufferSpec
from cofactor.tracing import context, pytree
from cofactor.tracing.numpy_rules import as_tracer, cast_tracer, const_scalar
from cofactor.tracing.tracer import FLOAT, Tracer


def _params(params: Any) -> tuple:
    return tuple(params) if isinstance(params, tuple | list) else (params,)


def _sequence(x: Any, kind: str, hint: str) -> tuple:
    """Catalyst's check: params (and a jvp's tangents) are a list or tuple, one per argument."""
    if not isinstance(x, tuple | list):
        raise CompileValueError(
            f"{kind} '{hint}' argument must be a Sequence, not {type(x)}: give a list or tuple "
            f"with one entry per argument of the function, e.g. [x]"
        )
    return tuple(x)


def _default_argnums(argnums: Any) -> Any:
    # Catalyst's default, as grad's: the first argument (a single int: its vjp is not a tuple)
    return 0 if argnums is None else argnums


# compiled products for calls outside qjit: (kind, id(f), options, layout) -> (f, compiled)
_COMPILED: dict[tuple, tuple[Callable, Any]] = {}


def _arrayify(x: Any) -> Any:
    """Lists of plain numbers as arrays (qjit's reading of them), other containers kept."""
    if is_leaf(x) and isinstance(x, list | tuple):
        return np.asarray(x)
    if isinstance(x, tuple | list):
        return type(x)(_arrayify(v) for v in x)
    if isinstance(x, dict):
        return {k: _arrayify(v) for k, v in x.items()}
    return x


def _outside_qjit(kind: str, f: Callable, params: tuple, vectors: Any, options: dict) -> Any:
    """`kind` ("jvp"/"vjp") of `f` called outside qjit: compiled on the fly, once per
    function, options and argument layout (qjit then keeps one executable per signature).

    Catalyst runs jax.jvp / jax.vjp here; cofactor compiles the same product it would
    compile inside qjit. Each parameter and, for a list/tuple of vectors, each vector
    (tangent per argument, cotangent per result, as Catalyst reads them) is its own
    argument of the compiled function, so a tuple of numbers is never read as one array.
    """
    container = type(vectors) if isinstance(vectors, tuple | list) else None
    vecs = list(vectors) if container is not None else [vectors]
    flat = [_arrayify(p) for p in params] + [_arrayify(v) for v in vecs]
    n = len(params)
    for k, v in enumerate(vecs):
        # checked here too: qjit would promote an int vector to the float one compiled before
        for leaf in pytree.flatten(v, is_leaf=is_leaf)[0]:
            if not isinstance(leaf, Tracer) and np.asarray(leaf).dtype.kind in "biu":
                what = "tangent" if kind == "jvp" else "cotangent"
                pairs = "params and tangents" if kind == "jvp" else "output params and cotangents"
                raise CompileTypeError(
                    f"{kind}({fn_name(f)}): function {pairs} arguments to {kind} do not match; "
                    f"{what} {k} has dtype {np.asarray(leaf).dtype}, "
                    f"but {what}s must have the dtype of the values they pair with (float): "
                    "pass 1.0 rather than 1"
                )
    try:
        key = (kind, id(f), repr(sorted(options.items())), n, container)
        hash(key)
    except TypeError:
        key = None
    hit = _COMPILED.get(key) if key is not None else None
    if hit is None or hit[0] is not f:
        from cofactor.jit import qjit

        product = jvp if kind == "jvp" else vjp

        def run(*args: Any) -> Any:
            vs = container(args[n:]) if container is not None else args[n]
            return product(f, tuple(args[:n]), vs, **options)

        run.__name__ = f"{kind}_{fn_name(f)}"
        hit = (f, qjit(run))
        if key is not None:
            _COMPILED[key] = hit
    return hit[1](*flat)


def _is_numeric(x: Any) -> bool:
    try:
        as_tracer(x)
    except (CompileError, TypeError, ValueError):
        return False
    return True


def _shape_of(x: Any) -> tuple[int, ...]:
    return x.shape if isinstance(x, Tracer) else tuple(np.shape(np.asarray(x, dtype=object)))


def _split_cotangents(cotangents: Any, specs: list[BufferSpec]) -> list[Any]:
    """The user's cotangents, one per result: a bare array (or nested list of numbers of the
    result's shape) for a single result, else a list/tuple whose leaves are the cotangents,
    as Catalyst flattens them."""
    if not isinstance(cotangents, tuple | list):
        return [cotangents]
    if len(specs) == 1 and is_leaf(cotangents) and _shape_of(cotangents) == specs[0].shape:
        return [cotangents]
    cts: list[Any] = []
    for c in cotangents:
        cts += pytree.flatten(c, is_leaf=is_leaf)[0]
    return cts


def vjp(
    f: Callable,
    params: Any,
    cotangents: Any,
    *,
    method: Any = None,
    h: Any = None,
    argnums: Any = None,
) -> tuple[Any, Any]:
    """`(f(*params), vjps)`: the vector-Jacobian products of `f` at `params` with
    `cotangents` (one per result of `f`, in order), one per differentiated argument
    (argnums: default 0, the first argument, as in Catalyst; an int gives one vjp, a list a
    tuple)."""
    params = _sequence(params, "vjp", "params")
    if not context.is_tracing():
        options = {"method": method, "h": h, "argnums": argnums}
        return _outside_qjit("vjp", f, params, cotangents, options)
    what = f"vjp({fn_name(f)})"
    req = _Request(f, params, _default_argnums(argnums), method, h, what)
    cts = _split_cotangents(cotangents, req.out_specs)
    if len(cts) != len(req.out_specs):
        # Catalyst: TypeError "number of cotangent and number of function output parameters..."
        raise CompileTypeError(
            f"{what}: number of cotangent and number of function output parameters in vjp do "
            f"not match (the number of cotangents and of results): got {len(cts)} "
            f"cotangent(s) for {len(req.out_specs)} result(s) of {req.name}; pass one "
            "cotangent per result"
        )
    for k, (ct, spec) in enumerate(zip(cts, req.out_specs, strict=True)):
        # Catalyst's order: the number, then dtypes, then shapes
        dtype = as_tracer(ct).dtype if _is_numeric(ct) else type(ct).__name__
        if not isinstance(dtype, np.dtype) or dtype.kind != "f":
            raise CompileTypeError(
                f"{what}: function output params and cotangents arguments to vjp do not match; "
                f"cotangent {k} has dtype {dtype}, but result {k} has dtype "
                f"{spec.dtype}; cotangents must have the same dtype "
                "(pass 1.0 rather than 1)"
            )
        shape = _shape_of(ct)
        if tuple(shape) != spec.shape:
            raise CompileValueError(
                f"{what}: vjp called with different function output params and cotangent "
                f"shapes: cotangent {k} has shape {tuple(shape)}, but result {k} has shape "
                f"{spec.shape}"
            )
    if req.method == "fd":
        outs, blocks = req.jacobian_blocks()
        flat_ct = np.concatenate([cast_tracer(as_tracer(c), FLOAT).elems.reshape(-1) for c in cts])
        vjps = []
        for blk, i in zip(blocks, req.diff, strict=True):
            prod = np.tensordot(flat_ct, blk.elems, axes=1)
            vjps.append(Tracer(np.asarray(prod, dtype=object).reshape(req.in_spec(i).shape), FLOAT))
    else:
        outs, vjps = req.enzyme_vjp(cts)
    return req.outputs(outs), req.per_arg(vjps)


def jvp(
    f: Callable,
    params: Any,
    tangents: Any,
    *,
    method: Any = None,
    h: Any = None,
    argnums: Any = None,
) -> tuple[Any, Any]:
    """`(f(*params), jvps)`: the Jacobian-vector products of `f` at `params` with
    `tangents` (one per differentiated argument; argnums: default 0, the first argument, as
    in Catalyst), one per result."""
    params = _sequence(params, "jvp", "params")
    tangents = _sequence(tangents, "jvp", "tangents")
    if not context.is_tracing():
        options = {"method": method, "h": h, "argnums": argnums}
        return _outside_qjit("jvp", f, params, tangents, options)
    what = f"jvp({fn_name(f)})"
    req = _Request(f, params, _default_argnums(argnums), method, h, what)
    tans = _params(tangents)
    if len(tans) != len(req.argnums):
        # Catalyst: TypeError "number of tangents and number of differentiable parameters..."
        raise CompileTypeError(
            f"{what}: number of tangents and number of differentiable parameters in jvp do not "
            "match: "
            f"got {len(tans)} tangent(s) for {len(req.argnums)} differentiated argument(s) "
            f"(argnums={req.argnums}); pass one tangent per differentiated argument"
        )
    pairs: list[tuple[int, Tracer]] = []  # (input leaf, its tangent)
    for n, t in zip(req.argnums, tans, strict=True):
        leaves, _ = pytree.flatten(t, is_leaf=is_leaf)
        if len(leaves) != len(req.arg_ranges[n]):
            raise CompileTypeError(
                f"{what}: the tangent of argument {n} has {len(leaves)} array(s), but the "
                f"argument has {len(req.arg_ranges[n])}; give it the argument's structure"
            )
        for i, leaf in zip(req.arg_ranges[n], leaves, strict=True):
            tt = as_tracer(leaf)
            if tt.dtype != FLOAT:
                raise CompileTypeError(
                    f"{what}: function params and tangents arguments to jvp do not match; "
                    f"a tangent of argument {n} has dtype {tt.dtype}, but the argument "
                    f"has dtype {req.in_spec(i).dtype}; tangents must have the same dtype "
                    "(pass 1.0 rather than 1)"
                )
            if tt.shape != req.in_spec(i).shape:
                raise CompileValueError(
                    f"{what}: jvp called with different function params and tangent shapes: "
                    f"a tangent of argument {n} has shape {tt.shape}, but the argument "
                    f"has shape {req.in_spec(i).shape}"
                )
            pairs.append((i, tt))
    outs, blocks = req.jacobian_blocks()
    position = {leaf: k for k, leaf in enumerate(req.diff)}
    rows = sum(req.out_sizes)
    total = np.empty((rows,), dtype=object)
    first = True
    for i, tt in pairs:
        blk = blocks[position[i]]
        n = int(np.prod(tt.shape, dtype=np.int64))
        prod = np.dot(blk.elems.reshape(rows, n), tt.elems.reshape(n))
        total = prod if first else total + prod
        first = False
    if first:  # nothing differentiated
        total = np.array([const_scalar(0.0, FLOAT) for _ in range(rows)], dtype=object)
    jvps, start = [], 0
    for spec, n in zip(req.out_specs, req.out_sizes, strict=True):
        part = np.asarray(total[start : start + n], dtype=object).reshape(spec.shape)
        jvps.append(Tracer(part, FLOAT))
        start += n
    return req.outputs(outs), req.outputs(jvps)


__all__ = ["jvp", "vjp"]
