#!/bin/bash
# Coverage of the CLT interval (F1) for ais and stratified on the study pools.
#   bash benchmarks/interval_study/coverage.sh OUTDIR [REPEATS]
# pools from make_pools.py in /tmp/istudy; pinned to one core.
out=${1:-/tmp/istudy/run}; rep=${2:-200}
mkdir -p "$out"
export XLA_FLAGS=--xla_force_host_platform_device_count=1
for pool in p0.5 p0.1 p0.01 demo; do
  for design in ais stratified; do
    taskset -c 1 bayes-eval simulate /tmp/istudy/$pool.parquet --design $design --repeats $rep --budget 2000 \
      --checkpoints 500,1000,2000 --bayes no --format json > "$out/${pool}_${design}.json"
  done
done
for pool in abt-buy dblp-acm; do
  for design in ais stratified; do
    taskset -c 1 bayes-eval simulate ../shared/data/$pool.parquet --design $design --repeats $rep --budget 2000 \
      --checkpoints 500,1000,2000 --bayes no --format json > "$out/${pool}_${design}.json"
  done
done
