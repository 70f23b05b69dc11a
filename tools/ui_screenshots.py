"""Screenshots of MLflow's UI on a results folder, as a user meets it (docs/img/, docs/analysis.md).

    python tools/ui_screenshots.py --results results --out docs/img      (make screenshots)

Starts MLflow's server on the folder's store as `make ui` does (one worker, no job runner) on a
free port, and headless Chromium (Debian's `chromium`, installed with apt-get when missing and
run as root) on three addresses: the study's view (sweep.tracking.view) as the runs list and as
its chart tab, and the experiment as MLflow opens it without the link. Each Chromium gets a new
empty profile, as a first visit. The folder needs a sweep made with the view (any sweep since).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mlflow.tracking import MlflowClient  # noqa: E402

from harness.record.layout import ResultsLayout  # noqa: E402
from harness.server.procs import free_port  # noqa: E402
from sweep.tracking.view import VIEW_TAG_PREFIX, view_key, view_link  # noqa: E402

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)
# (file, which address, window, virtual ms): the charts load Plotly lazily and draw last
SHOTS = (
    ("mlflow-runs.png", "view", (2200, 900), 20_000),
    ("mlflow-compare.png", "chart", (2000, 1300), 45_000),
    ("mlflow-without-link.png", "plain", (1600, 900), 20_000),
)
START_S = 60.0


def chromium() -> str:
    """Debian's chromium, installed with apt-get when it is missing."""
    found = shutil.which("chromium")
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        sys.exit("chromium is not installed: sudo apt-get install -y chromium")
    print("installing Debian's chromium (apt-get)", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-q"], check=True, env=env, stdout=subprocess.DEVNULL)
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "chromium"]
    subprocess.run(install, check=True, env=env, stdout=subprocess.DEVNULL)
    return shutil.which("chromium") or sys.exit("apt-get ran but chromium is not on PATH")


def start_mlflow(store: Path, port: int, log: Path) -> subprocess.Popen:
    """`make ui`'s server on a free port, in a process group of its own."""
    mlflow = Path(sys.executable).with_name("mlflow")
    argv = [str(mlflow), "server", "--backend-store-uri", f"sqlite:///{store}"]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    with log.open("w") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=out, start_new_session=True)
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"mlflow server exited with {proc.returncode}: see {log}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.5)
    stop(proc)
    sys.exit(f"mlflow server did not answer in {START_S:.0f} s: see {log}")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def screenshot(browser: str, url: str, out: Path, size: tuple[int, int], virtual_ms: int) -> None:
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        argv = [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}"]
        argv += [f"--window-size={size[0]},{size[1]}", f"--virtual-time-budget={virtual_ms}"]
        argv += [f"--screenshot={out}", url]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    if done.returncode != 0 or not out.is_file() or out.stat().st_size == 0:
        sys.exit(f"chromium made no screenshot of {url} ({done.returncode}): {done.stderr[-800:]}")
    print(f"{out}  <- {url}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default="results", help="the sweep's tracking.dir")
    parser.add_argument("--study", help="the study (default: the one swept last in --results)")
    parser.add_argument("--experiment", help="tracking.experiment (default: the study's name)")
    parser.add_argument("--out", default=str(ROOT / "docs" / "img"))
    args = parser.parse_args(argv)
    store = Path(args.results).resolve() / "mlflow.db"
    if not store.is_file():
        sys.exit(f"no MLflow store at {store}: run a sweep first (make sweep)")
    args.study = args.study or ResultsLayout.at(args.results).latest_study()
    if args.study is None:
        sys.exit(f"no study in {args.results}: run a sweep first (make sweep), or pass --study")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    browser = chromium()
    port = free_port()
    server = start_mlflow(store, port, Path(tempfile.gettempdir()) / f"mlflow-ui-{port}.log")
    try:
        ui = f"http://127.0.0.1:{port}"
        experiment = MlflowClient(ui).get_experiment_by_name(args.experiment or args.study)
        if experiment is None:
            sys.exit(f"no experiment {args.experiment or args.study!r} in {store}")
        key = view_key(args.study)
        if VIEW_TAG_PREFIX + key not in experiment.tags:
            sys.exit(f"experiment {experiment.name!r} has no view {key}: sweep it again")
        urls = {
            "view": view_link(ui, experiment.experiment_id, key),
            "chart": view_link(ui, experiment.experiment_id, key, mode="CHART"),
            "plain": f"{ui}/#/experiments/{experiment.experiment_id}",
        }
        for name, which, size, virtual_ms in SHOTS:
            screenshot(browser, urls[which], out / name, size, virtual_ms)
    finally:
        stop(server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
