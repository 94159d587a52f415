#!/usr/bin/env python3
"""The `patches` suite: checks every JSON patch the mutating webhook produces in the unit tests
with an independent RFC 6902 implementation (Debian's python3-jsonpatch).

Usage: /usr/bin/python3 test/unit/apply_patches.py build/unit_tests

1. Runs the unit tests that exercise /mutate/gameservers with AW_PATCH_CASES_OUT=<tmp>; the test
   helper appends one JSON line per produced patch: {name, route, review, object, patch, expected,
   trusted_users, crd_accepts_allocating} (`expected` = the object after the test's own applier).
2. For each case: the patch must be a list of add/replace/remove ops with string paths, each
   remove/replace must target an existing member, jsonpatch must apply it to `object`, and the
   result must equal `expected`.
3. Idempotence: the unit binary re-runs the mutating decision (AW_REINVOKE_IN/OUT) on the objects
   as patched by jsonpatch, with the same oldObject and a later clock: it must allow them with no
   patch.
Prints one line per failure and a closing "N passed, N failed"; exits non-zero on any failure or
when no case was produced.
"""
import json
import os
import subprocess
import sys
import tempfile

import jsonpatch
import jsonpointer


def run_binary(binary, env_extra, gtest_filter):
    env = dict(os.environ)
    env.update(env_extra)
    proc = subprocess.run([binary, "--gtest_filter=" + gtest_filter, "--gtest_brief=1"],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=600)
    return proc.returncode, proc.stdout


def check_shape(patch, obj):
    """Ops are minimal RFC 6902 that apply to the object as sent."""
    if not isinstance(patch, list) or not patch:
        return "patch is not a non-empty list"
    doc = json.loads(json.dumps(obj))
    for op in patch:
        if not isinstance(op, dict) or op.get("op") not in ("add", "replace", "remove"):
            return "unexpected op %r" % (op,)
        path = op.get("path")
        if not isinstance(path, str) or not path.startswith("/"):
            return "bad path %r" % (path,)
        ptr = jsonpointer.JsonPointer(path)
        parent_parts, last = ptr.parts[:-1], ptr.parts[-1]
        try:
            parent = jsonpointer.JsonPointer.from_parts(parent_parts).resolve(doc)
        except jsonpointer.JsonPointerException:
            return "parent of %s does not exist" % path
        if not isinstance(parent, dict):
            return "parent of %s is not an object" % path
        if op["op"] in ("remove", "replace") and last not in parent:
            return "%s of missing member %s" % (op["op"], path)
        if op["op"] == "add" and parent.get(last) is not None:
            # RFC 6902 allows it, but we promise add only for absent (or null) members.
            return "add over existing member %s (use replace)" % path
        doc = jsonpatch.apply_patch(doc, [op])
    return None


def main():
    if len(sys.argv) != 2:
        print("usage: apply_patches.py UNIT_TEST_BINARY", file=sys.stderr)
        return 2
    binary = os.path.abspath(sys.argv[1])
    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        cases_path = os.path.join(tmp, "cases.jsonl")
        rc, out = run_binary(binary, {"AW_PATCH_CASES_OUT": cases_path},
                             "Mutate*:ValidateOwned.MutateThenValidateChainsPass:Codec.*")
        if rc != 0:
            print(out)
            print("unit tests failed while collecting cases (exit %d)" % rc)
            failed += 1
        cases = []
        if os.path.exists(cases_path):
            with open(cases_path) as f:
                cases = [json.loads(line) for line in f if line.strip()]
        reinvoke = []
        for c in cases:
            name = c["name"]
            err = check_shape(c["patch"], c["object"])
            if err is None:
                try:
                    result = jsonpatch.apply_patch(c["object"], c["patch"])
                except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as e:
                    err = "jsonpatch cannot apply it: %s" % e
            if err is None and result != c["expected"]:
                err = "jsonpatch result differs from the expected object"
            if err is not None:
                failed += 1
                print("FAIL %s: %s\n  patch: %s" % (name, err, json.dumps(c["patch"])))
                continue
            review = c["review"]
            review["request"]["object"] = result
            reinvoke.append({"name": name, "review": review,
                             "trusted_users": c.get("trusted_users", []),
                             "crd_accepts_allocating": c.get("crd_accepts_allocating", True)})
        if reinvoke:
            in_path = os.path.join(tmp, "reinvoke_in.jsonl")
            out_path = os.path.join(tmp, "reinvoke_out.jsonl")
            with open(in_path, "w") as f:
                for r in reinvoke:
                    f.write(json.dumps(r) + "\n")
            rc, out = run_binary(binary, {"AW_REINVOKE_IN": in_path, "AW_REINVOKE_OUT": out_path},
                                 "PatchCases.Reinvoke")
            answers = {}
            if os.path.exists(out_path):
                with open(out_path) as f:
                    for line in f:
                        if line.strip():
                            a = json.loads(line)
                            answers[a["name"]] = a
            if rc != 0:
                print(out)
                print("reinvocation run failed (exit %d)" % rc)
                failed += 1
            for r in reinvoke:
                a = answers.get(r["name"])
                if a is None:
                    failed += 1
                    print("FAIL %s: no reinvocation answer" % r["name"])
                elif a["http_status"] != 200 or not a["allowed"] or a["patch"] != "":
                    failed += 1
                    print("FAIL %s: not idempotent: reinvocation answered %s" % (r["name"], a))
                else:
                    passed += 1
        if not cases:
            print("no patch cases were produced")
            failed += 1
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
