"""hpcbench: testbeds for distributed deep learning as code, and how training scales on them."""

__version__ = "0.1.0"
