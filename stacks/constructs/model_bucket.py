"""The S3 bucket that holds staged checkpoints, compiled NxDI artifacts and benchmark results."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_s3 as s3
from constructs import Construct

from stacks.nag import acknowledge


class ModelBucket(Construct):
    """Encrypted, private, TLS-only; emptied and deleted on teardown unless `retain` is set.

    Retaining is a config switch because compiled artifacts take hours to rebuild.
    """

    def __init__(self, scope: Construct, construct_id: str, *, bucket_name: str, retain: bool) -> None:
        super().__init__(scope, construct_id)
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            bucket_name=bucket_name,
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            enforce_ssl=True,
            minimum_tls_version=1.2,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="abort-incomplete-multipart-uploads",
                    abort_incomplete_multipart_upload_after=Duration.days(2),
                )
            ],
            removal_policy=RemovalPolicy.RETAIN if retain else RemovalPolicy.DESTROY,
            auto_delete_objects=not retain,
        )
        acknowledge(
            self.bucket,
            "S1",
            "Private, TLS-only, encrypted bucket written by our own Pod Identity roles; a separate access-log "
            "bucket would outlive teardown. Enable CloudTrail S3 data events if you need object-level audit.",
        )
