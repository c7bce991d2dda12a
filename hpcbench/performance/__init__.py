"""Layer performance (above core): what training should do before it is measured: the
all-reduce and sharded (FSDP, HSDP) communication models, the scaling model that turns
them into E(n), the memory a transformer's step holds per GPU, the published
single-worker figures a forecast falls back on. Pure functions of specs and numbers:
nothing here launches or reads a results folder."""
