"""The Jacobian of recorded measurements (what compiled QNode gradients ask for): the
adjoint method and the parameter-shift rules against each other and finite differences."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from test_adjoint import _circuit, _observables


def _record(rt, rng, n=5):
    """A random circuit of every parametrised gate (adjoint, controls), then expvals and
    probs measured while recording; returns (params, number of results)."""
    rt.acquire(n)
    rt.tape_start()
    params = _circuit(rt, rng, n)
    obs = _observables(rt, rng)
    for h in obs:
        rt.expval(h)
    rt.probs([3, 0])
    rt.tape_stop()
    return params, len(obs) + 4, obs


def _jacobian(rt, fn: str, rows: int, cols: int) -> np.ndarray:
    jac = np.zeros((rows, cols))
    getattr(rt.lib, fn)(jac.ctypes.data_as(ctypes.POINTER(ctypes.c_double)), rows, cols)
    rt.check()
    return jac


def test_adjoint_and_parameter_shift_agree_on_every_gate(rt, rng):
    params, rows, obs = _record(rt, rng)
    adjoint = _jacobian(rt, "cf_rt_jacobian_recorded", rows, len(params))
    shift = _jacobian(rt, "cf_rt_jacobian_recorded_shift", rows, len(params))
    np.testing.assert_allclose(shift, adjoint, atol=1e-10)
    # the expval rows are the plain adjoint Jacobian of those observables
    np.testing.assert_allclose(adjoint[: len(obs)], rt.adjoint_jacobian(obs), atol=1e-12)
    assert np.max(np.abs(adjoint)) > 0.1


def test_probability_rows_match_finite_differences(rt, rng):
    params, rows, obs = _record(rt, rng)
    jac = _jacobian(rt, "cf_rt_jacobian_recorded", rows, len(params))
    h = 1e-6
    for j in range(len(params)):
        rt.replay_shifted(j, h)
        plus = rt.probs([3, 0])
        rt.replay_shifted(j, -h)
        minus = rt.probs([3, 0])
        np.testing.assert_allclose(jac[len(obs) :, j], (plus - minus) / (2 * h), atol=1e-7)


def test_parameter_shift_with_shots_is_an_unbiased_estimate(rt):
    # RX(a) RY(b) on one wire: <Z> = cos a cos b; each shifted expval is a mean of `shots`
    # +-1 samples, so each Jacobian entry (two-term rule: half a difference of two such
    # means) has a standard deviation below 1/sqrt(2 shots); 6 sigma fails by chance with
    # probability ~1e-9.
    shots, a, b = 20000, 0.7, -0.4
    rt.acquire(1, shots=shots, seed=11)
    rt.tape_start()
    rt.gate("RX", [a], [0])
    rt.gate("RY", [b], [0])
    rt.expval(rt.named("PauliZ", 0))
    rt.tape_stop()
    jac = _jacobian(rt, "cf_rt_jacobian_recorded_shift", 1, 2)
    exact = [-np.sin(a) * np.cos(b), -np.cos(a) * np.sin(b)]
    assert np.all(np.abs(jac[0] - exact) < 6 / np.sqrt(2 * shots))
    assert not np.allclose(jac[0], exact, atol=1e-12)  # really sampled


@pytest.mark.parametrize("fn", ["cf_rt_jacobian_recorded", "cf_rt_jacobian_recorded_shift"])
def test_misuse_is_reported(rt, fn):
    rt.acquire(1)
    rt.tape_start()
    rt.gate("RX", [0.3], [0])
    rt.var(rt.named("PauliZ", 0))
    rt.tape_stop()
    jac = np.zeros((1, 1))
    getattr(rt.lib, fn)(jac.ctypes.data_as(ctypes.POINTER(ctypes.c_double)), 1, 1)
    code, message = rt.error()
    rt.clear()
    assert code != 0 and "var was measured while recording" in message


@pytest.mark.parametrize("fn", ["cf_rt_jacobian_recorded", "cf_rt_jacobian_recorded_shift"])
def test_hamiltonian_coefficients_are_parameters_after_the_gates(rt, fn):
    """cf_rt_obs_hamiltonian_diff while recording: its coefficients are the next tape
    parameters, and d<sum_k c_k O_k>/dc_k = <O_k> in the row of each expval of it."""
    a, b, c = 0.7, -0.4, [0.3, -1.1]
    rt.acquire(2)
    rt.tape_start()
    rt.gate("RX", [a], [0])
    rt.gate("RY", [b], [1])
    z0, x1 = rt.named("PauliZ", 0), rt.named("PauliX", 1)
    h = rt.hamiltonian(c, [z0, x1], diff=True)
    assert rt.num_params() == 4
    rt.expval(rt.named("PauliZ", 1))  # a row without coefficient entries
    value = rt.expval(h)
    rt.tape_stop()
    np.testing.assert_allclose(value, c[0] * np.cos(a) + c[1] * np.sin(b), atol=1e-12)
    jac = _jacobian(rt, fn, 2, 4)
    expected = [
        [0.0, -np.sin(b), 0.0, 0.0],
        [-c[0] * np.sin(a), c[1] * np.cos(b), np.cos(a), np.sin(b)],
    ]
    np.testing.assert_allclose(jac, expected, atol=1e-12)


def test_hamiltonian_coefficients_outside_a_recording_are_constants(rt):
    rt.acquire(1)
    h = rt.hamiltonian([0.5], [rt.named("PauliZ", 0)], diff=True)
    np.testing.assert_allclose(rt.expval(h), 0.5, atol=1e-12)
    rt.tape_start()
    assert rt.num_params() == 0
    rt.tape_stop()
