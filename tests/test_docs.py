"""The README is the user's way in: its set-up commands are what CI runs, and it and docs/ link
only to files in the repository."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def test_ci_runs_the_readme_test_command_verbatim():
    command = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S)
    assert command in [line for b in blocks for line in b.splitlines()]



def test_docs_link_only_to_files_in_the_repository():
    for doc in [README, *sorted((ROOT / "docs").glob("*.md"))]:
        text = doc.read_text()
        assert "DFLASH.md" not in text, doc.name  # the reference the docs replace is not shipped
        for target in re.findall(r"\]\(([^)#\s]+)", text):
            if not re.match(r"[a-z]+:", target):
                assert (doc.parent / target).exists(), f"{doc.name} links to a missing {target}"
