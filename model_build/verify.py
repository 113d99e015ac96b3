"""Check a published artifact against its profile: the manifest, then the objects (what S3 reports of them, or
every byte)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from config.bucket_layout import MANIFEST_NAME, artifact_prefix, manifest_key
from model_build.errors import BuildError, build_command
from model_build.plan import BuildPlan
from model_build.publish import read_manifest, unlisted_keys
from model_build.store import S3Store
from serving_pod.manifest import Manifest, mismatches


@dataclass
class VerifyReport:
    source: str  # where the manifest came from
    manifest: Manifest | None
    problems: list[str] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def render(self, plan: BuildPlan, *, deep: bool) -> str:
        if self.ok and self.manifest is not None:
            how = (
                "every byte hashed"
                if deep
                else "sizes, sha256 metadata and S3's ETags and checksums checked; --deep hashes every byte"
            )
            return (
                f"OK: {self.source} matches profile {plan.profile} (digest {plan.digest}): "
                f"{len(self.manifest.files)} files, {self.manifest.total_bytes} bytes ({how})\n"
            )
        lines = [f"FAIL: {self.source} does not match profile {plan.profile} (digest {plan.digest}):"]
        lines += [f"  - {p}" for p in self.problems]
        lines += ["fix:"] + [f"  {f}" for f in dict.fromkeys(self.fixes)]
        return "\n".join(lines) + "\n"


def verify_artifact(
    store: S3Store | None, plan: BuildPlan, *, deep: bool = False, manifest_file: Path | None = None
) -> VerifyReport:
    """Problems as sentences naming the field or file; fixes as commands. `store` may be None with a file."""
    prefix = artifact_prefix(plan.digest)
    rebuild = f"{build_command(plan.profile)}   (or: {plan.commands()['compile']} && {plan.commands()['publish']})"
    if manifest_file is not None:
        try:
            manifest: Manifest | None = Manifest.from_json(manifest_file.read_text())
        except OSError as err:
            raise BuildError(f"--manifest-file {manifest_file} cannot be read ({err.strerror})") from None
        except (ValueError, TypeError, KeyError) as err:
            return VerifyReport(
                str(manifest_file), None, [f"{manifest_file} is not a readable manifest: {err}"], [rebuild]
            )
        report = VerifyReport(str(manifest_file), manifest)
    else:
        assert store is not None
        source = store.url(manifest_key(prefix))
        manifest = read_manifest(store, manifest_key(prefix))
        if manifest is None:
            return VerifyReport(
                source,
                None,
                [f"{MANIFEST_NAME} is missing: the artifact was never published, or its publish did not finish"],
                [rebuild],
            )
        report = VerifyReport(source, manifest)

    for problem in mismatches(manifest, plan.digest, plan.inputs):
        report.problems.append(problem)
        report.fixes.append(rebuild)
    if store is None or report.problems:
        return report  # objects of an artifact built for other inputs are beside the point

    object_problems = (
        store.check_content(prefix, manifest.files) if deep else store.check_present(prefix, manifest.files)
    )
    unlisted = unlisted_keys(store, prefix, manifest)
    if unlisted:
        # Serving mounts the whole prefix: a file the manifest does not list was never checked by anyone.
        report.problems += [f"{key}: not listed in {MANIFEST_NAME} (in {store.url(prefix)})" for key in unlisted]
        report.fixes.append(
            "delete what the manifest does not list: "
            + "; ".join(f"aws s3 rm {store.url(prefix)}{key}" for key in unlisted[:3])
            + ("; ..." if len(unlisted) > 3 else "")
        )
    if object_problems:
        report.problems += [f"{p} (in {store.url(prefix)})" for p in object_problems]
        report.fixes.append(
            f"re-send missing or mismatched objects from the compile output: {plan.commands()['publish']}"
        )
        if deep:
            report.fixes.append(
                f"an object whose bytes are damaged but whose size and metadata look right is not re-sent: delete it "
                f"first (aws s3 rm {store.url(prefix)}<file>), then publish again; or rebuild: {build_command(plan.profile)}"
            )
    return report
