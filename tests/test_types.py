"""The type checker runs clean: mypy over the whole package, parsing/ and serving/ strictly
(configuration: [tool.mypy] in pyproject.toml). Deselect with `-m "not types"`."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.types
def test_mypy_is_clean():
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, f"mypy found errors:\n{result.stdout}{result.stderr}"
