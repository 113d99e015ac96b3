"""The benchmark's CloudWatch vocabulary: metric names, units and dimensions. bench/cloudwatch.py writes
them and the dashboard and alarms in stacks/ read them, so both take them from here (and stacks need not
import the benchmark's runtime).

Leaf module: imports nothing of ours.
"""

from __future__ import annotations

# Dimensions of every benchmark metric: the service (profile) and the prompt test case.
VARIANT = "Variant"
TEST_CASE = "TestCase"

# Latencies, raw values in milliseconds (CloudWatch computes the percentiles); ITL is token-weighted.
MILLISECONDS = "Milliseconds"
TTFT = "TTFT"
TPOT = "TPOT"
ITL = "ITL"
E2E = "E2ELatency"
# Per request and per run throughput (output tokens per second), errors, speculative-decoding acceptance.
PER_SECOND = "Count/Second"
COUNT = "Count"
OUTPUT_THROUGHPUT = "OutputTokensPerSecond"
RUN_THROUGHPUT = "RunOutputThroughput"
REQUEST_ERRORS = "RequestErrors"
ACCEPTANCE_RATE = "AcceptanceRate"
MEAN_ACCEPTANCE_LENGTH = "MeanAcceptanceLength"
# `bench sweep`: where speculation stops paying (the lowest load whose p50 TPOT speedup is below the floor), per
# speculative Variant and prompt kind (TestCase `sweep/<kind>`), and the best goodput at the SLOs (TestCase
# `sweep/all`). Published only when the sweep finds them.
CROSSOVER_CONCURRENCY = "SpeculationCrossoverConcurrency"  # unit COUNT (requests in flight)
CROSSOVER_RATE = "SpeculationCrossoverRate"  # unit PER_SECOND (requests per second)
GOODPUT = "Goodput"  # unit PER_SECOND (requests per second within both SLOs)
SWEEP_TEST_CASE_PREFIX = "sweep/"  # no test case name has a slash, so these never meet a case's series
