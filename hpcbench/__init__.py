"""hpcbench: testbeds for distributed deep learning as code, and how training scales on them.

The package is layered; a module imports from its own layer and the layers below it,
never from one above (tests/unit/test_layers.py checks every import):

    cli          the command line (cli.py, __main__.py)
    campaign     several testbeds x one sweep: plan, forecast, book, run, report
    reports      what a results folder says: report, compare, export, MLPerf, predict
    measure      sweeps and probes on one testbed, the results store, their analysis
    testbeds     deploy (Terraform, Ansible), the testbed kinds, nodes, reach, leases
    schedulers   start a launcher's command lines, watch them, collect the records
    launchers    what a run is asked to do (specs) and the command lines that start it
    performance  the performance models: all-reduce, sharded, scaling, memory, and the
                 published figures they fall back on
    core         errors, paths, bounded files and processes, locks, ssh, progress, and
                 the workload's own modules (bench/) both sides read
"""

__version__ = "0.1.0"

# The layers, bottom up: each a subpackage, save `cli`, the modules at the top.
LAYERS = (
    "core",
    "performance",
    "launchers",
    "schedulers",
    "testbeds",
    "measure",
    "reports",
    "campaign",
    "cli",
)


def layer_of(module: str) -> int:
    """A dotted hpcbench module's layer, as its index in LAYERS: its subpackage's, or
    cli's for the modules at the top."""
    parts = module.split(".")
    return LAYERS.index(parts[1] if len(parts) > 1 and parts[1] in LAYERS else "cli")
