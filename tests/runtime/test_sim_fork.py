"""An unseeded device drew its random stream from the system's entropy once and let it run
on, so after a fork the parent and every child sampled the same outcomes (workers of a
fork-based multiprocessing pool all returned identical "random" samples). A forked child
now draws a fresh stream; a seeded device still repeats its samples everywhere."""

from __future__ import annotations

import os

import numpy as np


def samples_in_children(rt, seed: int, children: int = 3) -> list[bytes]:
    """Each child: acquire with `seed`, Hadamard on both wires, 64 samples, sent back."""
    out = []
    for _ in range(children):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never return into pytest
            try:
                os.close(read)
                rt.acquire(2, shots=64, seed=seed)
                rt.gate("Hadamard", wires=[0])
                rt.gate("Hadamard", wires=[1])
                os.write(write, rt.sample([0, 1]).astype(np.int8).tobytes())
            finally:
                os._exit(0)
        os.close(write)
        data = b""
        while chunk := os.read(read, 4096):
            data += chunk
        os.close(read)
        os.waitpid(pid, 0)
        out.append(data)
    return out


def test_unseeded_samples_differ_between_forked_children(rt):
    rt.acquire(2, shots=64, seed=-1)  # the parent's device draws its entropy stream
    rt.gate("Hadamard", wires=[0])
    rt.sample([0, 1])
    children = samples_in_children(rt, seed=-1)
    assert all(len(c) == 128 for c in children)
    assert len(set(children)) == len(children)  # 2**-128 chance of a false failure


def test_seeded_samples_repeat_in_forked_children(rt):
    rt.acquire(2, shots=64, seed=5)
    children = samples_in_children(rt, seed=5)
    assert len(set(children)) == 1
