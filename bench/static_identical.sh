#!/usr/bin/env bash
# Findings and offered fixes of `reslint check --static`, written to OUT_DIR for `cmp` against another build:
#
#   bench/static_identical.sh OUT_DIR [SAMPLE_DIR]
#
# With PYTHONPATH pointing at an export of another commit (`git archive`), the same commands run that build.
# Cases: fixtures/ (--jobs 1 and 2), examples/, and --diff over fixtures/ always; with SAMPLE_DIR holding
# files18.txt / files260.txt / files325.txt (one path a line: transformers' modeling_*.py every 30th, every 10th
# and every 8th file of models/), those samples too. Compare two runs with `cmp A/* B/*` per file
# (`for f in A/*; do cmp "$f" "B/${f##*/}"; done`).
set -u
out=${1:?OUT_DIR}; samples=${2:-}
mkdir -p "$out"
python=${PYTHON:-.venv/bin/python}
run() { name=$1; shift; nice -n 10 "$python" -m reslint check --static --no-cache --exit-zero "$@" >"$out/$name" 2>"$out/$name.err"; echo "$name rc=$?"; }
run fixtures-j1.json --output-format json --jobs 1 fixtures/
run fixtures-j2.json --output-format json --jobs 2 fixtures/
run examples.json --output-format json --jobs 1 examples/
run fixtures.diff --diff --jobs 1 fixtures/
if [ -n "$samples" ]; then
  for sample in files18 files260 files325; do
    [ -f "$samples/$sample.txt" ] || continue
    # shellcheck disable=SC2046
    run "$sample-j1.json" --output-format json --jobs 1 $(cat "$samples/$sample.txt")
  done
  [ -f "$samples/files18.txt" ] && run files18-j2.json --output-format json --jobs 2 $(cat "$samples/files18.txt")
fi
