"""Merges result files of one benchmark session (same commit and device),
e.g. one per hidden size, into one: merge_results.py OUT IN..."""

import json
import sys

out, inputs = sys.argv[1], sys.argv[2:]
docs = [json.load(open(p)) for p in inputs]
for key in ("device", "commit"):
    values = {d[key] for d in docs}
    if len(values) != 1:
        sys.exit(f"merge_results: inputs differ in {key}: {sorted(values)}")
merged = {k: docs[0][k] for k in ("device", "date", "commit", "torch")}
merged["results"] = [r for d in docs for r in d["results"]]
with open(out, "w") as f:
    json.dump(merged, f, indent=1)
