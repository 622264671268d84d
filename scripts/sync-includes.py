#!/usr/bin/env python3
"""Rewrites every fenced block that follows `<!-- include: PATH -->` in the
README and docs/*.md with PATH's current text, so that the examples shown
are the files CI compiles and runs (tests/tests/readme.rs checks they match)."""
import pathlib
import re

root = pathlib.Path(__file__).resolve().parent.parent
pattern = re.compile(r"(<!-- include: (\S+) -->\n```(\w*)\n)(.*?)(```)", re.S)
for doc in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
    text = doc.read_text()
    new = pattern.sub(lambda m: m.group(1) + (root / m.group(2)).read_text() + m.group(5), text)
    if new != text:
        doc.write_text(new)
        print(f"updated {doc.relative_to(root)}")
