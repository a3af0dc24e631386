"""The GPU sample's geometry (``PeerSegments.probe``) and the input copy: checked without a GPU."""

from __future__ import annotations

import random
import time

import pytest
import torch

from cuda_gym.errors import ProtocolError
from cuda_gym.judge.driver import PRELUDE_SLACK_SWITCHES, copy_bytes, dense_span, prelude_bound
from cuda_gym.judge.messages import TensorRef
from cuda_gym.judge.transport import PROBE_ROWS, PROBE_WIDTH, PeerSegments, contiguous_strides, span_bytes


def _peer(nbytes: int) -> tuple[PeerSegments, torch.Tensor]:
    peer = PeerSegments.__new__(PeerSegments)  # no libcuda needed for the geometry
    flat = torch.empty(nbytes, dtype=torch.uint8)
    peer.mapped = {7: flat}
    return peer, flat


@pytest.mark.parametrize("shape", [(3,), (64, 64), (1000, 333), (4, 1, 4096)])
def test_probe_stays_inside_the_output_and_moves_with_the_secret(shape: tuple[int, ...]) -> None:
    ref = TensorRef("float32", shape, contiguous_strides(shape), 5, 7, 256)
    start, nbytes = span_bytes(ref)
    peer, flat = _peer(256 + start + nbytes + 64)
    lo, hi = flat.data_ptr() + 256 + start, flat.data_ptr() + 256 + start + nbytes
    rng = random.Random(1)
    addresses = set()
    for _ in range(50):
        p = peer.probe(ref, rng.getrandbits(62), rng.getrandbits(62))
        assert p.address >= lo and p.address + (p.rows - 1) * p.pitch + p.width <= hi
        assert p.pitch >= p.width and p.rows in (1, PROBE_ROWS)
        if nbytes > PROBE_ROWS * PROBE_WIDTH:
            # spread over the whole output: the last piece lies in its last half
            assert p.width == PROBE_WIDTH and (p.rows - 1) * p.pitch >= (nbytes - PROBE_WIDTH) // 2 - PROBE_WIDTH * PROBE_ROWS
        else:
            assert (p.address, p.nbytes) == (lo, nbytes)  # small outputs are read whole
        addresses.add(p.address)
    assert len(addresses) > 1 or nbytes <= PROBE_ROWS * PROBE_WIDTH


def test_probe_refuses_a_reference_outside_its_segment() -> None:
    peer, _ = _peer(1024)
    with pytest.raises(ProtocolError, match="past its segment"):
        peer.probe(TensorRef("float32", (300,), (1,), 0, 7, 0), 1, 2)
    with pytest.raises(ProtocolError, match="never shared"):
        peer.probe(TensorRef("float32", (3,), (1,), 0, 8, 0), 1, 2)


def test_an_empty_output_needs_no_segment_but_a_full_one_does() -> None:
    """A zero-size output has no memory to share: the server names segment -1, the driver reads nothing."""
    peer, _ = _peer(1024)
    peer.device = torch.device("cpu")
    empty = TensorRef("float32", (0, 3), (3, 1), 0, -1, 0)
    assert peer.probe(empty, 1, 2).nbytes == 0
    assert peer.tensor(empty).shape == (0, 3)
    with pytest.raises(ProtocolError, match="never shared"):
        peer.tensor(TensorRef("float32", (1, 3), (3, 1), 0, -1, 0))


@pytest.mark.parametrize(
    "src",
    [
        torch.tensor([0.0, -0.0, float("nan"), float("-inf"), 1e-45]),  # signed zeros, NaN payloads, denormals
        torch.tensor([True, False, True]),
        torch.randn(3, 5, dtype=torch.complex64),
        torch.arange(7, dtype=torch.uint8),  # a byte count that is not a multiple of 4
        torch.randn(6, 4).t(),  # dense but permuted: its storage span copied as flat bytes
        torch.randn(3, 4, 5, dtype=torch.float16).permute(2, 0, 1),
        torch.randn(40)[7:31].view(4, 6),  # a storage offset
        torch.randn(8, 8)[::2, :3],  # not dense: copied elementwise
        torch.randn(1, 5).expand(3, 5),  # a zero stride: copied elementwise into a dense buffer
        torch.empty(0, 3),
    ],
    ids=["float-bits", "bool", "complex", "odd-bytes", "transposed", "permuted", "offset", "strided", "expanded", "empty"],
)
def test_an_input_reaches_its_shared_buffer_bit_for_bit(src: torch.Tensor) -> None:
    dst = torch.empty_like(src, memory_format=torch.preserve_format).zero_()  # the buffer's stale bytes
    copy_bytes(dst, src)()
    assert dst.stride() == src.stride() or not dense_span(src)
    assert torch.equal(dst.contiguous().view(torch.uint8), src.contiguous().view(torch.uint8))


