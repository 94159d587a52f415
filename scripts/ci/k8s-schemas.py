#!/usr/bin/python3
"""Writes kubeconform schemas for Kubernetes' own kinds from a swagger.json (the OpenAPI v2 document of
a Kubernetes release, api/openapi-spec/swagger.json of the k8s.io/kubernetes module), as
OUT/KIND-GROUP-VERSION.json (kubeconform's {{.ResourceKind}}{{.KindSuffix}}.json: the group's first
label, none for the core group). Each file is standalone (the definitions it refers to are copied in)
and strict: an object with properties and no additionalProperties gets additionalProperties: false,
IntOrString accepts a string or an integer, Quantity a string or a number, as kubeconform's
published schemas do.

    scripts/ci/k8s-schemas.py SWAGGER_JSON OUT
"""
import json
import os
import sys

LOOSE = {
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {"oneOf": [{"type": "string"}, {"type": "number"}]},
}


def refs(node, out):
    if isinstance(node, dict):
        r = node.get("$ref")
        if isinstance(r, str) and r.startswith("#/definitions/"):
            out.add(r[len("#/definitions/"):])
        for v in node.values():
            refs(v, out)
    elif isinstance(node, list):
        for v in node:
            refs(v, out)


def strict(node):
    if isinstance(node, dict):
        if node.get("type") == "object" and "properties" in node and "additionalProperties" not in node:
            node["additionalProperties"] = False
        for v in node.values():
            strict(v)
    elif isinstance(node, list):
        for v in node:
            strict(v)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        defs = json.load(f)["definitions"]
    defs.update(LOOSE)
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)
    n = 0
    for name, d in defs.items():
        for gvk in d.get("x-kubernetes-group-version-kind", []):
            if name.startswith("io.k8s.apimachinery.pkg.apis.meta.v1."):
                continue  # DeleteOptions, WatchEvent, ...: listed under every group, never a manifest
            group, version, kind = gvk.get("group", ""), gvk["version"], gvk["kind"]
            suffix = f"-{group.split('.')[0]}-{version}" if group else f"-{version}"
            closure, todo = {}, {name}
            while todo:
                t = todo.pop()
                if t in closure or t not in defs:
                    continue
                closure[t] = json.loads(json.dumps(defs[t]))
                found = set()
                refs(closure[t], found)
                todo |= found - closure.keys()
            schema = closure.pop(name)
            schema["definitions"] = closure
            strict(schema)
            with open(os.path.join(out, f"{kind.lower()}{suffix.lower()}.json"), "w") as f:
                json.dump(schema, f)
            n += 1
    print(f"k8s-schemas: {n} schemas in {out}")


if __name__ == "__main__":
    main()
