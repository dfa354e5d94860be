"""Prints the kernel matrix's summary (kmatrix.SUMMARY, filled by
test_kernels.Matrix.write) at the end of the run, passed or failed: a
kernel that passes says its figures too."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kmatrix  # noqa: E402


def pytest_terminal_summary(terminalreporter):
    if kmatrix.SUMMARY:
        terminalreporter.section("kernel matrix")
        for line in kmatrix.SUMMARY:
            terminalreporter.write_line(line)
