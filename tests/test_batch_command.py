"""`rostra batch FILE.jsonl -o OUT.jsonl`: offline, the lines answered in input order as a server answers them,
the bad ones reported per line, a progress bar on stderr."""

from __future__ import annotations

import json
import subprocess
import sys

from servers import DATA


def test_rostra_batch_answers_a_file_offline(tmp_path):
    lines = [{"custom_id": f"q{n}", "method": "POST", "url": "/v1/chat/completions",
              "body": {"model": "scripted", "messages": [{"role": "user", "content": "say hello"}]}} for n in range(5)]
    bad = {"custom_id": "q1", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "scripted"}}
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines) + json.dumps(bad) + "\n{oops\n")
    out = tmp_path / "out.jsonl"
    done = subprocess.run([sys.executable, "-m", "rostra.cli", "batch", str(source), "-o", str(out),
                           "--engine", "scripted", "--script", str(DATA / "script.jsonl")],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "7/7" in done.stderr and "5 answered, 2 failed" in done.stderr  # the progress bar, the summary
    results = [json.loads(line) for line in out.read_text().splitlines()]
    assert [result["custom_id"] for result in results] == ["q0", "q1", "q2", "q3", "q4", "q1", None]
    for result in results[:5]:
        assert result["response"]["status_code"] == 200
        assert result["response"]["body"]["choices"][0]["message"]["content"] == "Hello! How can I help you today?"
    assert [result["error"]["code"] for result in results[5:]] == ["duplicate_custom_id", "invalid_json"]
    assert not list(tmp_path.glob("*.sqlite3"))  # nothing kept
