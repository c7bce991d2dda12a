"""Layer core (the bottom): errors and their one-line messages, the project's paths,
files read and written with bounds and without following links, bounded processes,
locks, SSH command lines, progress lines and which names hold secrets. Imports nothing
of hpcbench's above it."""
