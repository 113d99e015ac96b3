"""Copying results to S3: `bench run --upload` (one file) and the sweep's report (every file, and crossover.json
where the endpoint's spill threshold reads it), each through a bounded client (cloud/aws.py)."""

from __future__ import annotations

from pathlib import Path


def content_type(path: Path) -> str:
    return {".json": "application/json", ".png": "image/png", ".md": "text/markdown"}.get(path.suffix, "text/plain")


def url_problem(url: str) -> str | None:
    """Why `bench run --upload` cannot copy to `url`, checked before the run (it used to fail after it)."""
    bucket, _, key = url.removeprefix("s3://").partition("/")
    if not url.startswith("s3://") or not bucket or not key:
        return f"--upload {url!r} is not s3://BUCKET/KEY"
    return None


def prefix_problem(url: str) -> str | None:
    """Why `bench sweep --upload` cannot copy under `url`, checked before the sweep (it used to fail after it)."""
    if not url.startswith("s3://"):
        return f"--upload {url!r} is not s3://BUCKET/PREFIX/"
    if not url.removeprefix("s3://").partition("/")[0]:
        return f"--upload {url!r} names no bucket; write s3://BUCKET/PREFIX/"
    return None


def upload(path: Path, url: str, region: str | None) -> str:
    """Copy a results file to s3://bucket/key, where the in-cluster Job keeps every run: one PutObject through a
    bounded client (cloud/aws.py), so a silent endpoint fails within aws.SILENT_BOUND_S, each attempt shown."""
    from cloud import aws

    if problem := url_problem(url):
        raise ValueError(problem)
    bucket, _, key = url.removeprefix("s3://").partition("/")
    try:
        owner = aws.bucket_owner(bucket, region, f"configure AWS credentials, then upload {path} again")
        aws.s3_client(region, owner).put_object(
            Bucket=bucket, Key=key, Body=path.read_bytes(), ContentType=content_type(path)
        )
    except aws.errors() as err:
        raise aws.failure(f"uploading {path} to {url}", err, f"upload {path} again (the results are there)") from None
    return url


def upload_sweep(source: Path, paths: list[Path], prefix_url: str, region: str | None) -> list[str]:
    """The sweep file and every report file under s3://bucket/prefix/, and crossover.json also at the bucket's
    CROSSOVER_KEY, where the endpoint's spill threshold reads the latest one; each through upload()'s bounded
    client."""
    from config.bucket_layout import CROSSOVER_KEY

    if problem := prefix_problem(prefix_url):
        raise ValueError(problem)
    bucket, _, prefix = prefix_url.removeprefix("s3://").partition("/")
    prefix = prefix if not prefix or prefix.endswith("/") else prefix + "/"
    root = paths[0].parent
    uploads = [(source, prefix + source.name)] + [(p, prefix + str(p.relative_to(root))) for p in paths]
    uploads += [(p, CROSSOVER_KEY) for p in paths if p.name == "crossover.json"]
    return [upload(path, f"s3://{bucket}/{key}", region) for path, key in uploads]
