#!/usr/bin/env python3
"""Fails when a lit/FileCheck directive lost its colon (`// CHECK foo`,
`// RUN foo`): lit and FileCheck silently ignore such lines, so a test would
check less than it appears to. Usage: check-test-directives.py DIR..."""

import pathlib
import re
import sys

DIRECTIVE = re.compile(
    r"^\s*//\s*(RUN|REQUIRES|UNSUPPORTED|XFAIL|"
    r"[A-Z0-9_]*?CHECK(-[A-Z]+)*)\b(?!:)(?!\s*-)\s+\S")
FILE_SUFFIXES = {".mlir", ".test", ".py"}


def main(roots):
    bad = []
    for root in roots:
        for path in sorted(pathlib.Path(root).rglob("*")):
            if path.suffix not in FILE_SUFFIXES or not path.is_file():
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if DIRECTIVE.match(line):
                    bad.append(f"{path}:{number}: {line.strip()}")
    for entry in bad:
        print("directive without a colon:", entry)
    print(f"checked {len(roots)} tree(s): {len(bad)} directive(s) without a colon")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
