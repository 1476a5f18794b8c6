#!/usr/bin/env bash
# Main with wide heads in slices: the whole GPU suite on the H200, the
# transformer rows against PyTorch in the same call, and the step in three
# alternating rounds (benchmarks/h200-2026-12-04-short-sequences/final/final.sh).
# Carry .device/{gl,gpu-env.sh,bin/{bench_transformer,test_suite}.gz}.
OUT=${OUT:-/tmp} TESTS="" bash benchmarks/h200-2026-12-04-short-sequences/final/final.sh
