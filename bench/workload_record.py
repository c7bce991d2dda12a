"""The workload record's fields, declared once.

bench/train.py writes the record (measure(): every workload's fields, then the
workload's own: train.py's CNNs, bench/lm.py's transformers); the harness keeps
the fields in KEPT as written (hpcbench/measure/sweep.py, complete). A test runs train.py
and checks its record against these names both ways. Runs on the nodes: no torch,
no hpcbench; the harness loads this file from bench/ (hpcbench/core/bench.py).
"""

from __future__ import annotations

# train.py measure(), for every workload: the run as it ran, the timed windows, the
# weights compared across ranks, the machine, energy over the windows, the MLPerf log.
MEASURED = (
    "kind",
    "model",
    "backend",
    "batch",
    "unit",
    "data",
    "warmup",
    "windows",
    "steps",
    "steps_asked",
    "min_window_s",
    "workers",
    "local_workers",
    "device",
    "step",
    "compile_backend",
    "threads",
    "wrapped",
    "dist_backend",
    "grad_timeline",
    "window_times",
    "rank_window_times",
    "device_window_times",
    "rank_data_times",
    "data_time_fraction",
    "weights_in_sync",
    "weight_sum_spread",
    "weights_digest",
    "loss",
    "timeline",
    "fingerprint",
    "gpu",
    "nodes_use",
    "energy",
    "mllog",
)

# measure(), only where NCCL ran between nodes: the fabric it used (bench/nccl_log.py).
BETWEEN_NODES = ("fabric",)

# Every workload's own: its precision, size and what its gradients carry.
MODEL = ("amp", "params", "grad_bytes", "allreduce_bytes", "bucket_cap_mb")

# The CNNs' own (train.py build_cnn).
IMAGES = (
    "image_size",
    "channels_last",
    "graph_capture",
    "graph_eager_steps",
    "fused_optimizer",
    "decode",
    "decode_note",
    "host_decoded",
    "fp16_allreduce",
    "fusion_threshold_mb",
)

# The transformers' own (bench/lm.py build): what a step trains, how it is laid out
# (bench/layout.py), what the backend ran for each collective, the memory each rank
# held, and the figures the workload derives.
TOKENS = (
    "collectives",
    "collectives_per_step",
    "seq_len",
    "parallel",
    "shard_group",
    "mesh",
    "tp",
    "grad_accum",
    "activation_checkpoint",
    "global_batch",
    "global_loss",
    "model_state_bytes",
    "peak_memory_bytes",
    "reshard_after_forward",
    "fsdp_units",
    "precision",
    "mixed_precision",
    "params_matmul",
    "flops_per_token",
    "tokens_per_step",
    "param_bytes",
    "token_file",
    "config_source",
    "model_shape",
    "peak_flops_per_worker",
    "peak_source",
    "tokens_per_sec",
    "tokens_per_sec_per_worker",
    "peak_flops",
    "mfu",
    "mfu_unknown",
)

# Fields the harness does not keep as written: the configuration it launched, which the
# run record holds already; steps, workers, timeline and fingerprint, which it takes in
# its own way (hpcbench/measure/sweep.py, complete); the transformer's source (its name says it).
NOT_KEPT = frozenset(
    {
        "kind",
        "model",
        "backend",
        "batch",
        "image_size",
        "data",
        "warmup",
        "windows",
        "steps",
        "workers",
        "timeline",
        "fingerprint",
        "config_source",
    }
)

# What the run record keeps from the workload's record, as written (None where this
# workload writes no such field).
KEPT = tuple(f for f in (*MEASURED, *BETWEEN_NODES, *MODEL, *IMAGES, *TOKENS) if f not in NOT_KEPT)