@pytest.mark.parametrize(
    ("t", "dense"),
    [
        (torch.empty(4, 5), True),
        (torch.empty(4, 5).t(), True),
        (torch.empty(2, 3, 4).permute(1, 2, 0), True),
        (torch.empty(4, 1, 5)[:, :, :], True),
        (torch.empty(8, 8)[::2], False),
        (torch.empty(8, 8)[:, :3], False),
        (torch.empty(1, 5).expand(3, 5), False),
    ],
)
def test_dense_span_is_a_gap_free_storage_span(t: torch.Tensor, dense: bool) -> None:
    assert dense_span(t) is dense


@pytest.mark.parametrize(
    ("preludes", "bound"),
    [
        ([0.12, 0.131, 0.14], 0.131 * 1.3 + 0.02),  # a short task's prelude (H200): the relative slack
        ([1.08, 1.09, 1.10], 1.09 + 0.29 / 3),  # a memory-bound one: capped at a third of two switches
    ],
)
def test_the_prelude_slack_stays_below_two_context_switches(preludes: list[float], bound: float) -> None:
    """Work of the server's context inside the driver's prelude costs two context switches (the no-ops'
    release to done, 0.29 ms on the H200): the slack left uncounted must stay well below that."""
    noop_work = [0.28, 0.29, 0.30]
    got = prelude_bound(preludes, noop_work)
    assert got == pytest.approx(bound)
    assert got - sorted(preludes)[1] <= 0.29 * PRELUDE_SLACK_SWITCHES + 1e-12


class _FailingMapDriver:
    """The few CUDA driver calls ``PeerSegments._map`` makes, with ``cuMemMap`` refusing (a peer that
    announced a segment larger than it shared): no GPU is needed to see what is given back."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def cuMemImportFromShareableHandle(self, handle, fd, kind) -> int:  # noqa: N802 - the driver API's names
        handle._obj.value = 42
        self.calls.append("import")
        return 0

    def cuMemAddressReserve(self, ptr, size, align, addr, flags) -> int:  # noqa: N802
        ptr._obj.value = 1 << 40
        self.calls.append("reserve")
        return 0

    def cuMemMap(self, *args) -> int:  # noqa: N802
        self.calls.append("map")
        return 1  # CUDA_ERROR_INVALID_VALUE

    def cuMemAddressFree(self, ptr, size) -> int:  # noqa: N802
        self.calls.append("free")
        return 0

    def cuMemRelease(self, handle) -> int:  # noqa: N802
        self.calls.append(f"release {handle.value}")
        return 0


def test_a_segment_that_cannot_be_mapped_gives_back_what_was_taken() -> None:
    from cuda_gym.errors import JudgeError

    peer, _ = _peer(16)
    peer.cu, peer.index, peer._maps = _FailingMapDriver(), 0, []
    with pytest.raises(JudgeError, match="cuMemMap"):
        peer._map(5, 1 << 21)
    assert peer.cu.calls == ["import", "reserve", "map", "free", "release 42"] and peer._maps == []


def test_a_refused_segment_closes_every_descriptor_of_its_answer() -> None:
    """An answer whose first segment is refused still closes the fds of the others (each may keep the
    peer's GPU memory alive in the long-lived driver)."""
    import os

    from cuda_gym.judge.messages import Segment

    peer, _ = _peer(16)
    fds = [os.memfd_create(f"seg{i}") for i in range(4)]
    with pytest.raises(ProtocolError, match="bad size"):
        peer.attach([Segment(9000, 0), *(Segment(9001 + i, 4096) for i in range(3))], fds)
    until = time.monotonic() + 5.0  # closed on the closer's thread (fd_closer.close_fds)
    while any(_is_open(fd) for fd in fds) and time.monotonic() < until:
        time.sleep(0.01)
    assert not any(_is_open(fd) for fd in fds)


def _is_open(fd: int) -> bool:
    import os

    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


@pytest.mark.gpu
@pytest.mark.parametrize(("setting", "eager"), [("EAGER", True), ("LAZY", False)])
def test_the_driver_reads_how_this_process_loads_cuda_modules(setting: str, eager: bool) -> None:
    """``modules_load_eagerly`` reads what ``CUDA_MODULE_LOADING`` made of the process (a fresh one: the
    setting counts only before CUDA starts); a lazy driver's first gated window hung (H100, 2026-12-05)."""
    import os
    import subprocess
    import sys

    code = ("import torch; torch.zeros(1, device='cuda'); "
            "from cuda_gym.judge.transport import modules_load_eagerly as m; print(m())")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "CUDA_MODULE_LOADING": setting},
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-1] == str(eager)
