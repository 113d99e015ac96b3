"""The S3 bucket that holds staged checkpoints, compiled NxDI artifacts and benchmark results."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from config.bucket_layout import MANIFEST_KEY_PATTERNS
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
        # A published manifest is never overwritten, enforced by S3 and not only by our client: a write of a
        # manifest must carry If-None-Match (S3 conditional writes; bucket policies can require them with the
        # s3:if-none-match condition key; S3 user guide "Enforce conditional writes"), so it can only create,
        # never replace. Manifests are single PutObjects (multipart and CopyObject cannot carry the header and are
        # denied for these keys). Deleting a prefix on purpose still works.
        self.bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid="ManifestsAreWriteOnce",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["s3:PutObject"],
                resources=[self.bucket.arn_for_objects(key) for key in MANIFEST_KEY_PATTERNS],
                conditions={"Null": {"s3:if-none-match": "true"}},
            )
        )
        acknowledge(
            self.bucket,
            "S1",
            "Private, TLS-only, encrypted bucket written by our own Pod Identity roles; a separate access-log "
            "bucket would outlive teardown. Enable CloudTrail S3 data events if you need object-level audit.",
        )
