"""The runtime's ctypes binding declares each cf_rt_* function when it is first looked up."""

from __future__ import annotations

import ctypes

import pytest

from cofactor import runtime_lib, toolchain


@pytest.fixture(scope="module")
def runtime() -> runtime_lib.RuntimeLibrary:
    return runtime_lib.load_runtime(toolchain.find("runtime"))


def test_every_declared_function_is_in_the_runtime_with_its_signature(
    runtime: runtime_lib.RuntimeLibrary,
) -> None:
    for name, (restype, argtypes) in runtime_lib.SIGNATURES.items():
        fn = getattr(runtime, name)
        assert fn.restype is restype, name
        assert list(fn.argtypes) == list(argtypes), name
        assert getattr(runtime, name) is fn  # declared once, then kept


def test_a_function_looked_up_first_returns_its_declared_type(
    runtime: runtime_lib.RuntimeLibrary,
) -> None:
    fresh = runtime_lib.load_runtime(toolchain.find("runtime"))  # nothing looked up yet
    assert "cf_rt_error_code" not in vars(fresh)
    fresh.cf_rt_report_error(3, b"from the binding test")
    try:
        # int64 and char* results: wrong without the declaration (int, truncated pointer)
        assert fresh.cf_rt_error_code() == 3
        assert fresh.cf_rt_error_message() == b"from the binding test"
    finally:
        fresh.cf_rt_clear_error()
    assert runtime.cf_rt_error_code() == 0


def test_unknown_names_are_refused(runtime: runtime_lib.RuntimeLibrary) -> None:
    with pytest.raises(AttributeError, match="cf_rt_no_such_function"):
        runtime.cf_rt_no_such_function  # noqa: B018
    with pytest.raises(AttributeError):
        runtime.__wrapped__  # noqa: B018
    assert isinstance(runtime, ctypes.CDLL)


def test_libraries_share_one_function_pointer_class_and_call_like_cdll() -> None:
    libc = runtime_lib.Library("libc.so.6")
    libm = runtime_lib.Library("libm.so.6")
    plain = ctypes.CDLL("libc.so.6")
    assert type(libc["abs"]) is type(libm["cos"])  # no class made per library
    assert libc.abs(-7) == plain.abs(-7) == 7  # int result, C calling convention
    cos = libm.cos
    cos.restype, cos.argtypes = ctypes.c_double, [ctypes.c_double]
    assert cos(0.0) == 1.0
    assert libm.fabs.restype is ctypes.c_int  # a restype set on one pointer stays there
    with pytest.raises(AttributeError):
        libc["no_such_function_anywhere"]
    with pytest.raises(OSError):
        runtime_lib.Library("/nonexistent/libnothing.so")
