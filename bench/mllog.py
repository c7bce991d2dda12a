"""A run's MLPerf log: ":::MLLOG {json}" lines in the format the mlcommons package writes.

mlperf_logging.mllog (mllog/mllog.py, _encode_log) writes each event as
':::MLLOG ' + json.dumps of namespace, time_ms, event_type, key, value, metadata, in
that order, with the caller's file and line first in metadata; encode() writes the
same bytes (tests/unit/test_mllog.py compares the two), but for a text holding the
marker itself, escaped so that every event stays whole on its own line. The package
is not needed on the nodes: bench/ runs with torch alone.

The lines say what a throughput run did, in the keys the training rules check
(mlperf_logging compliance_checker, training_4.0.0/common.yaml): init_start at the
process start, init_stop and run_start once the model, optimizer and data are built,
one block per timed window (samples_count: the samples the timed windows had trained
by then, in the run's unit), with its throughput in tracked_stats as NVIDIA's logs
carry it (NVIDIA/mlperf-common README, "Logging additional metrics": key
tracked_stats, value {"throughput": ...}, metadata {"step": increasing}), then one
evaluation on held-out samples and run_stop. The division is open and the status
research: no quality target is trained to, so run_stop says "aborted" (the rules'
other status, constants.ABORTED) and why. ResNet-50 is MLPerf's `resnet`; any other
model is named as itself, which no ruleset covers (docs/mlperf.md).

Runs on the nodes: never imports hpcbench, and not torch (evaluate() takes it as
its argument's module).
"""

from __future__ import annotations

import json
import sys
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOKEN = ":::MLLOG "
# mlperf-logging 4.1.68, mllog/mllog.py:91-98 (_encode_log): an event's fields, in the
# order it writes them.
FIELDS = ("namespace", "time_ms", "event_type", "key", "value", "metadata")
# The checker's reader keeps of a line only what follows its last marker
# (mlperf-logging 4.1.68, compliance_checker/mlp_parser/ruleset_400.py:63-68,
# strip_and_dedup: re.sub(".*" + TOKEN, TOKEN, line)): a text holding the marker would
# cut its own event. In JSON it can only be inside a string, where "\u004d" reads back
# as the "M" it replaces.
_MARKER, _ESCAPED = TOKEN.rstrip(), ":::\\u004dLLOG"
INTERVAL_START, INTERVAL_END, POINT_IN_TIME = "INTERVAL_START", "INTERVAL_END", "POINT_IN_TIME"

# The models MLPerf Training names a benchmark after (mllog/constants.py: RESNET). The
# training rules 4.0.0 are the last with rules for `resnet` (compliance_checker/
# training_4.0.0/open_resnet.yaml); under 4.1.0 and 6.1.0 its checker fails on it
# (docs/mlperf.md).
BENCHMARKS = {"resnet50": "resnet"}
RULESET = "4.0.0"
ORG = "hpcbench"
DIVISION = "open"
# compliance_checker training_4.0.0/common.yaml allows cloud, onprem, preview, research.
STATUS = "research"
STOP_STATUS = "aborted"  # mllog/constants.py ABORTED: stopped before any quality target
STOP_REASON = "a throughput run: its timed windows, then one evaluation; no quality target"


def benchmark(model: str) -> str:
    """MLPerf's name for a model's benchmark, else the model's own name."""
    return BENCHMARKS.get(model, model)


def encode(
    key: str,
    value: Any,
    metadata: dict[str, Any],
    time_ms: int,
    event_type: str = POINT_IN_TIME,
    namespace: str = "",
) -> str:
    """One line as mllog._encode_log writes it (an OrderedDict through json.dumps, which
    escapes every line break and, ensure_ascii, every other character), the marker in a
    text escaped."""
    ordered = OrderedDict(
        zip(FIELDS, (namespace, time_ms, event_type, key, value, metadata), strict=True)
    )
    return TOKEN + json.dumps(ordered).replace(_MARKER, _ESCAPED)


def decode(text: str) -> dict[str, Any] | None:
    """An event of a log line without its TOKEN, or None where the text is not one event
    as encode() writes it: one JSON object holding FIELDS, time_ms a number, key a text
    and metadata an object, as the checker's reader takes them (mlp_parser/
    ruleset_400.py:34-54, string_to_logline)."""
    try:
        event = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(event, dict) or any(f not in event for f in FIELDS):
        return None
    time_ms = event["time_ms"]
    number = isinstance(time_ms, (int, float)) and not isinstance(time_ms, bool)
    ok = number and isinstance(event["key"], str) and isinstance(event["metadata"], dict)
    return event if ok else None


def _ms(seconds: float) -> int:
    """mllog._current_time_ms: whole milliseconds since the epoch."""
    return int(seconds * 1e3)


