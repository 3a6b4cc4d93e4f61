#!/bin/bash
# Stopping on the interval under a stochastic oracle (stop 75): `simulate --stop-width W` with the
# session's rule (--stop-interval auto: read-first, which is bayes-stable where no CLT check passes --
# a stochastic oracle's designs have none) on the shared pools and the demo pool.
#   bash benchmarks/interval_study/stochastic_stopping.sh OUTDIR [REPEATS] [DESIGN]
out=${1:-/tmp/istudy/stochastic_stop}; rep=${2:-100}; design=${3:-ais}
mkdir -p "$out"
for w in 0.05 0.02; do
  for pool in ../shared/data/abt-buy ../shared/data/dblp-acm demo; do
    name=$(basename "$pool"); src=$pool; [ "$pool" != demo ] && src=$pool.parquet
    bayes-eval simulate "$src" --design "$design" --oracle stochastic --repeats "$rep" --budget 2000 \
      --stop-width "$w" --format json > "$out/${name}_${design}_w${w}.json" || echo "failed: $name $w"
  done
done
