"""Every configuration's figures as data, for notebooks, spreadsheets and CI gates.

One record per configuration (model, backend, batch, nodes, workers, ...) with
every figure the report shows, from the same analysis (hpcbench.analysis):
nothing is computed a second way. JSON carries a schema version and the
method; CSV has one column per field, in FIELDS' order, with the same names.

    {"schema": "hpcbench.configurations/1", "method": "...", "configurations": [{...}]}

Fields (units in the name or below; null where a figure does not exist, e.g.
E for a single worker, a prediction without a probe):
    env, model, backend, batch (per worker), image_size, data, gpus_per_node,
    nodes, workers, runs, failed, method
    images_per_sec, ci95           throughput of all workers, mean and 95% half-width
    ci_method                      repeats | windows | median (how ci95 was made)
    images_per_sec_per_worker, step_time_s, speedup
    efficiency, efficiency_ci95    E(N) = X(N) / (N X(1)) and its 95% half-width
    internode_efficiency, internode_efficiency_ci95
    predicted_efficiency           the point prediction (replay over the probed link)
    predicted_cpu_work_s           CPU nodes: the all-reduces' own CPU work the point charged
    predicted_background_s         CPU nodes: what the backend's background work added to it
    predicted_efficiency_low, predicted_efficiency_high   the band
    allreduce_s, busbw (bytes/s)   the probe's all-reduce of the gradients, bus bandwidth
    compute_s, data_s, exposed_comm_s, overlap_s   where the time went, per step
    data_fraction, jitter, outlier_windows, straggler_lead, straggler
    cpu_util, cpu_limit, net_bytes_per_s, link_rate, weights_in_sync
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable
from dataclasses import fields
from typing import Any

from hpcbench.analysis import ConfigSummary

SCHEMA = "hpcbench.configurations/1"
METHOD = (
    "Throughput is images/s of all workers over timed windows after warm-up; ci95 is the "
    "95% half-width over repeats (Student t), else over one run's windows; E(N) = X(N) / "
    "(N X(1)) against the same series' single-worker baseline (docs/method.md)."
)
# Every summary field but the run errors (free text, in the report's failure list).
FIELDS = tuple(f.name for f in fields(ConfigSummary) if f.name != "errors")


def configuration(summary: ConfigSummary, **extra: Any) -> dict[str, Any]:
    """One configuration's record: `extra` first (a campaign's testbed), then FIELDS."""
    values = summary.as_dict()
    return {**extra, **{name: _finite(values[name]) for name in FIELDS}}


def _finite(value: Any) -> Any:
    """NaN and infinity are not JSON: a figure that is not a number is null."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def as_json(records: Iterable[dict[str, Any]], **meta: Any) -> str:
    document = {"schema": SCHEMA, "method": METHOD, **meta, "configurations": list(records)}
    return json.dumps(document, indent=1, allow_nan=False) + "\n"


def as_csv(records: Iterable[dict[str, Any]], leading: tuple[str, ...] = ()) -> str:
    """CSV with a header row; `leading` columns (e.g. testbed) before FIELDS."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=[*leading, *FIELDS], lineterminator="\n")
    writer.writeheader()
    for record in records:
        writer.writerow({k: "" if v is None else v for k, v in record.items()})
    return buffer.getvalue()
