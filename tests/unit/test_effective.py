"""effective.<name> from /server_info as each SGLang version shapes it (harness.trial)."""

from __future__ import annotations

from harness.trial import EFFECTIVE_KEYS, effective_params

# 0.5.23 `ServerArgs.resolved_dict()`: the flag field as given, the resolution nested
# (`model_executor/cuda_graph_config.py::CudaGraphConfig`, both phases serialised).
V0523 = {
    "speculative_num_steps": 3,
    "cuda_graph_max_bs_decode": None,
    "cuda_graph_config": {
        "decode": {"backend": "full", "max_bs": 256, "bs": None},
        "prefill": {"backend": "breakable", "max_bs": None, "bs": None},
    },
    "enable_hierarchical_cache": False,
    "tp_size": 8,
}
# 0.5.1.post3 `dataclasses.asdict(server_args)`: the resolved value top-level.
V051 = {"speculative_num_steps": 3, "cuda_graph_max_bs": 160, "tp_size": 8}


def test_the_decode_graph_batch_is_read_where_0523_resolves_it():
    effective = effective_params(V0523)
    assert effective["cuda_graph_max_bs_decode"] == 256
    assert effective["hicache_size"] == 0 and effective["speculative_num_steps"] == 3
    assert effective_params(V051)["cuda_graph_max_bs"] == 160


def test_the_gpus_come_from_the_launch_not_from_server_info():
    assert "cuda_visible_devices" not in effective_params(V0523)
    assert effective_params(V0523, gpus="0,1")["cuda_visible_devices"] == "0,1"
    # a field of that name (the older simulator had one) is not trusted over the launch
    assert (
        effective_params({**V051, "cuda_visible_devices": "7"}, gpus="2")["cuda_visible_devices"]
        == "2"
    )


def test_the_mlflow_names_stay():
    assert {"cuda_graph_max_bs_decode", "cuda_visible_devices"} <= set(EFFECTIVE_KEYS)


def test_the_captured_decode_batch_sizes_come_from_the_schedulers_state():
    # 0.5.23 internal_state.py `_add_disaggregation`: what the decode runner captured
    info = {**V0523, "internal_states": [{"decode_cuda_graph_bs": [1, 2, 4, 8, 40, 44, 48]}]}
    assert effective_params(info)["decode_cuda_graph_bs"] == [1, 2, 4, 8, 40, 44, 48]
    assert "decode_cuda_graph_bs" not in effective_params(V0523)
    assert "decode_cuda_graph_bs" not in effective_params(V051)  # 0.5.1 reports none
