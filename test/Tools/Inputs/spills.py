"""Prints `kernel spill-store-bytes` for each kernel of a `ptxas -v` report
on stdin."""
import re
import sys

for name, spills in re.findall(r"Function properties for (\S+)\n\s*\d+ bytes stack frame, (\d+) bytes spill stores",
                               sys.stdin.read()):
    print(name, spills)
