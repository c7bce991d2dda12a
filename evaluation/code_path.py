"""How far one testbed's path through `campaign run` wanders: the hpcbench modules it
visits, in call order, and how often it comes back to a module it had left.

    python evaluation/code_path.py [--show]

One local testbed, one cell (batch 4, one node), one repeat, no probe. Deploy,
verify and destroy are replaced by no-ops (they are the deploy layer's, not the
campaign's), the testbed resolves to this machine's processes, and a run returns a
made-up record instead of launching training: what is traced is the campaign's
own code between them, from TestbedLife.measure_testbed (Runner.measure_testbed
in earlier versions) down to the launcher's command line and back. A module counts
once per stretch of consecutive calls into it; "returns" counts each stretch of
a module seen before; "upward calls" counts calls into a module of a higher
layer than the caller's (hpcbench.LAYERS, the package's layers, with the campaign's
runner and commands above the rest of the campaign), such as a callback a lower layer
was handed; "parses" counts argparse parses (a Namespace built) on the path.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import hpcbench  # noqa: E402
from hpcbench.campaign import campaign_file, lifecycle, runner  # noqa: E402
from hpcbench.measure import sweep  # noqa: E402
from hpcbench.schedulers.base import Outcome  # noqa: E402
from hpcbench.testbeds.kinds import localhost  # noqa: E402
from hpcbench.testbeds.kinds.deployed import Deployed  # noqa: E402
from hpcbench.testbeds.target import Target  # noqa: E402

CAMPAIGN = """\
name: path
out: {out}
sweep: {{model: resnet18, image_size: 32, batch: 4, nodes: 1, repeats: 1, no_probe: true}}
testbeds:
  - {{name: a, env: local, settings: {{node_count: 1}}}}
"""


def fake_outcome(self: Target, run_spec: Any, timeout_s: float, echo: bool = False) -> Outcome:
    record = {"workers": 1, "window_times": [1.0, 1.0], "steps": 2, "fingerprint": {}}
    return Outcome([0], [record], [], launched_at=0.0, duration_s=0.01)


# The campaign's entry points (runner, commands) sit above the rest of its layer.
ENTRY = ("hpcbench.campaign.runner", "hpcbench.campaign.commands")


def layer(module: str) -> int:
    """hpcbench.LAYERS' rank of the module's package, top down (0 is the highest)."""
    top_down = len(hpcbench.LAYERS) - hpcbench.layer_of(module)
    return 2 * top_down + (0 if module.startswith(ENTRY) else 1)


def trace(show: bool) -> tuple[list[str], int, int]:
    visits: list[str] = []
    inside = [False]
    upward = [0]
    parses = [0]

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event != "call" or not inside[0]:
            return
        module = frame.f_globals.get("__name__", "")
        if module == "argparse" and frame.f_code.co_name == "parse_known_args":
            parses[0] += 1
        if not module.startswith("hpcbench"):
            return
        caller = frame.f_back.f_globals.get("__name__", "") if frame.f_back else ""
        if caller.startswith("hpcbench") and layer(module) < layer(caller):
            upward[0] += 1
        if not visits or visits[-1] != module:
            visits.append(module)

    measure = lifecycle.TestbedLife.measure_testbed

    def traced(self: Any, *args: Any, **kwargs: Any) -> Any:
        inside[0] = True
        try:
            return measure(self, *args, **kwargs)
        finally:
            inside[0] = False

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["HPCBENCH_STATE"] = str(Path(tmp) / "state")
        path = Path(tmp) / "c.yaml"
        path.write_text(textwrap.dedent(CAMPAIGN.format(out=Path(tmp) / "out")))
        # A deployed kind's booking (testbeds/kinds/deployed.py) as no-ops: nothing held,
        # and no node of this machine planned (so no one-worker run before booking).
        for name in ("acquire", "verify", "release"):
            setattr(Deployed, name, lambda *a, **k: 0)
        Deployed.check_booking = lambda *a, **k: None  # type: ignore[method-assign]
        Deployed.held = lambda self, env: []  # type: ignore[method-assign]
        runner.stop_on_signals = lambda: None
        sweep.stop_on_signals = lambda: None
        Deployed.testbed = lambda self, spec: localhost.testbed(cores=1)  # type: ignore[method-assign]
        Target.run = fake_outcome
        Target.prepare = lambda self: None
        lifecycle.TestbedLife.measure_testbed = traced
        sys.setprofile(profile)
        try:
            runner.run(campaign_file.load(path), resume=False)
        finally:
            sys.setprofile(None)
    if show:
        print("\n".join(visits))
    return visits, upward[0], parses[0]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--show", action="store_true", help="print the modules in call order")
    visits, upward, parses = trace(p.parse_args().show)
    distinct = len(set(visits))
    print(
        f"{distinct} modules, {len(visits) - distinct} returns to a module already left, "
        f"{upward} upward calls, {parses} argparse parses (python evaluation/code_path.py)"
    )


if __name__ == "__main__":
    main()
