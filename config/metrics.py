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

# Cold start (`make coldstart-report`, ops/coldstart.py): seconds per phase of a serving pod, from the cluster's
# own record, per service (Variant) and phase; TimeToReady per service and start kind (a new node, or a pod on
# a node that was already Ready). The autoscaler's scale-up period is read from TimeToReady.
SECONDS = "Seconds"
COLD_START_PHASE = "ColdStartPhaseSeconds"
TIME_TO_READY = "TimeToReadySeconds"
PHASE = "Phase"
START_KIND = "Start"
