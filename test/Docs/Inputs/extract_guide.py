"""Writes every block of docs/Authoring.md marked `<!-- guide: NAME -->` to
DIR/NAME, so that the lit test compiles and runs exactly what the guide
shows: extract_guide.py GUIDE DIR"""

import os
import re
import sys

guide, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
blocks = re.findall(r"<!-- guide: (\S+) -->\n```\w*\n(.*?)```", open(guide).read(), re.S)
if not blocks:
    sys.exit(f"extract_guide: no marked blocks in {guide}")
for name, body in blocks:
    with open(os.path.join(out, name), "w") as f:
        f.write(body)
    print(name)
