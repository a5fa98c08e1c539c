"""Writes broken and escaped copies of a kernel manifest (argv[1]) next to
argv[2] for manifest-json.test."""
import json
import sys

text = open(sys.argv[1]).read()
base = sys.argv[2]


def write(suffix, content):
    with open(f"{base}.{suffix}.json", "w") as f:
        f.write(content)


def edited(change):
    manifest = json.loads(text)
    kernel = next(k for k in manifest["kernels"] if k["name"] == "norm_gemm0")
    change(kernel)
    return json.dumps(manifest, indent=2)


write("escaped", text.replace('"name": "norm_gemm0"', '"name": "norm\\u005fgemm0"', 1))
write("fraction", edited(lambda k: k.update(stages=4.5)))
write("flag", edited(lambda k: k.update(transpose_b="yes")))
write("dependent", edited(lambda k: k.update(dependent_launch="yes")))
write("source", edited(lambda k: k["params"][0].update(source="host")))
write("truncated", text[: len(text) // 2])
write("missing", edited(lambda k: k.pop("shared_memory_bytes")))
write("index", edited(lambda k: k["params"][2].update(name="B")))
write("swizzle", edited(lambda k: k["params"][0].update(swizzle="256B")))
write("nofill", edited(lambda k: k["params"][1].pop("oob_fill")))
write("kind", edited(lambda k: k.update(kind="conv")))
write("access", edited(lambda k: k["params"][0].update(access="write")))
write("role", edited(lambda k: next(p for p in k["params"] if "role" in p).update(role="diagonal")))


def grouped_without_width(kernel):
    param = next(p for p in kernel["params"] if p.get("role") == "row_partials")
    param["role"] = "grouped"
    param.pop("partial_tile", None)


write("grouped", edited(grouped_without_width))
write("blockz", edited(lambda k: k.update(block=[1, 1, 128])))
write("threads", edited(lambda k: k.update(block=[512, 4, 1])))
write("swizzle64", edited(lambda k: k["params"][0].update(swizzle="64B")))
version = json.loads(text)
version["version"] = 1
write("version1", json.dumps(version, indent=2))
