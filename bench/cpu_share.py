"""How the workers of one CPU node share its CPUs: the threads each takes and the CPUs
each gets. The workload sets its threads from it (runtime.set_threads); the forecast
stretches one worker's step by it where several workers share a node.

Runs on the nodes and in the harness: no torch, no hpcbench.
"""

from __future__ import annotations


def auto_threads(cores: float, local_size: int) -> int:
    """Whole cores per worker, at least one. More threads than the quota's cores only
    burn the quota sooner in each CFS period and then stand still together."""
    return max(1, int(cores) // max(1, local_size))


def cpus_each(node_cpus: float, workers: int, threads: int = 0) -> float:
    """The CPUs each of a node's `workers` gets, each running `threads` threads (0: as
    the workload picks them, auto_threads): its threads, or its even share of the node's
    CPUs (its cgroup quota or CPU set) where their threads ask for more, as the kernel's
    fair scheduler divides a group's quota among its busy threads."""
    threads = threads or auto_threads(node_cpus, workers)
    return min(float(threads), node_cpus / max(1, workers))


def stretch(node_cpus: float, workers: int, threads: int = 0, alone_threads: int = 0) -> float:
    """How much longer each of `workers` on one node computes a step than one worker
    alone on it (alone_threads: the lone worker's threads, 0: auto): the CPUs the lone
    worker had over those each has, compute taken to run in proportion to its CPUs
    (exact where both run one thread and the node's quota time-slices them; an upper
    bound where the lone worker ran more threads, which scale less than linearly)."""
    return cpus_each(node_cpus, 1, alone_threads) / cpus_each(node_cpus, workers, threads)


def stretches(
    node_cpus: float, workers: int, threads: int = 0, alone_threads: int = 0
) -> tuple[float, float]:
    """(stretch, least_stretch): the forecast's point and the end of its band."""
    shape = (node_cpus, workers, threads, alone_threads)
    return stretch(*shape), least_stretch(*shape)


def least_stretch(
    node_cpus: float, workers: int, threads: int = 0, alone_threads: int = 0
) -> float:
    """stretch() where the lone worker's threads beyond one bought nothing: the time
    slicing alone, the least a shared node can cost (the forecast's band reaches it)."""
    alone = min(1.0, cpus_each(node_cpus, 1, alone_threads))
    return alone / min(1.0, cpus_each(node_cpus, workers, threads))
