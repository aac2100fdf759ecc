"""Parse a metrics exposition with the PyPI `prometheus-client` parsers (an
implementation independent of the Rust client that wrote it).

    python parse_exposition.py text|openmetrics < exposition

Prints one JSON object: {family name: {"type": ..., "help": ...,
"samples": [[name, labels, value], ...]}}. A parse error exits non-zero
with the parser's message.
"""

import json
import sys

from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families as text_families


def main():
    fmt = sys.argv[1]
    text = sys.stdin.read()
    parse = openmetrics_families if fmt == "openmetrics" else text_families
    out = {}
    for family in parse(text):
        out[family.name] = {
            "type": family.type,
            "help": family.documentation,
            "samples": [[s.name, s.labels, s.value] for s in family.samples],
        }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
