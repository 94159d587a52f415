#!/usr/bin/python3
"""Writes a JSON schema for every version of every CustomResourceDefinition in the YAML read from
stdin, as OUT/GROUP/KIND_VERSION.json (kind lower-cased: kubeconform's
{{.Group}}/{{.ResourceKind}}_{{.ResourceAPIVersion}}.json). Objects with properties and neither
additionalProperties nor x-kubernetes-preserve-unknown-fields get additionalProperties: false, so an
unknown field is an error (as kubeconform -strict does for Kubernetes' own kinds).

    helm template ... | scripts/ci/crd-schemas.py OUT
"""
import json
import os
import sys

import yaml


def strict(node):
    if isinstance(node, dict):
        if (node.get("type") == "object" and "properties" in node
                and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")):
            node["additionalProperties"] = False
        for v in node.values():
            strict(v)
    elif isinstance(node, list):
        for v in node:
            strict(v)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    n = 0
    for doc in yaml.safe_load_all(sys.stdin):
        if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
            continue
        spec = doc["spec"]
        group, kind = spec["group"], spec["names"]["kind"].lower()
        for v in spec.get("versions", []):
            schema = (v.get("schema") or {}).get("openAPIV3Schema")
            if not schema:
                continue
            props = schema.setdefault("properties", {})
            props.setdefault("apiVersion", {"type": "string"})
            props.setdefault("kind", {"type": "string"})
            props.setdefault("metadata", {"type": "object"})
            strict(schema)
            os.makedirs(os.path.join(out, group), exist_ok=True)
            with open(os.path.join(out, group, f"{kind}_{v['name']}.json"), "w") as f:
                json.dump(schema, f, indent=1)
            n += 1
    if n == 0:
        sys.exit("crd-schemas: no CustomResourceDefinition with a schema on stdin")
    print(f"crd-schemas: {n} schemas in {out}")


if __name__ == "__main__":
    main()
