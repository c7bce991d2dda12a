"""hpcbench: build testbeds for distributed deep learning as code and measure how training scales."""

__version__ = "0.1.0"
