"""The models bucket, in a stack of its own so it can outlive the cluster when retained."""

from __future__ import annotations

from aws_cdk import Aws, CfnOutput, Stack
from constructs import Construct

from config.schema import DeploymentConfig
from stacks.constructs.model_bucket import ModelBucket


class ModelsStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: DeploymentConfig, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.models = ModelBucket(
            self,
            "Models",
            bucket_name=config.models_bucket_name(Aws.ACCOUNT_ID),
            retain=config.bucket.retain_on_delete,
        )
        self.bucket = self.models.bucket
        CfnOutput(self, "BucketName", value=self.bucket.bucket_name, description="Models bucket")
