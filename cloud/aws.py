"""AWS plumbing every command and Job shares (cloud/ is shipped to every Job, charts/code_bundle.SHARED_PACKAGES):
bounded boto3 clients (S3's naming the bucket's expected owner on every call), the account lookup, a command's one
HeadBucket, failures as sentences. boto3 is imported lazily: synth does not load it.

botocore's defaults (60 s timeouts, 5 or 10 attempts) leave a command silent for minutes against a silent
endpoint; here a call gives up after ATTEMPTS attempts, within SILENT_BOUND_S, and prints each one.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from config.bucket_layout import models_bucket_account
from config.exit_codes import CommandError

ATTEMPTS = 3  # botocore "standard" retries: the first attempt and two retries
CONNECT_S = 5.0
READ_S = 15.0  # per socket read: S3 answers a part within this once the body is sent, and keeps a long
# CompleteMultipartUpload alive with whitespace; STS, CloudWatch and CloudFormation answer in well under a second
MAX_BACKOFF_S = 1.0 + 2.0  # standard mode waits up to 2^(n-1) s (random jitter) before retry n: 1 s, then 2 s
SILENT_BOUND_S = ATTEMPTS * max(CONNECT_S, READ_S) + MAX_BACKOFF_S
NETWORK_FIX = "check the network path (NAT gateway, VPC endpoint, proxy, AWS_ENDPOINT_URL if set)"


def bounded_config(**extra: Any) -> Any:
    """A botocore Config with the timeouts and attempts above (`extra` adds e.g. max_pool_connections)."""
    from botocore.config import Config

    return Config(
        connect_timeout=CONNECT_S,
        read_timeout=READ_S,
        retries={"mode": "standard", "total_max_attempts": ATTEMPTS},
        **extra,
    )


def client(service: str, region: str | None, *, stream: TextIO | None = None, **extra: Any) -> Any:
    """boto3.client(service) with bounded_config(); each attempt that got no answer is reported on `stream`.
    `region` None: boto3's own lookup (AWS_REGION, the profile). S3 has its own: s3_client."""
    import boto3

    if service == "s3":
        raise ValueError("S3 clients come from cloud.aws.s3_client, which names the bucket owner on every call")
    with _environment_as_sentences():
        made = boto3.client(service, region_name=region, config=bounded_config(**extra))
    announce_retries(made, stream)
    return made


def s3_client(region: str | None, owner: str | None, *, stream: TextIO | None = None, **extra: Any) -> Any:
    """The bounded S3 client, every call of which carries ExpectedBucketOwner=`owner` (x-amz-expected-bucket-owner):
    S3 refuses the call with 403 when another account owns the bucket, so a bucket of our name created elsewhere (after
    ours was deleted, or before it was made) never receives our artifacts or serves us its bytes. Every S3 operation
    we call takes the parameter (botocore's S3 model); the hook fills it where the operation's input has it.
    `owner` None: the caller names the owner on each call itself (the preflight, which learns the account from STS
    inside its deadline, after its clients are made)."""
    import boto3

    with _environment_as_sentences():
        made = boto3.client("s3", region_name=region, config=bounded_config(**extra))
    announce_retries(made, stream)
    if owner is not None:
        expect_owner(made, owner)
    return made


def expect_owner(s3: Any, owner: str) -> None:
    """Fill ExpectedBucketOwner=`owner` into every call of this S3 client whose operation takes it."""

    def name_the_owner(params: dict[str, Any], model: Any, **_: Any) -> None:
        if "ExpectedBucketOwner" in model.input_shape.members:
            params.setdefault("ExpectedBucketOwner", owner)

    s3.meta.events.register("before-parameter-build.s3", name_the_owner)


def bucket_owner(bucket: str, region: str | None, fix: str) -> str:
    """The account that must own `bucket`: the one its name says (the models bucket, config/bucket_layout.py), else
    the account of the credentials in use (STS), since a bucket of ours lives in our account."""
    return models_bucket_account(bucket) or caller_account(region, fix)


ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_")  # botocore's global and per-service endpoint settings


