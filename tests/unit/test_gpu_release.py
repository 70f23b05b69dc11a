"""Waiting for a stopped server's GPU memory, against a fake NVML (no GPU here; the real
pynvml path is pending a test on hardware, see docs/reliability.md)."""

from __future__ import annotations

import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from harness.errors import GpuMemoryHeld
from harness.server import gpu, procs

real_nvml = gpu._nvml


class FakeNvml:
    """pynvml's calls that harness.server.gpu makes; `holders` is what each poll reports."""

    def __init__(self, polls: list[list[tuple[int, int]]]):
        self.polls = polls  # per poll: (pid, bytes) pairs on GPU 0; the last one repeats
        self.calls = 0

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetCount(self):
        return 1

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        poll = self.polls[min(self.calls, len(self.polls) - 1)]
        self.calls += 1
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in poll]


def test_waits_until_the_snapshot_pids_let_go():
    nvml = FakeNvml([[(101, 2**30), (999, 2**30)], [(101, 2**29), (999, 2**30)], [(999, 2**30)]])
    held = gpu.wait_gpu_released({100, 101}, deadline_s=30, interval_s=0.01, module=nvml)
    assert held == []  # pid 999 belongs to someone else: not waited for
    assert nvml.calls == 3


def test_returns_the_holders_at_the_deadline():
    nvml = FakeNvml([[(101, 3 * 2**30)]])
    held = gpu.wait_gpu_released({101}, deadline_s=0.2, interval_s=0.05, module=nvml)
    assert [(h.pid, h.used_mib) for h in held] == [(101, 3072.0)]


def test_without_nvml_it_checks_nothing_and_says_so_once(monkeypatch, caplog):
    class Broken(FakeNvml):
        def nvmlInit(self):
            raise RuntimeError("NVML Shared Library Not Found")

    monkeypatch.setattr(gpu, "_said_no_nvml", False)
    caplog.set_level("INFO", logger="harness.server.gpu")
    assert gpu.wait_gpu_released({1}, 5, module=Broken([])) is None
    assert gpu.wait_gpu_released({1}, 5, module=Broken([])) is None
    assert caplog.text.count("NVML is unavailable") == 1


def test_a_stop_whose_memory_stays_held_refuses_the_next_launch(monkeypatch, tmp_path):
    """Server.stop snapshots the tree before the kill; memory still held at the deadline makes
    the next start raise GpuMemoryHeld before anything is launched."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )
    tree = procs.process_tree(proc.pid)
    assert tree == {proc.pid}
    nvml = FakeNvml([[(proc.pid, 2**30)]])
    monkeypatch.setattr(gpu, "_nvml", lambda module=None: real_nvml(nvml))
    proc.kill()
    proc.wait()
    started = time.monotonic()
    gpu.await_gpu_release(tree, deadline_s=0.3)
    assert time.monotonic() - started >= 0.3
    with pytest.raises(GpuMemoryHeld, match=f"pid {proc.pid}"):
        gpu.check_gpu_released()
    nvml.polls = [[]]  # the driver let go: the next launch may go ahead
    gpu.check_gpu_released()
    assert gpu._UNRELEASED == {}


def test_held_memory_is_waited_for_once_more_and_its_holders_named(monkeypatch, caplog):
    """Memory held at the deadline: the holders are logged (pid, command line, MiB, GPU) and
    waited for once more, as long again; memory released during that second wait lets the next
    launch go ahead, and the release time is returned."""
    monkeypatch.setattr(gpu, "_UNRELEASED", {})
    nvml = FakeNvml([[(4242, 2 * 2**30)], []])  # deadline 0: one poll per wait
    monkeypatch.setattr(gpu, "_nvml", lambda module=None: real_nvml(nvml))
    caplog.set_level("WARNING", logger="harness.server.gpu")
    waited = gpu.await_gpu_release({4242}, 0, {4242: "python -m sglang.launch_server --tp 8"})
    assert "pid 4242 (python -m sglang.launch_server --tp 8; 2048 MiB on GPU 0)" in caplog.text
    assert "waiting 0 s more" in caplog.text
    assert nvml.calls == 2  # it polled again after the first deadline, and saw the release
    assert waited is not None
    gpu.check_gpu_released()  # released during the retry: nothing is held


def test_memory_held_past_the_retry_names_its_holders_in_gpu_memory_held(monkeypatch):
    monkeypatch.setattr(gpu, "_UNRELEASED", {})
    nvml = FakeNvml([[(4242, 2 * 2**30), (7, 2**30)]])
    monkeypatch.setattr(gpu, "_nvml", lambda module=None: real_nvml(nvml))
    gpu.await_gpu_release({4242}, 0, {4242: "python -m sglang.launch_server --tp 8"})
    with pytest.raises(GpuMemoryHeld) as exc:
        gpu.check_gpu_released()
    message = str(exc.value)
    assert "pid 4242 (python -m sglang.launch_server --tp 8; 2048 MiB on GPU 0)" in message
    assert "pid 7" not in message  # not the stopped server's


def test_without_nvml_the_release_is_not_timed(monkeypatch):
    monkeypatch.setattr(gpu, "_nvml", lambda module=None: None)
    assert gpu.await_gpu_release({1}, 5) is None


def test_a_holders_command_line_never_shows_the_api_key():
    """The command lines named in GpuMemoryHeld come from /proc: --api-key's value is replaced
    by its reference, as in every other record of the command."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "--api-key", "s3cret"],
        start_new_session=True,
    )
    try:
        assert procs.wait_until(lambda: "--api-key" in (procs.command_line(proc.pid) or ""), 10)
        line = procs.command_line(proc.pid)
        assert "s3cret" not in line and "--api-key $SGLANG_API_KEY" in line
        assert set(procs.snapshot_tree(proc.pid)) == {proc.pid}
    finally:
        proc.kill()
        proc.wait()
