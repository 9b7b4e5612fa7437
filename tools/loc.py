#!/usr/bin/env python3
"""Code lines of the library, as `make loc` prints them: in src/**/*.rs, the lines that are not
blank and not only a comment, leaving out the test-only files (tests.rs, testing.rs, fake.rs)
and a file's closing `#[cfg(test)] mod tests` block. Prints the library's figure and its
session's (src/session/).

Usage: loc.py [REPO]  (default: the current folder)
"""

import pathlib
import re
import sys

TEST_FILES = {"tests.rs", "testing.rs", "fake.rs"}
TESTS_BLOCK = re.compile(r"(pub(\([^)]*\))? )?mod tests \{")


def code_lines(path):
    lines = path.read_text().splitlines()
    for i in range(len(lines) - 1):
        if lines[i].strip() == "#[cfg(test)]" and TESTS_BLOCK.match(lines[i + 1]):
            lines = lines[:i]
            break
    return sum(1 for line in lines if line.strip() and not line.strip().startswith("//"))


def main():
    src = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".") / "src"
    counts = {p: code_lines(p) for p in src.rglob("*.rs") if p.name not in TEST_FILES}
    session = sum(n for p, n in counts.items() if p.relative_to(src).parts[0] == "session")
    print(f"src {sum(counts.values())} session {session}")


if __name__ == "__main__":
    main()
