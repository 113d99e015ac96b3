"""The programs that run inside the serving pods, beside vLLM: the init check of the mounted artifact
(`check_mounted`, the `verify-artifact` init container) and the start-up guard (`startup_guard`, the vllm
container's command), with the manifest format they read (`manifest`), which model_build writes through.

Standard library only, and of ours only the leaf config.bucket_layout: the files ship as a ConfigMap
(charts/serving_chart.py VERIFY_CODE) and run with the serving image's own python3 (`python3 -S` in the tests).
"""
