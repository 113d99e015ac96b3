"""Models bucket: private, encrypted, TLS-only, cleans up multipart uploads, deleted unless retained."""

from __future__ import annotations

from aws_cdk.assertions import Match, Template


def test_bucket_is_encrypted_private_and_aborts_incomplete_uploads(synth):
    Template.from_json(synth.template("Models")).has_resource_properties(
        "AWS::S3::Bucket",
        {
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": [{"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
            },
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            },
            "LifecycleConfiguration": {
                "Rules": [Match.object_like({"AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 2}})]
            },
        },
    )


def test_bucket_policy_denies_plain_http(synth):
    Template.from_json(synth.template("Models")).has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Deny",
                                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                                "Action": "s3:*",
                            }
                        )
                    ]
                )
            }
        },
    )


def test_bucket_is_emptied_and_deleted_by_default(synth):
    template = synth.template("Models")
    (bucket,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::S3::Bucket"]
    assert bucket["DeletionPolicy"] == "Delete"
    assert any(r["Type"] == "Custom::S3AutoDeleteObjects" for r in template["Resources"].values())


def test_retention_switch_keeps_the_bucket_and_its_objects(variant_synth):
    template = variant_synth.template("Models")
    (bucket,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::S3::Bucket"]
    assert bucket["DeletionPolicy"] == "Retain" and bucket["UpdateReplacePolicy"] == "Retain"
    assert not any(r["Type"] == "Custom::S3AutoDeleteObjects" for r in template["Resources"].values())


def test_manifests_can_only_be_created_never_replaced(synth):
    """Deny any manifest write without If-None-Match, on the keys model_build really writes."""
    import fnmatch

    from config.bucket_layout import MANIFEST_NAME, artifact_prefix, checkpoint_prefix

    policies = synth.resources("Models", "AWS::S3::BucketPolicy").values()
    statements = [s for p in policies for s in p["Properties"]["PolicyDocument"]["Statement"]]
    (rule,) = [s for s in statements if s.get("Sid") == "ManifestsAreWriteOnce"]
    assert (rule["Effect"], rule["Principal"], rule["Action"]) == ("Deny", {"AWS": "*"}, "s3:PutObject")
    assert rule["Condition"] == {"Null": {"s3:if-none-match": "true"}}
    # each resource is Fn::Join of [<bucket ARN>, "/<key pattern>"]
    patterns = [r["Fn::Join"][1][1].removeprefix("/") for r in rule["Resource"]]
    keys = [artifact_prefix("0" * 16) + MANIFEST_NAME, checkpoint_prefix("Qwen/Qwen3-32B", "a" * 40) + MANIFEST_NAME]
    for key in keys:
        assert any(fnmatch.fnmatchcase(key, pattern) for pattern in patterns), (key, patterns)
