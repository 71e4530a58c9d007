#!/usr/bin/env bash
set -euo pipefail
propius fabric aggregate-bench --shards 4 --size-mib 1.0 --updates-per-shard 2 --steps 5 --delay-ms 50.0 --straggler 0 --dtype float32 --seed 0 --out-dir benchmarks/results/aggregate-bench
