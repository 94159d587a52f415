#!/usr/bin/python3
"""Prints docs/install.md's values table of charts/allocating-webhook, one row per top-level value of
values.yaml: its name, its description (the comment block right above the key) and its default.

  charts/hack/values-table.py            print the table (markdown)
  charts/hack/values-table.py --check    exit 1 unless docs/install.md holds exactly this table between
                                         <!-- helm-values --> and <!-- /helm-values --> (so the
                                         table lists every top-level value and none that is gone)
"""
import json
import os
import re
import sys

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VALUES = os.path.join(ROOT, "charts", "allocating-webhook", "values.yaml")
README = os.path.join(ROOT, "docs", "install.md")
BEGIN, END = "<!-- helm-values -->", "<!-- /helm-values -->"


def descriptions(text):
    """Top-level key -> the comment block directly above it (joined into one line)."""
    out, block = {}, []
    for line in text.splitlines():
        if line.startswith("#"):
            block.append(line[1:].strip())
            continue
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*):", line)
        if m:
            out[m.group(1)] = " ".join(block).strip()
        if line.strip() == "" or m:
            block = []
    return out


def default_text(value):
    if isinstance(value, dict) and value:
        return "see values.yaml" if len(json.dumps(value)) > 60 else json.dumps(value)
    return json.dumps(value)


def table():
    with open(VALUES) as f:
        text = f.read()
    values = yaml.safe_load(text)
    desc = descriptions(text)
    rows = ["| value | default | what it sets |", "|---|---|---|"]
    for key, value in values.items():
        d = desc.get(key, "")
        if not d:
            sys.exit(f"values-table: {key} has no comment above it in values.yaml")
        rows.append(f"| `{key}` | `{default_text(value)}` | {d.replace('|', '&#124;').replace('<', '&lt;').replace('>', '&gt;')} |")
    return "\n".join(rows) + "\n"


def main():
    t = table()
    if sys.argv[1:] == ["--check"]:
        with open(README) as f:
            readme = f.read()
        if BEGIN not in readme or END not in readme:
            print(f"values-table: docs/install.md has no {BEGIN} ... {END} block", file=sys.stderr)
            return 1
        got = readme.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"
        if got != t:
            print("values-table: docs/install.md's Helm values table differs from values.yaml; regenerate it with "
                  "charts/hack/values-table.py", file=sys.stderr)
            listed = set(re.findall(r"^\| `([A-Za-z_][A-Za-z0-9_]*)` \|", got, re.M))
            with open(VALUES) as f:
                keys = set(yaml.safe_load(f))
            if keys - listed:
                print(f"values-table: not in docs/install.md: {sorted(keys - listed)}", file=sys.stderr)
            if listed - keys:
                print(f"values-table: in docs/install.md but not in values.yaml: {sorted(listed - keys)}", file=sys.stderr)
            return 1
        print(f"values-table: docs/install.md lists all {t.count(chr(10)) - 2} top-level values")
        return 0
    if sys.argv[1:]:
        sys.exit(__doc__)
    sys.stdout.write(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
