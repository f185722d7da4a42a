"""The checkout is self-sufficient: CI and users run it as a fresh clone with nothing beside it."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_test_command_is_what_ci_runs():
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("python3 -m venv")]
    assert len(ci) == 1 and ci[0] in (ROOT / "README.md").read_text()


def test_ci_runs_in_a_fresh_clone_without_siblings():
    script = (ROOT / ".ci" / "run").read_text()
    assert "mktemp -d" in script and "git clone" in script


def test_no_tracked_file_reads_outside_the_checkout():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    offenders = []
    for name in tracked:
        if name == "tests/test_repository.py" or not (name.endswith((".py", ".toml")) or name.startswith(".ci/")):
            continue
        text = (ROOT / name).read_text(errors="replace")
        if "../shared" in text or "parents[2]" in text:
            offenders.append(name)
    assert offenders == [], f"these read outside the checkout: {offenders}"


def test_vendored_spec_carries_its_licence_and_source():
    spec_dir = ROOT / "tests" / "spec"
    assert (spec_dir / "openapi.json").stat().st_size > 1_000_000
    assert "MIT License" in (spec_dir / "LICENSE").read_text()
    assert "github.com/openai/openai-openapi" in (spec_dir / "SOURCE.md").read_text()


def test_parsers_and_wire_formats_do_not_import_the_engine_layer():
    """The layering the architecture promises: parsing/ and protocol/ share rostra/core.py with the engines."""
    offenders = [str(path.relative_to(ROOT)) for layer in ("parsing", "protocol")
                 for path in (ROOT / "rostra" / layer).rglob("*.py") if "rostra.engines" in path.read_text()]
    assert offenders == []


MAX_FUNCTION_LINES = 60


def long_functions(root: Path, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """Every function (method, nested function) in `root`'s Python files longer than `limit` lines,
    its decorators and docstring included, as `path:line name (N lines)`."""
    import ast

    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
                length = (node.end_lineno or node.lineno) - first + 1
                if length > limit:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_function_over_60_lines():
    assert long_functions(ROOT / "rostra") == []


def test_long_functions_are_found(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    lines = "".join(f"    x{i} = {i}\n" for i in range(59))  # def + 59 lines: 60, allowed
    method = "".join(f"        y{i} = {i}\n" for i in range(59))  # decorator + def + 59 lines: 61
    (package / "m.py").write_text(f"def short():\n{lines}\n\nclass C:\n    @staticmethod\n    async def long():\n{method}")
    found = long_functions(package)
    assert found == ["pkg/m.py:65 long (61 lines)"]
