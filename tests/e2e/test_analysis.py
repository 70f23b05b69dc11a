"""Analysis, report, notebooks, MLflow UI and reproduction on a real (small) simulator sweep."""

from __future__ import annotations

import html
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import httpx
import matplotlib
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

matplotlib.use("Agg")

from analysis.figures import FIGURES, draw, why_not
from analysis.load import load_runs
from analysis.report import write_report
from harness.record.precision import meaningful
from harness.server.procs import free_port, processes_mentioning
from tests.conftest import ROOT
from tests.e2e.test_sweep_cli import sweep

pytestmark = pytest.mark.e2e
STUDY = "kimi-k25-eagle3"
OOM_FIRST = (
    "search.enqueue=[{speculative_num_steps:3,speculative_eagle_topk:1,mem_fraction_static:0.93,"
    "hicache_size:0},{speculative_num_steps:2,speculative_eagle_topk:1,mem_fraction_static:0.85,"
    "hicache_size:0}]"
)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    results, port = tmp_path_factory.mktemp("results"), free_port()
    proc = sweep(
        results, port, "search.n_trials=4", OOM_FIRST, "benchmark.concurrency=[1,2]", "report=true"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The sweep wrote its report and says where, with the other places its results are.
    report = results / "reports" / STUDY / "index.html"
    assert report.is_file() and f"Report:        {report}" in proc.stdout, proc.stdout[-2000:]
    return results, port, f"sqlite:///{results}/mlflow.db"


def test_runs_load_into_one_row_per_trial(study):
    _, _, uri = study
    df = load_runs(STUDY, uri)
    assert sorted(df["role"].unique()) == ["baseline", "trial"]
    trials = df[df["role"] == "trial"]
    assert len(trials) == 4
    for column in (
        "outcome",
        "config",
        "tok_s",
        "tok_s_ci95",
        "accept_len",
        "speculative_num_steps",
        "mem_fraction_static",
        "output_tok_s_c2",
        "speedup_vs_baseline",
    ):
        assert column in df.columns
    assert "oom" in set(trials["outcome"]) and "ok" in set(trials["outcome"])
    oom = trials[trials["outcome"] == "oom"].iloc[0]
    assert oom["mem_fraction_static"] == 0.93 and oom["speculative_num_steps"] == 3


@pytest.mark.parametrize("name", list(FIGURES))
def test_every_figure_is_labelled_and_names_study_and_engine(study, name, tmp_path):
    _, _, uri = study
    df = load_runs(STUDY, uri)
    fig = draw(name, df)
    if isinstance(fig, str):  # nothing to show in this study: its line, and no figure drawn
        assert "left out: " in fig and FIGURES[name][0](df) is None
        return
    axes = [ax for ax in fig.axes if ax.get_ylabel() and ax.get_xlabel()]
    assert axes, "axis labels missing"
    text = fig._suptitle.get_text() if fig._suptitle else fig.axes[0].get_title()
    assert STUDY in text and "engine sim" in text and "SIMULATED" in text
    assert any(ax.get_legend() for ax in fig.axes) or fig.legends
    assert any(ax.has_data() for ax in fig.axes)
    fig.savefig(tmp_path / f"{name}.png")
    assert (tmp_path / f"{name}.png").stat().st_size > 10_000


def test_both_loaders_give_the_same_rows_and_values(study):
    results, _, uri = study
    mlflow_rows = load_runs(STUDY, uri)
    folder_rows = load_runs(STUDY, results=results)
    assert set(folder_rows.columns) == set(mlflow_rows.columns)
    assert folder_rows["run_id"].isna().all() and mlflow_rows["run_id"].notna().all()
    # start_time: the server's launch (folders) or the upload (MLflow); the order is the same.
    assert list(folder_rows["name"]) == list(mlflow_rows["name"])
    columns = sorted(set(folder_rows.columns) - {"run_id", "start_time"})
    # MLflow keeps each metric at the digits it is worth (harness.record.precision); the folders
    # keep every digit: the same values, to those digits.
    pd.testing.assert_frame_equal(
        to_logged_digits(folder_rows[columns]),
        mlflow_rows[columns],
        check_dtype=False,
        check_exact=False,
    )
    assert folder_rows["parent_run_id"].notna().all()  # the sweep's MLflow parent, from the folder


def to_logged_digits(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    for column in out.select_dtypes(include="number").columns:
        out[column] = out[column].map(lambda v, c=column: v if pd.isna(v) else meaningful(c, v))
    for column in [c for c in out if c == "accept_by_window" or c.startswith("accept_at_least")]:
        name = "accept_len_by_window" if column == "accept_by_window" else column
        out[column] = out[column].map(
            lambda v, n=name: [meaningful(n, x) for x in v] if isinstance(v, list) else v
        )
    return out


def test_report_works_with_the_mlflow_store_deleted(study, tmp_path):
    results, _, _ = study
    copy = tmp_path / "results"
    shutil.copytree(results, copy, ignore=shutil.ignore_patterns("mlflow.db", "reports"))
    proc = subprocess.run(
        [sys.executable, "-m", "analysis.report", "--results", str(copy)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    page = (copy / "reports" / STUDY / "index.html").read_text()
    assert "trial_0000" in page and "SIMULATED" in page and str(copy) in page
    assert not (copy / "mlflow.db").exists()  # read from the folders, no store created
    asked = subprocess.run(
        [sys.executable, "-m", "analysis.report", "--results", str(copy), "--source", "mlflow"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert asked.returncode == 2 and "no MLflow store at" in asked.stderr
    assert not (copy / "mlflow.db").exists()


def test_report_writes_figures_and_html(study):
    results, _, uri = study
    df = load_runs(STUDY, uri)
    index = write_report(df, results / "reports" / STUDY, uri)
    page = index.read_text()
    assert "<table" in page and "trial_0000" in page and "SIMULATED" in page
    for name in FIGURES:  # drawn, or its line where it would be
        png = index.parent / f"{name}.png"
        if png.exists():
            assert png.stat().st_size > 10_000 and f'src="{name}.png"' in page
        else:
            assert f"Left out: {html.escape(why_not(name, df))}." in page


@pytest.mark.parametrize("notebook", ["speed_vs_baseline", "parameter_effects"])
def test_notebooks_execute_headless(study, notebook, tmp_path):
    import papermill

    results, _, _ = study
    out = tmp_path / f"{notebook}.ipynb"
    papermill.execute_notebook(
        str(ROOT / "analysis" / "notebooks" / f"{notebook}.ipynb"),
        str(out),
        parameters={"experiment": STUDY, "results": str(results)},
        cwd=str(ROOT),
        kernel_name="python3",
        progress_bar=False,
    )
    cells = json.loads(out.read_text())["cells"]
    images = [o for c in cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) >= 2


def test_mlflow_ui_serves_the_study_with_consistent_keys(study):
    results, _, _ = study
    port = free_port()
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    ui = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "ui",
            "--backend-store-uri",
            f"sqlite:///{results}/mlflow.db",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        api = f"{base}/api/2.0/mlflow"
        experiment = httpx.get(
            f"{api}/experiments/get-by-name", params={"experiment_name": STUDY}
        ).json()
        runs = httpx.post(
            f"{api}/runs/search",
            json={
                "experiment_ids": [experiment["experiment"]["experiment_id"]],
                "max_results": 100,
            },
        ).json()["runs"]
        trials = [
            r for r in runs if {"key": "specsweep.role", "value": "trial"} in r["data"]["tags"]
        ]
        assert len(trials) == 4
        keys = [frozenset(p["key"] for p in r["data"]["params"]) for r in trials]
        assert len(set(keys)) == 1, "every trial must carry the same parameter keys"
        ok = [r for r in trials if {"key": "specsweep.outcome", "value": "ok"} in r["data"]["tags"]]
        assert all(
            {"tok_s", "tok_s_ci95", "accept_len"} <= {m["key"] for m in r["data"]["metrics"]}
            for r in ok
        )
    finally:
        os.killpg(ui.pid, signal.SIGTERM)
        ui.wait(timeout=30)


def reproduce(results, *args: str) -> subprocess.CompletedProcess:
    argv = [
        sys.executable,
        "-m",
        "sweep.reproduce",
        "--experiment",
        STUDY,
        "--results",
        str(results),
    ]
    return subprocess.run([*argv, *args], cwd=ROOT, capture_output=True, text=True, timeout=180)


def test_reproduce_the_studys_answer_and_launch_its_export(study):
    results, port, uri = study
    summary = max((results / STUDY).glob("summary-*.json"))
    answer = json.loads(summary.read_text())["deploy"]["deploy"]  # the sweep's Deploy line
    # --form sim: the simulator's command, so the exported script can be launched here
    proc = reproduce(results, "--runs", "3", "--form", "sim")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "the study's answer" in proc.stdout
    # The verdict itself is statistics (tests/unit/test_reproduce_verdict.py); here: it is given.
    assert "reproduced:" in proc.stdout and "consistent with the recorded result" in proc.stdout
    folder = next((results / "reproduce").iterdir())
    script = (folder / "launch_server.sh").read_text()
    unit = next(folder.glob("*.service")).read_text()
    speculative = answer != "baseline"
    assert "export NCCL_PROTO=LL" in script
    assert ("--speculative-algorithm EAGLE3" in script) == speculative
    assert "ExecStart=" in unit and "Environment=NCCL_PROTO=LL" in unit
    assert json.loads((folder / "deployment.json").read_text())["form"] == "sim"
    # By default the export is SGLang's command, even from this simulated study; --run exports
    # a trial of one's choosing (here the fastest speculative one).
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name(STUDY).experiment_id
    fastest = client.search_runs(
        [experiment],
        "tags.`specsweep.role` = 'trial' and tags.`specsweep.outcome` = 'ok'",
        order_by=["metrics.tok_s DESC"],
    )[0]
    dry = reproduce(results, "--dry-run", "--run", fastest.info.run_id)
    assert dry.returncode == 0 and "#!/usr/bin/env bash" in dry.stdout
    assert "exec python -m sglang.launch_server" in dry.stdout
    flags = [w for ln in dry.stdout.splitlines() if not ln.startswith("#") for w in ln.split()]
    assert "--speculative-algorithm" in flags and not [w for w in flags if w.startswith("--sim-")]
    assert "SIMULATED" in dry.stdout and "warning: drafter.path=" in dry.stdout
    assert len(list((results / "reproduce").iterdir())) == 1  # dry run wrote nothing

    server = subprocess.Popen(
        ["bash", str(folder / "launch_server.sh")],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline, status = time.monotonic() + 60, None
        while time.monotonic() < deadline and status != 200:
            try:
                status = httpx.get(
                    f"http://127.0.0.1:{port}/health_generate", timeout=5
                ).status_code
            except httpx.HTTPError:
                time.sleep(0.2)
        assert status == 200
        info = httpx.get(f"http://127.0.0.1:{port}/server_info").json()
        assert info["speculative_algorithm"] == ("EAGLE3" if speculative else None)
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    assert processes_mentioning(f"--port {port} ") == []
