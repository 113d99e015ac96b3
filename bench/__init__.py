"""Benchmark tooling: streaming client, prompt suites, speculative-decoding metrics, CloudWatch, reports.

Run `python -m bench --help`. Latency is token-weighted so it stays correct when one streamed chunk carries
several tokens, as it does under speculative decoding (bench/README.md).
"""
