"""qjit behaviour: compilation cache, promotion, static arguments, AOT, errors, stages."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

import cofactor
from cofactor import CompileError, ShapeDtype, qjit

pytestmark = pytest.mark.needs_toolchain


def test_caching_and_promotion_follow_catalyst():
    @qjit
    def f(x, y):
        return x**2 + y

    assert f(0.4, 1) == pytest.approx(1.16)  # traces (float, int)
    assert f.compile_count == 1
    assert f(0.2, 3) == pytest.approx(3.04)  # same signature
    assert f.compile_count == 1
    assert f(0.15, 0.65) == pytest.approx(0.6725)  # float cannot become int: recompiles
    assert f.compile_count == 2
    assert f(2, 4.65) == pytest.approx(8.65)  # int promotes to float: reuses
    assert f.compile_count == 2
    np.testing.assert_allclose(f(np.array([0.2]), np.array([0.6])), [0.64])  # new shape
    assert f.compile_count == 3  # (recompiled)
    with pytest.raises(TypeError, match=r"\*\*"):
        f([0.2], [0.6])  # a list is a list, as in Python and Catalyst: list ** int
    np.testing.assert_allclose(f(np.array([0.5]), np.array([1])), [1.25])  # promotes
    assert f.compile_count == 3


def test_bool_gets_its_own_compilation():
    """A binary traced for ints would compute bool arithmetic as ints (~True == -2)."""
    f = qjit(lambda n: ~n)
    assert f(3) == -4
    assert f(True) == np.invert(True)  # False, as numpy: not the int binary's -2
    assert f.compile_count == 2
    g = qjit(lambda x: x + x)
    np.testing.assert_array_equal(g(np.array([1, 0])), [2, 0])
    np.testing.assert_array_equal(g(np.array([True, False])), [True, False])
    assert g.compile_count == 2


def test_aot_from_annotations():
    @qjit
    def g(x: float):
        return 2 * x

    assert g.mlir is not None and g.compile_count == 1  # compiled at decoration
    assert g(3) == 6.0
    assert g.compile_count == 1
    with pytest.warns(UserWarning, match="did not match the declared signature"):
        np.testing.assert_allclose(g(np.array([1.0, 2.0])), [2.0, 4.0])
    assert g.compile_count == 2


def test_aot_with_array_annotations():
    @qjit
    def h(v: ShapeDtype((3,), np.float64), n: int):
        return v * n

    assert h.compile_count == 1
    np.testing.assert_allclose(h(np.ones(3), 2), [2.0, 2.0, 2.0])
    assert h.compile_count == 1


@dataclass(frozen=True)
class C:
    value: int


def test_static_argnums():
    @qjit(static_argnums=1)
    def f(x: int, y: C):
        return x + y.value

    assert f(1, C(5)) == 6
    assert f.compile_count == 1
    assert f(1, C(7)) == 8
    assert f.compile_count == 2
    assert f(2, C(5)) == 7
    assert f.compile_count == 2


def test_static_argnums_used_for_python_control_flow():
    @qjit(static_argnums=(1,))
    def f(x, n):
        for _ in range(n):
            x = x * 2
        return x

    assert f(1.0, 3) == 8.0
    assert f(1.0, 4) == 16.0


@pytest.mark.parametrize(
    "argnums, error, match",
    [
        (2, CompileError, "beyond the valid range"),
        (-2, CompileError, "beyond the valid range"),
        ("0", TypeError, "static_argnums"),
        (1.0, TypeError, "static_argnums"),
        ([1.0], TypeError, "static_argnums"),
    ],
)
def test_static_argnums_out_of_range(argnums, error, match):
    # as Catalyst: an error when the function is called (every call), not where it is
    # decorated, so that a module defining such a function imports
    f = qjit(lambda x: x, static_argnums=argnums)
    for _ in range(2):
        with pytest.raises(error, match=match):
            f(1.0)
    assert f.compile_count == 0


def test_unhashable_static_argument():
    f = qjit(lambda x, y: x, static_argnums=1)
    with pytest.raises(CompileError, match="hashable"):
        f(1.0, [1, 2])


def test_python_if_on_traced_value_points_to_cond():
    @qjit
    def f(x):
        if x > 1:
            return x
        return -x

    with pytest.raises(CompileError, match="cofactor.cond"):
        f(2.0)


def test_python_while_on_traced_value_points_to_while_loop():
    @qjit
    def f(x):
        while x < 10:
            x = x * 2
        return x

    with pytest.raises(CompileError, match="cofactor.while_loop"):
        f(2.0)


def test_unsupported_numpy_function_is_named():
    f = qjit(lambda x: np.fft.fft(x))
    with pytest.raises(CompileError, match="fft"):
        f(np.ones(4))


def test_wrong_argument_type_says_what_is_expected():
    f = qjit(lambda x: x)
    with pytest.raises(CompileError, match="expected a number, a numpy array"):
        f("hello")
    with pytest.raises(CompileError, match="expected numbers"):
        f(np.array(["a"]))


def test_wrong_arity_is_a_type_error():
    f = qjit(lambda x, y: x + y)
    with pytest.raises(TypeError):
        f(1.0)


def test_keyword_arguments_and_defaults():
    @qjit
    def f(x, y=2.0):
        return x * y

    assert f(3.0) == 6.0
    assert f(x=3.0, y=3.0) == 9.0


def test_aot_failure_raises_at_decoration():
    """As Catalyst: a function that does not compile for the signature its annotations
    declare (or, without parameters, for its only one) is refused where it is decorated."""
    with pytest.raises(CompileError, match="cond"):

        @qjit
        def f(x: float):
            if x > 0:
                return x
            return -x

    g = qjit(lambda: np.sin(np.float64(0.5)))
    assert g.compile_count == 1  # compiled when decorated
    assert g() == np.sin(0.5) and g.compile_count == 1


def test_keep_intermediate_writes_stages(tmp_path, capsys):
    folder = tmp_path / "stages"
    f = qjit(lambda x: x + 1, keep_intermediate=folder)
    f(1.0)
    assert (folder / "module.mlir").read_text().strip()
    assert (folder / "module.ll").exists()
    assert str(folder) in capsys.readouterr().out


def test_debug_print_outside_qjit_is_print(capsys):
    cofactor.debug.print("hello", 1)
    assert capsys.readouterr().out == "hello 1\n"


def test_debug_print_prints_at_run_time(capsys):
    # Python's print, called back from the program (Catalyst's debug.print): sys.stdout,
    # Python's and numpy's formatting
    @qjit
    def f(x, v, n, z):
        cofactor.debug.print("x =", x, "v:", v, "big", n > 1, "100%")
        cofactor.debug.print(z, n, sep=" | ")
        return x

    f(0.5, np.array([1.0, 2.5]), 3, 1 - 2j)
    first = capsys.readouterr().out
    f(0.25, np.array([0.0, -1.0]), 0, 2j)
    second = capsys.readouterr().out
    assert first == "x = 0.5 v: [1.  2.5] big True 100%\n(1-2j) | 3\n"
    assert second == "x = 0.25 v: [ 0. -1.] big False 100%\n2j | 0\n"
    assert f.compile_count == 1


def test_debug_print_format_string(capsys):
    # Catalyst's documented form: a format string formatted with the other arguments at
    # run time (before: the braces were printed as they are, the values appended)
    @qjit
    def f(a, b, c):
        cofactor.debug.print("c={c} b={b} a={a}", a=a, b=b, c=c)
        cofactor.debug.print("x = {0:.2f}, {1}", a, np.array([1.0, 2.0]) * b)
        cofactor.debug.print("literal {{braces}} {}", "static")
        return a

    f(0.543, 2, 3.0)
    assert capsys.readouterr().out == (
        "c=3.0 b=2 a=0.543\nx = 0.54, [2. 4.]\nliteral {braces} static\n"
    )
    cofactor.debug.print("x = {0:.1f}", 1 / 3)  # outside qjit: the same formatting
    assert capsys.readouterr().out == "x = 0.3\n"


def test_debug_print_keywords_need_a_format_string():
    @qjit
    def f(x):
        cofactor.debug.print("x", x=x)
        return x

    with pytest.raises(TypeError, match="not a format string"):
        f(1.0)


def test_outputs_are_fresh_arrays():
    f = qjit(lambda x: x * 2)
    a = f(np.ones(2))
    b = f(np.ones(2) * 3)
    np.testing.assert_allclose(a, [2.0, 2.0])
    np.testing.assert_allclose(b, [6.0, 6.0])


def test_pennylane_qjit_with_compiler_cofactor():
    import pennylane as qml

    @qml.qjit(compiler="cofactor")
    def f(x):
        return x * 2

    assert isinstance(f, cofactor.QJIT)
    assert f(2.0) == 4.0