@contextlib.contextmanager
def _environment_as_sentences() -> Iterator[None]:
    """botocore reads the profile, the config files, the credentials and the endpoint settings while it makes a
    client: a problem there is one CommandError naming the variable or file, not a traceback."""
    from botocore.exceptions import ConfigParseError, PartialCredentialsError, ProfileNotFound

    try:
        yield
    except ProfileNotFound as err:
        profile = err.kwargs.get("profile")
        via = next((v for v in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE") if os.environ.get(v) == profile), "the profile")
        raise CommandError(
            f"{via}={profile!r} names no profile in the AWS config or credentials files; pick one that "
            "`aws configure list-profiles` lists, or unset it"
        ) from None
    except ConfigParseError as err:
        raise CommandError(
            f"the AWS config file {err.kwargs.get('path')} cannot be parsed (AWS_CONFIG_FILE, "
            "AWS_SHARED_CREDENTIALS_FILE or ~/.aws); fix its syntax ([profile NAME] sections of key = value lines) or "
            "point the variable at another file"
        ) from None
    except PartialCredentialsError as err:
        raise CommandError(
            f"partial AWS credentials in {err.kwargs.get('provider')}: {err.kwargs.get('cred_var')} is missing; set "
            "it, or unset the other half (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY) to use a profile"
        ) from None
    except ValueError as err:  # botocore.endpoint: "Invalid endpoint: ...", urllib: "Invalid IPv6 URL"
        named = sorted(f"{k}={v!r}" for k, v in os.environ.items() if k.startswith(ENDPOINT_VARIABLES))
        if not named:
            raise
        raise CommandError(
            f"{', '.join(named)} is not a usable endpoint URL ({err}); set it to http(s)://host[:port] or unset it"
        ) from None


def session_client(session: Any, service: str, *, stream: TextIO | None = None) -> Any:
    """The same bounded client from an existing boto3 Session (the teardown sweep shares one)."""
    with _environment_as_sentences():
        made = session.client(service, config=bounded_config())
    announce_retries(made, stream)
    return made


def announce_retries(made: Any, stream: TextIO | None = None) -> None:
    """Print one line per attempt that ended without an answer (timeout, refused, reset), as it happens."""
    out = stream or sys.stderr
    service = made.meta.service_model.service_name

    def on_retry(attempts: int, caught_exception: Exception | None = None, operation: Any = None, **_: Any) -> None:
        if caught_exception is None:
            return
        then = "retrying" if attempts < ATTEMPTS else "giving up"
        name = getattr(operation, "name", "call")
        print(
            f"{service} {name}: no answer from {made.meta.endpoint_url} (attempt {attempts}/{ATTEMPTS}: "
            f"{type(caught_exception).__name__}); {then}",
            file=out,
            flush=True,
        )

    made.meta.events.register(f"needs-retry.{made.meta.service_model.service_id.hyphenize()}", on_retry)


def unanswered(err: BaseException) -> bool:
    """A connection refused, reset or timed out: the endpoint gave no answer at all (after every attempt)."""
    from botocore.exceptions import ConnectionClosedError, ConnectionError, ReadTimeoutError

    return isinstance(err, ConnectionError | ReadTimeoutError | ConnectionClosedError)


def http_status(err: BaseException) -> int | None:
    """The HTTP status of an error AWS answered with (404 also for a bodiless HEAD's "404"/"NotFound")."""
    response = getattr(err, "response", None)
    if not isinstance(response, dict):
        return None
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    if status is None and response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
        return 404
    return status


def error_code(err: BaseException) -> str | None:
    response = getattr(err, "response", None)
    return response.get("Error", {}).get("Code") if isinstance(response, dict) else None


def errors() -> tuple[type[Exception], ...]:
    """What botocore raises: no answer, no credentials, or an error AWS answered with (`except aws.errors()`)."""
    from botocore.exceptions import BotoCoreError, ClientError

    return (BotoCoreError, ClientError)


def failure(action: str, err: BaseException, fix: str) -> CommandError:
    """One sentence for a failed AWS call: what was being done, what AWS said (or that it said nothing), what to do."""
    if unanswered(err):
        return CommandError(
            f"{action}: AWS did not answer ({err}), {ATTEMPTS} attempts of at most {READ_S:g} s each; {NETWORK_FIX}, "
            f"then {fix}"
        )
    if http_status(err) == 403:
        return CommandError(f"{action}: access denied ({err}); use credentials that are allowed to, then {fix}")
    return CommandError(f"{action} failed: {type(err).__name__}: {err}; {fix}")


def caller_account(region: str | None, fix: str) -> str:
    """The account id of the current credentials (it names the models bucket); on failure a CommandError saying why
    and `fix`, what the person should do."""
    try:
        return client("sts", region).get_caller_identity()["Account"]
    except errors() as err:
        raise CommandError(f"cannot tell which AWS account to use ({err}); {fix}") from None


def check_bucket(s3: Any, bucket: str) -> None:
    """The one HeadBucket a command makes before it transfers anything: the bucket exists, these credentials may
    use it, and the endpoint answers (a silent one fails here, within SILENT_BOUND_S, before any hashing)."""
    try:
        s3.head_bucket(Bucket=bucket)
    except errors() as err:
        status = http_status(err)
        if status == 404:
            raise CommandError(
                f"bucket {bucket} does not exist (or is in another account or region); deploy the Models stack "
                "(make deploy) or pass --bucket NAME"
            ) from None
        if status == 403:
            raise CommandError(
                f"access to bucket {bucket} is denied for the current AWS credentials, or another account owns it "
                "(every call names the expected owner); use the deployer role locally, or run in the cluster, where "
                "the Job's Pod Identity role grants it"
            ) from None
        raise failure(f"HeadBucket {bucket}", err, "run the same command again") from None
