"""The README is the user's way in: its set-up commands are what CI runs."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def test_ci_runs_the_readme_test_command_verbatim():
    command = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S)
    assert command in [line for b in blocks for line in b.splitlines()]

