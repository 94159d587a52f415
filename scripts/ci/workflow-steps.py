#!/usr/bin/python3
"""Prints one job of a GitHub Actions workflow as JSON for scripts/ci/pr-job-local: its container
image, and its steps in order, each with its name, `run:` script or `uses:` action and `with:`, its
`if:` and the environment a step sees (the workflow's env, then the job's, then the step's).

    scripts/ci/workflow-steps.py WORKFLOW JOB [--drop-line REGEX]

--drop-line removes every line of a `run:` script that matches REGEX (pr-job-local --expect-refusal
removes the safe.directory line this way, to show the job failing without it).
"""
import json
import re
import sys

import yaml


def main():
    args = sys.argv[1:]
    drop = None
    if "--drop-line" in args:
        i = args.index("--drop-line")
        drop = re.compile(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    path, job_name = args
    with open(path) as f:
        wf = yaml.safe_load(f)
    jobs = wf.get("jobs", {})
    if job_name not in jobs:
        sys.exit(f"workflow-steps: {path} has no job {job_name} (jobs: {', '.join(jobs)})")
    job = jobs[job_name]
    container = job.get("container")
    image = container.get("image") if isinstance(container, dict) else container
    base_env = {}
    base_env.update({k: str(v) for k, v in (wf.get("env") or {}).items()})
    base_env.update({k: str(v) for k, v in (job.get("env") or {}).items()})
    steps = []
    dropped = 0
    for i, st in enumerate(job.get("steps", []), 1):
        env = dict(base_env)
        env.update({k: str(v) for k, v in (st.get("env") or {}).items()})
        run = st.get("run")
        if run is not None and drop is not None:
            kept = [line for line in run.splitlines() if not drop.search(line)]
            dropped += len(run.splitlines()) - len(kept)
            run = "\n".join(kept) + "\n"
        steps.append({
            "index": i,
            "name": st.get("name") or (st.get("uses") if run is None else run.splitlines()[0]),
            "run": run,
            "uses": st.get("uses"),
            "with": {k: str(v) for k, v in (st.get("with") or {}).items()},
            "if": str(st.get("if", "")),
            "env": env,
            "shell": st.get("shell"),
        })
    if drop is not None and dropped == 0:
        sys.exit(f"workflow-steps: no line of job {job_name}'s run: scripts matches {drop.pattern}")
    json.dump({"image": image, "timeout": job.get("timeout-minutes"), "steps": steps,
               "dropped": dropped}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
