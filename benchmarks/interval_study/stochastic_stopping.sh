#!/bin/bash
# Stopping on the interval under a stochastic oracle (stop 75): `simulate --stop-width W` with the
# session's rule (--stop-interval auto: read-first, which is bayes-stable where no CLT check passes --
# a stochastic oracle's designs have none), 2000 labels at most.
#   bash benchmarks/interval_study/stochastic_stopping.sh OUTDIR REPEATS "WIDTHS" "POOLS" [DESIGN]
# e.g. bash benchmarks/interval_study/stochastic_stopping.sh /tmp/stop 100 "0.2 0.1" "abt-buy dblp-acm demo"
# (abt-buy and dblp-acm from ../shared/data)
out=${1:-/tmp/istudy/stochastic_stop}; rep=${2:-100}; widths=${3:-"0.2 0.1 0.05"}
pools=${4:-"abt-buy dblp-acm demo"}; design=${5:-ais}
mkdir -p "$out"
for w in $widths; do
  for name in $pools; do
    src=$name; [ "$name" != demo ] && src=../shared/data/$name.parquet
    bayes-eval simulate "$src" --design "$design" --oracle stochastic --repeats "$rep" --budget 2000 \
      --stop-width "$w" --format json > "$out/${name}_${design}_w${w}.json" || echo "failed: $name $w"
  done
done
