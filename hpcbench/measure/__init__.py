"""Layer measure (above testbeds): measuring one testbed. The sweep over node counts and
batch sizes, the all-reduce probe, the `scale` and `probe` options, the environment's
fingerprint, the append-only results store and its analysis (throughput, E(n) and
their intervals)."""
