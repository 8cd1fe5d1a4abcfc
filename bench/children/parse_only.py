"""report_throughput.py's floor: only parse a log's JSON, line by line (a JSONL log, or a glog
TORCH_TRACE log's JSON metadata), and nothing else.

    python bench/children/parse_only.py LOG jsonl|glog
"""

import sys

import orjson

jsonl = sys.argv[2] == "jsonl"
with open(sys.argv[1], "rb") as f:
    for line in f:
        if jsonl:
            orjson.loads(line)
        elif not line.startswith(b"\t"):  # a glog line: its JSON metadata after the header
            start = line.find(b"{")
            if start >= 0:
                orjson.loads(line[start:])
