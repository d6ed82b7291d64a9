"""The runtime's part of issue 11: the index-error report compiled code calls (D2),
non-finite states under sampling (D9), QubitUnitary's tolerance and NaN check (D15), and a
device with no qubits (D3)."""

from __future__ import annotations

import numpy as np
import pytest

from cofactor.runtime_lib import CF_ERR_INDEX, CF_ERR_NOT_FINITE

INVALID = 1


def test_index_error_message_and_first_error_kept(rt):
    rt.lib.cf_rt_index_error(4, 0, 4)
    rt.lib.cf_rt_index_error(9, 1, 2)  # a later bad index (a loop going on) does not replace it
    rt.gate("Hadamard", wires=[0], check=False)  # nor does a later operation
    assert rt.error() == (CF_ERR_INDEX, "index 4 is out of bounds for axis 0 with size 4")
    with pytest.raises(IndexError, match="^index 4 is out of bounds for axis 0 with size 4$"):
        rt.check()
    assert rt.error()[0] == 0  # raising cleared the slot


def test_index_error_keeps_an_earlier_error(rt):
    rt.acquire(1)
    rt.gate("Hadamard", wires=[7], check=False)
    rt.lib.cf_rt_index_error(-5, 0, 3)
    assert rt.error()[0] == INVALID


def _nan_state(rt, shots):
    rt.acquire(1, shots=shots)
    rt.gate("RX", [float("nan")], [0])


@pytest.mark.parametrize("kind", ["PauliZ", "PauliX", "Identity"])
def test_sampled_expval_of_a_nan_state_is_nan(rt, kind):
    _nan_state(rt, 100)
    h = rt.named(kind, 0)
    if kind == "Identity":  # eigenvalue 1 everywhere: no sampling involved
        assert rt.expval(h) == 1.0
        return
    assert np.isnan(rt.expval(h))
    assert np.isnan(rt.var(h))


@pytest.mark.parametrize("what", ["sample", "counts", "measure"])
def test_sampling_a_nan_state_is_an_error(rt, what):
    _nan_state(rt, 100 if what != "measure" else 0)
    call = {"sample": rt.sample, "counts": rt.counts, "measure": lambda: rt.measure(0)}[what]
    with pytest.raises(ValueError, match="NaN or infinite amplitudes"):
        call()


def test_sampling_an_inf_state_is_an_error(rt):
    rt.acquire(1, shots=10)
    rt.gate("RY", [float("inf")], [0])
    with pytest.raises(ValueError, match="NaN or infinite"):
        rt.counts()


def test_unitary_tolerance_is_pennylanes(rt):
    rt.acquire(1)
    s = 0.70710678  # |U U^dagger - I| = 1e-8
    rt.unitary([[s, s], [s, -s]], [0])
    e = 5e-7  # off-diagonal error within atol = 1e-6
    rt.unitary([[1, e], [0, 1]], [0])
    with pytest.raises(Exception, match="not unitary"):
        rt.unitary([[1, 3e-6], [0, 1]], [0])
    with pytest.raises(Exception, match="not unitary"):
        rt.unitary([[1 + 1e-4, 0], [0, 1]], [0])


@pytest.mark.parametrize("bad", [np.nan, np.inf, complex(0, np.nan)])
def test_unitary_rejects_non_finite_entries(rt, bad):
    rt.acquire(2)
    m = np.eye(4, dtype=complex)
    m[2, 3] = bad
    rt.unitary(m, [0, 1], check=False)
    code, message = rt.error()
    assert code == CF_ERR_NOT_FINITE
    assert message == (
        "cf_rt_unitary: QubitUnitary: the matrix has a NaN or infinite entry at (2, 3)"
    )


def test_zero_qubit_device(rt):
    rt.acquire(0)
    rt.gate("GlobalPhase", [0.3], [])
    np.testing.assert_allclose(rt.state(), [np.exp(-0.3j)], atol=1e-15)
    np.testing.assert_allclose(rt.probs(), [1.0])
