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

# Live vLLM series in the Prometheus workspace: each serving stack's own names are its LIVE_METRICS
# (serving_stacks/contract.py LiveMetrics, the one owner; a profile's are ServingProfile.live_metrics).
VLLM_METRIC_PREFIXES = ("vllm:", "vllm_neuron:")  # what the scraper keeps
# Labels the scrape puts on every vLLM series.
PROFILE_LABEL = "profile"
NAMESPACE_LABEL = "namespace"
POD_LABEL = "pod"
SCRAPE_JOB = "vllm"
# Cold start (`make coldstart-report`, ops/coldstart.py): seconds per phase of a serving pod, from the cluster's
# own record, per service (Variant) and phase; TimeToReady per service and start kind (a new node, or a pod on
# a node that was already Ready). The autoscaler's scale-up period is read from TimeToReady.
SECONDS = "Seconds"
COLD_START_PHASE = "ColdStartPhaseSeconds"
TIME_TO_READY = "TimeToReadySeconds"
PHASE = "Phase"
START_KIND = "Start"
# `bench sweep`: where speculation stops paying (the lowest load whose p50 TPOT speedup is below the floor), per
# speculative Variant and prompt kind (TestCase `sweep/<kind>`), and the best goodput at the SLOs (TestCase
# `sweep/all`). Published only when the sweep finds them.
CROSSOVER_CONCURRENCY = "SpeculationCrossoverConcurrency"  # unit COUNT (requests in flight)
CROSSOVER_RATE = "SpeculationCrossoverRate"  # unit PER_SECOND (requests per second)
GOODPUT = "Goodput"  # unit PER_SECOND (requests per second within both SLOs)
SWEEP_TEST_CASE_PREFIX = "sweep/"  # no test case name has a slash, so these never meet a case's series
