#!/bin/bash
# The Bayesian interval under a stochastic oracle (every draw a label; stop 75): coverage and
# width of the Bayesian, CLT and confidence-sequence intervals of F1, beside the estimate's RMSE.
#   bash benchmarks/interval_study/stochastic_oracle.sh OUTDIR [REPEATS] [DESIGNS]
# pools: make_pools.py and misspecified_pool.py write them to /tmp/istudy; the shared pools from ../shared/data.
out=${1:-/tmp/istudy/stochastic}; rep=${2:-200}; designs=${3:-ais}
mkdir -p "$out"
for design in $designs; do
  for pool in /tmp/istudy/p0.5 /tmp/istudy/p0.1 /tmp/istudy/p0.01 demo ../shared/data/abt-buy ../shared/data/dblp-acm \
              /tmp/istudy/dip /tmp/istudy/staircase10; do
    name=$(basename "$pool")
    src=$pool; [ "$pool" != demo ] && src=$pool.parquet
    bayes-eval simulate "$src" --design "$design" --oracle stochastic --repeats "$rep" --budget 2000 \
      --checkpoints 500,1000,2000 --bayes yes --format json > "$out/${name}_${design}.json" || echo "failed: $name $design"
  done
done
