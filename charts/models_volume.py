"""The models bucket as a read-only Mountpoint for S3 volume (static PV + PVC), one per workload."""

from __future__ import annotations

from cdk8s_plus_34 import k8s
from constructs import Construct

CSI_DRIVER = "s3.csi.aws.com"


class ModelsVolume(Construct):
    """Read-only mount of the whole bucket with pod-level credentials.

    `authenticationSource: pod` makes Mountpoint use the workload's own Pod Identity role, so each
    workload reads only the prefixes its role allows. Content under artifacts/<digest>/ and
    checkpoints/<model>/<revision>/ never changes, so metadata is cached indefinitely and object data
    is cached on local disk.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        namespace: str,
        bucket_name: str,
        region: str,
        cache_gib: int,
    ) -> None:
        super().__init__(scope, construct_id)
        self.claim_name = name
        attributes = {"bucketName": bucket_name, "authenticationSource": "pod"}
        if cache_gib > 0:
            attributes |= {"cache": "emptyDir", "cacheEmptyDirSizeLimit": f"{cache_gib}Gi"}
        self.volume = k8s.KubePersistentVolume(
            self,
            "Volume",
            metadata=k8s.ObjectMeta(name=f"{namespace}-{name}"),
            spec=k8s.PersistentVolumeSpec(
                access_modes=["ReadOnlyMany"],
                capacity={"storage": k8s.Quantity.from_string("1Ti")},  # ignored by the driver, required by k8s
                storage_class_name="",
                persistent_volume_reclaim_policy="Retain",  # deleting the PV never touches the bucket
                claim_ref=k8s.ObjectReference(namespace=namespace, name=name),
                mount_options=["read-only", f"region {region}", "metadata-ttl indefinite"],
                csi=k8s.CsiPersistentVolumeSource(
                    driver=CSI_DRIVER,
                    volume_handle=f"{namespace}-{name}",
                    read_only=True,
                    volume_attributes=attributes,
                ),
            ),
        )
        self.claim = k8s.KubePersistentVolumeClaim(
            self,
            "Claim",
            metadata=k8s.ObjectMeta(name=name, namespace=namespace),
            spec=k8s.PersistentVolumeClaimSpec(
                access_modes=["ReadOnlyMany"],
                storage_class_name="",
                volume_name=f"{namespace}-{name}",
                resources=k8s.VolumeResourceRequirements(requests={"storage": k8s.Quantity.from_string("1Ti")}),
            ),
        )
