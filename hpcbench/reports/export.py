"""Every configuration's figures as data, for notebooks, spreadsheets and CI gates.

One record per configuration (model, backend, batch, nodes, workers, ...) with
every figure the report shows, from the same analysis (hpcbench.measure.analysis):
nothing is computed a second way. JSON carries a schema version and the
method; CSV has one column per field, in FIELDS' order, with the same names.

    {"schema": "hpcbench.configurations/1", "method": "...", "configurations": [{...}]}

Fields (units in the name or below; null where a figure does not exist, e.g.
E for a single worker, a prediction without a probe):
    env, model, backend, batch (per worker: images, or sequences of seq_len tokens),
    image_size, data, gpus_per_node, nodes, workers, runs, failed, method
    unit                           images (a CNN) or tokens (a transformer): what the
                                   throughput, ci95, ci95_windows and jitter count per second
    parallel, seq_len              a transformer's parallelism (ddp, fsdp2, hsdp), its tokens
                                   per sequence (null for a CNN)
    images_per_sec, tokens_per_sec throughput of all workers in the unit (the other null)
    ci95                           its 95% half-width
    ci_method                      repeats | windows | median (how ci95 was made)
    images_per_sec_per_worker, tokens_per_sec_per_worker, step_time_s, speedup
    mfu, mfu_unknown               a transformer's model FLOPs utilisation (0-1): its
                                   tokens_per_sec x FLOPs per token / peak_flops, or why
                                   it is unknown
    peak_flops                     a transformer's: its workers' peak FLOPS (the runs' mean)
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
    joules_per_sample, energy_source, energy_unit   energy per image or token over the
                                   timed windows and what it was read from (or why unknown)
A campaign's records add testbed and title, and where the testbed has a price, its
price, currency, cost_per_hour and cost_per_million_samples (hpcbench.campaign.cost).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable
from dataclasses import fields
from typing import Any

from hpcbench.measure.analysis import UNITS, ConfigSummary

# The document's version; docs/configurations.schema.json describes it. History (a
# field is only ever added under one version; renaming or changing one is version 2):
#   1  2026-11-25  configurations with figures, interval and prediction (0ee3175)
#      2026-11-25  + predicted_cpu_work_s (a0d2060), + predicted_background_s (43db3ff)
#      2026-11-28  + joules_per_sample, energy_source, energy_unit; a campaign's price,
#                  currency, cost_per_hour, cost_per_million_samples
#      2026-11-28  + unit, parallel, seq_len, tokens_per_sec, tokens_per_sec_per_worker,
#                  mfu, mfu_unknown (images_per_sec null for a transformer)
#      2026-12-02  + peak_flops; throughput is a step's work over the mean step (not
#                  the runs' rates averaged), mfu that throughput's
SCHEMA = "hpcbench.configurations/1"
METHOD = (
    "Throughput is the unit's count per second (images, or tokens for a transformer) of "
    "all workers: one step's work over the mean step of the timed windows after warm-up "
    "(each window's slowest rank); ci95 is the "
    "95% half-width over repeats (Student t), else over one run's windows; E(N) = X(N) / "
    "(N X(1)) against the same series' single-worker baseline (docs/method.md)."
)
# The summary's throughput fields, named by the unit here: throughput becomes
# images_per_sec and tokens_per_sec, one of them null.
BY_UNIT = {"throughput": "{}_per_sec", "throughput_per_worker": "{}_per_sec_per_worker"}


def _names(field: str) -> tuple[str, ...]:
    form = BY_UNIT.get(field)
    return (field,) if form is None else tuple(form.format(unit) for unit in UNITS)


# Every summary field but the run errors (free text, in the report's failure list).
FIELDS = tuple(name for f in fields(ConfigSummary) if f.name != "errors" for name in _names(f.name))


def configuration(summary: ConfigSummary, **extra: Any) -> dict[str, Any]:
    """One configuration's record: `extra` first (a campaign's testbed), then FIELDS,
    the throughput under its unit's names."""
    values = summary.as_dict()
    for field, form in BY_UNIT.items():
        value = values.pop(field)
        values.update({form.format(unit): None for unit in UNITS})
        values[form.format(summary.unit)] = value
    return {**extra, **{name: _finite(values[name]) for name in FIELDS}}


def _finite(value: Any) -> Any:
    """NaN and infinity are not JSON: a figure that is not a number is null."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def as_json(records: Iterable[dict[str, Any]], **meta: Any) -> str:
    document = {"schema": SCHEMA, "method": METHOD, **meta, "configurations": list(records)}
    return json.dumps(document, indent=1, allow_nan=False) + "\n"


# A text cell starting with one of these is a formula to a spreadsheet (=HYPERLINK(...),
# @SUM(...), a DDE call); OWASP's rule for CSV injection is to prefix such a cell with a
# single quote, which the spreadsheet shows as text. Titles and names come from files
# anyone may write (a campaign, a store), so every text cell is treated so.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A value as a CSV cell: numbers as they are (-0.5 is a number), None empty, and
    text that a spreadsheet would run as a formula neutralised with a leading quote."""
    if value is None:
        return ""
    if isinstance(value, int | float):  # bool too: written True/False
        return value
    text = str(value)
    return f"'{text}" if text.startswith(FORMULA_START) else text


def as_csv(records: Iterable[dict[str, Any]], leading: tuple[str, ...] = ()) -> str:
    """CSV with a header row; `leading` columns (e.g. testbed) before FIELDS.

    Rows end in CRLF (RFC 4180): the writer quotes a cell holding any character of the
    line terminator, so a carriage return inside a name stays in its cell; with "\n"
    alone it went unquoted and a reader started a new row (and cell) after it."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=[*leading, *FIELDS], lineterminator="\r\n")
    writer.writeheader()
    for record in records:
        writer.writerow({k: csv_cell(v) for k, v in record.items()})
    return buffer.getvalue()