@dataclass
class Log:
    """Events in the order they are added; each line names the line of code that
    logged it, as mllog's get_caller does."""

    lines: list[str] = field(default_factory=list)

    def add(
        self,
        key: str,
        at: float,
        value: Any = None,
        metadata: dict[str, Any] | None = None,
        event_type: str = POINT_IN_TIME,
    ) -> None:
        caller = sys._getframe(1)
        where = {"file": f"bench/{Path(caller.f_code.co_filename).name}", "lineno": caller.f_lineno}
        self.lines.append(encode(key, value, {**where, **(metadata or {})}, _ms(at), event_type))


@dataclass
class Window:
    """A timed window: its wall-clock start and end on rank 0, the samples all workers
    trained in it (in the run's unit), and its time as the record counts it (the
    slowest rank's), which the throughput is of."""

    start: float
    end: float
    samples: int
    seconds: float


@dataclass
class Evaluation:
    """Top-1 accuracy on held-out samples, or why there is none."""

    start: float
    end: float
    correct: int = 0
    count: int = 0
    samples: str = ""  # what the held-out samples were
    error: str = ""


def run_lines(
    *,
    model: str,
    unit: str,
    platform: str,
    seed: int,
    global_batch: int,
    train_samples: int,
    init_start: float,
    ready: float,
    windows: list[Window],
    evaluation: Evaluation | None,
    data: str,
) -> list[str]:
    """The run's log, from what measure() recorded (times in seconds since the epoch).
    train_samples: the distinct samples the run trains on (one synthetic batch per
    worker, or the files of --data); epochs count the timed windows' samples in them."""
    log = Log()
    cleared = {"why": "nothing is cleared before a run", "data": data}
    log.add("cache_clear", init_start, False, cleared)
    log.add("init_start", init_start, event_type=INTERVAL_START)
    log.add("submission_benchmark", init_start, benchmark(model))
    log.add("submission_division", init_start, DIVISION)
    log.add("submission_org", init_start, ORG)
    log.add("submission_platform", init_start, platform)
    log.add("submission_status", init_start, STATUS)
    log.add("seed", init_start, seed)
    log.add("global_batch_size", init_start, global_batch)
    log.add("train_samples", init_start, train_samples, {"unit": unit})
    eval_samples = evaluation.count if evaluation else 0
    log.add("eval_samples", init_start, eval_samples, {"unit": unit})
    log.add("init_stop", ready, event_type=INTERVAL_END)
    log.add("run_start", ready, event_type=INTERVAL_START, metadata={"model": model})
    done = 0
    for step, w in enumerate(windows, 1):
        log.add("block_start", w.start, None, {"samples_count": done}, INTERVAL_START)
        done += w.samples
        rate = w.samples / max(w.seconds, 1e-9)
        log.add("tracked_stats", w.end, {"throughput": rate}, {"step": step, "unit": f"{unit}/s"})
        log.add("block_stop", w.end, None, {"samples_count": done}, INTERVAL_END)
    epoch = done / max(train_samples, 1)
    end = windows[-1].end if windows else ready
    if evaluation is not None:
        at = {"epoch_num": epoch, "samples_count": done}
        log.add("eval_start", evaluation.start, None, at, INTERVAL_START)
        if evaluation.count:
            log.add(
                "eval_accuracy",
                evaluation.end,
                evaluation.correct / evaluation.count,
                {**at, "samples": evaluation.samples},
            )
        else:
            log.add("eval_error", evaluation.end, evaluation.error or "no held-out sample", at)
        log.add("eval_stop", evaluation.end, None, at, INTERVAL_END)
        end = evaluation.end
    log.add(
        "run_stop",
        end,
        None,
        {"status": STOP_STATUS, "reason": STOP_REASON, "samples_count": done},
        INTERVAL_END,
    )
    return log.lines


def evaluate(
    torch: Any,
    model: Any,
    batch: Callable[[], tuple[Any, Any]] | None,
    samples: str,
    clock: Callable[[], float],
) -> Evaluation:
    """Top-1 accuracy of `model` (eval mode, no gradients) on one held-out batch: the
    class of each image, or the next token at each position. Any failure is kept as
    the evaluation's error, so that the measured run still stands."""
    start = clock()
    if batch is None:
        return Evaluation(start, clock(), error="the workload has no held-out batch")
    try:
        inputs, labels = batch()
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                logits = model(inputs)
        finally:
            model.train(was_training)
        predicted = logits.argmax(dim=-1)
        correct = int((predicted == labels).sum())
        return Evaluation(start, clock(), correct, int(labels.numel()), samples)
    except Exception as err:  # the timed windows are measured: say why, keep the run
        return Evaluation(start, clock(), error=f"{type(err).__name__}: {str(err)[:200]}")
