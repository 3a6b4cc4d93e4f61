#!/bin/bash
# The variance tables (estimated vs empirical, stage by stage at the checkpoints).
#   bash benchmarks/interval_study/variance_all.sh OUTDIR [REPEATS]
out=${1:-/tmp/istudy/var}; rep=${2:-200}
mkdir -p "$out"
export XLA_FLAGS=--xla_force_host_platform_device_count=1
for pool in p0.5 p0.1 demo p0.01; do
  for design in ais stratified; do
    taskset -c 1 python benchmarks/interval_study/variance_study.py /tmp/istudy/$pool.parquet --design $design \
      --repeats $rep --json "$out/${pool}_${design}.json" > "$out/${pool}_${design}.md" 2>&1
  done
done
