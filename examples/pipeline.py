#!/usr/bin/env python3
"""Fan-out / fan-in: estimate pi by Monte Carlo, from Python.

The same pipeline as pipeline.toml, built with the Python client:

  sample[0..7]  each throws 1,000,000 random points at the unit square and
                leaves "HITS POINTS" in $DROVER_RESULT
  combine       starts once every sample succeeded; the worker hands it their
                results as files in $DROVER_INPUTS; it sums them and leaves
                the estimate in $DROVER_RESULT

With a cluster running (`drover up`), from the repository root:

  PYTHONPATH=python python3 examples/pipeline.py
"""

import os
import sys

try:
    import drover
except ImportError:  # run from a checkout without installing the package
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import drover

SAMPLE = """
awk -v seed="$DROVER_TASK_INDEX" 'BEGIN {
  srand(seed + 1); n = 1000000; hits = 0
  for (i = 0; i < n; i++) { x = rand(); y = rand(); if (x * x + y * y <= 1) hits++ }
  print hits, n
}' > "$DROVER_RESULT"
echo "sample $DROVER_TASK_INDEX: $(cat "$DROVER_RESULT")"
"""

COMBINE = """
ls "$DROVER_INPUTS" | wc -l | awk '{ if ($1 != 8) { print "expected 8 inputs, got " $1 > "/dev/stderr"; exit 1 } }' || exit 1
cat "$DROVER_INPUTS"/* | awk '{ hits += $1; n += $2 }
  END { printf "pi ~ %.5f from %d samples in %d tasks\\n", 4 * hits / n, n, NR }' > "$DROVER_RESULT"
cat "$DROVER_RESULT"
"""


def main() -> int:
    client = drover.Client()  # the access file of `drover up`, or $DROVER_ACCESS
    with client.job("pi") as job:
        samples = job.array(SAMPLE, range(8), name="sample",
                            cpus=1, mem="64MiB", retries=1, timeout="5m")
        combine = job.task(COMBINE, name="combine", after=samples,
                           cpus=1, mem="64MiB", timeout="5m")
    print(f"job {job.id}: {len(job.tasks)} tasks")
    job.wait(progress=True)  # a progress bar when stderr is a terminal
    try:
        print(combine.result().strip())
    except drover.TaskFailed as e:
        print(f"the pipeline failed: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
