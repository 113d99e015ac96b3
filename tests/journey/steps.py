"""The README's flow, step by step, against the local world (tests/journey/world.py): each step runs what a person
runs (`npx cdk synth`, `python -m ops.<driver>`, `python -m bench`, kubectl) with the world's environment from the
journey's output folder, and checks what that person would look at. A step returns the one line it checked, or
raises StepFailed with what broke and the fix.

The config a journey runs is a copy of the given file in the output folder, with the one edit the README asks of
everyone before `make preflight`: `admin_principal_arn` set to a role (created in moto's IAM). The crossover step
edits that copy again, as docs/sweep.md and docs/endpoint.md tell a user to.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import traceback
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from config import DeploymentConfig, load_config
from config.bucket_layout import CROSSOVER_KEY, MANIFEST_NAME, artifact_prefix, checkpoint_prefix
from tests.journey.manifests import Rendered, SynthError, read_synth
from tests.journey.world import MOTO_ACCOUNT, REPO, World

INIT_OK = r"OK: .*? matches profile \S+ \(digest \w+\): (\d+) files"
COMMAND_TIMEOUT_S = 600.0
READY_TIMEOUT_S = 90.0
ADMIN_ROLE = "journey-admin"
# What `make bench` and `make bench-sweep` get as BENCH_ARGS here: seconds, not hours, on the stand-ins.
BENCH_ARGS = ["--requests", "2", "--concurrency", "2", "--warmup", "0", "--max-tokens", "16"]
SWEEP_ARGS = ["--concurrency", "1,4", "--rates", "none", "--repeats", "1", "--requests", "4", "--max-tokens", "16"]
ENDPOINT_ARGS = ["--requests", "2", "--concurrency", "2", "--warmup", "0", "--max-tokens", "16"]
RERUN_ARGS = ["--requests", "1", "--concurrency", "1", "--warmup", "0", "--max-tokens", "8"]
# Preflight checks whose AWS API moto (the version requirements.lock pins) does not implement: GetAWSDefaultServiceQuota
# (service-quotas), DescribeClusterVersions and DescribeAddonVersions (EKS), the EKS AMI's public SSM parameter. Each
# is checked against botocore's Stubber in tests/ops/test_preflight.py; here any answer of theirs is accepted.
MOTO_CANNOT = {
    "trn quota": "Service Quotas GetAWSDefaultServiceQuota",
    "network quotas": "Service Quotas GetAWSDefaultServiceQuota",
    "kubernetes version": "EKS DescribeClusterVersions",
    "add-on versions": "EKS DescribeAddonVersions",
    "neuron AMI": "the public SSM parameter of the EKS Neuron AMI",
    "node price": "the Price List API (pricing GetProducts)",
}


class StepFailed(Exception):
    def __init__(self, broke: str, fix: str) -> None:
        super().__init__(broke)
        self.broke, self.fix = broke, fix


class Todo(Exception):
    """A step that is not built yet: the sentence says what it will check and who fills it."""


@dataclass
class Result:
    step: str
    status: str  # ok, FAIL, TODO, not run
    seconds: float
    text: str
    fix: str = ""

    def line(self) -> str:
        fix = f" fix: {self.fix}" if self.fix else ""
        return f"{self.status:<7} {self.step} ({self.seconds:.1f} s): {self.text}{fix}"


@dataclass
class Step:
    name: str
    run: Callable[[], str]
    needs: tuple[str, ...] = ()


@dataclass
class Journey:
    """One config's journey: `run()` runs every step in order and returns the results."""

    source: Path
    out: Path
    world_dir: Path
    results: list[Result] = field(default_factory=list)
    rendered: Rendered | None = None
    sweep_report: Path | None = None
    profile_logs: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        self.logs = self.out / "logs"
        self.logs.mkdir(exist_ok=True)
        self.config_path = self.out / "config.yaml"
        data = yaml.safe_load(self.source.read_text())
        data["admin_principal_arn"] = f"arn:aws:iam::{MOTO_ACCOUNT}:role/{ADMIN_ROLE}"
        self.config_path.write_text(yaml.safe_dump(data, sort_keys=False))
        self.config: DeploymentConfig = load_config(self.config_path)
        self.ns = self.config.namespace
        self.bucket = self.config.models_bucket_name(MOTO_ACCOUNT)

    # --- the flow ------------------------------------------------------------------------------------------------

    def steps(self) -> list[Step]:
        profiles = [p.name for p in self.config.profiles]
        builds = tuple(f"build {p}" for p in profiles)
        return [
            Step("synth", self.synth),
            Step("profile port", self.profile_port, ("synth",)),
            Step("preflight", self.preflight),
            Step("deploy", self.deploy, ("synth",)),
            Step("stage", self.stage, ("deploy",)),
            *(Step(f"build {p}", lambda p=p: self.build(p), ("stage",)) for p in profiles),
            Step("serve", self.serve, builds),
            Step("bench", self.bench, ("serve",)),
            Step("bench-sweep", self.sweep, ("serve",)),
            Step("bench-sweep args", self.sweep_args, ("deploy",)),
            Step("crossover", self.crossover, ("bench-sweep",)),
            Step("endpoint", self.endpoint, ("serve",)),
            Step("dashboard", self.dashboard, ("serve",)),
            Step("coldstart-report", self.coldstart, ("serve",)),
            Step("teardown-dry-run", self.teardown),
        ]

    def run(self, announce: Callable[[Result], None] = lambda r: None) -> list[Result]:
        with World(self.world_dir, self.config, laptop=(self.out,)) as world:
            self.world = world
            passed: set[str] = set()
            for step in self.steps():
                missing = [n for n in step.needs if n not in passed]
                started = time.monotonic()
                if missing:
                    result = Result(step.name, "not run", 0.0, f"needs {', '.join(missing)}")
                else:
                    result = self._one(step, started)
                    if result.status == "ok":
                        passed.add(step.name)
                self.results.append(result)
                announce(result)
        return self.results

    def _one(self, step: Step, started: float) -> Result:
        try:
            text = step.run()
            return Result(step.name, "ok", time.monotonic() - started, text)
        except StepFailed as err:
            return Result(step.name, "FAIL", time.monotonic() - started, err.broke, err.fix)
        except Todo as err:
            return Result(step.name, "TODO", time.monotonic() - started, str(err))
        except Exception as err:  # the journey's own fault: say so, keep the traceback in its log
            (self.logs / f"{_slug(step.name)}.traceback").write_text(traceback.format_exc())
            return Result(
                step.name,
                "FAIL",
                time.monotonic() - started,
                f"the journey itself failed ({type(err).__name__}: {err})",
                f"see {self.logs / (_slug(step.name) + '.traceback')}",
            )

    # --- running what a person runs -------------------------------------------------------------------------

    def command(
        self, step: str, argv: list[str], *, cwd: Path | None = None, timeout: float = COMMAND_TIMEOUT_S
    ) -> subprocess.CompletedProcess[str]:
        """Run argv with the world's environment (cwd: the output folder); its output goes to logs/<step>.log."""
        log = self.logs / f"{_slug(step)}.log"
        started = time.monotonic()
        try:
            done = subprocess.run(
                argv, cwd=cwd or self.out, env=self.world.env(), text=True, capture_output=True, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            raise StepFailed(f"`{_shown(argv)}` did not end within {timeout:g} s", f"see {log}") from None
        with log.open("a") as f:
            f.write(f"$ {_shown(argv)}   # exit {done.returncode} after {time.monotonic() - started:.1f} s\n")
            f.write(done.stdout + done.stderr + "\n")
        return done

    def ops(self, step: str, module: str, *args: str) -> subprocess.CompletedProcess[str]:
        return self.command(step, [sys.executable, "-m", module, *args])

    def expect_ok(self, step: str, done: subprocess.CompletedProcess[str], fix: str) -> None:
        if done.returncode != 0:
            said = done.stdout + done.stderr
            broke = f"`{_shown(done.args)}` exited {done.returncode}: {_last_words(said)}"
            job = re.search(r"job/([\w.-]+) failed", said)
            if job:
                log = self.job_log(job[1])
                missing = re.search(r"ModuleNotFoundError: No module named '([\w.]+)'", log)
                if missing:
                    raise StepFailed(
                        f"job/{job[1]} failed in its pod: its shipped code imports {missing[1]}, which its archive "
                        f"lacks (ModuleNotFoundError; {_last_words(log, 1)})",
                        f"ship {missing[1].replace('.', '/')}.py in the Job's code archive (the file lists in "
                        "charts/jobs/*.py, e.g. bench_code_files), or do not import it there",
                    )
                broke += f"; its pod's log ends: {_last_words(log)}"
            raise StepFailed(broke, fix)

    def job_log(self, job: str) -> str:
        code, out, err = self.world.cluster.kubectl(["-n", self.ns, "logs", f"job/{job}"])
        return out if code == 0 else err

    # --- synth -----------------------------------------------------------------------------------------------

    def render(self, step: str, folder: Path) -> Rendered:
        """`make synth CONFIG=<copy>` into `folder` (cdk.out and dist), as the Makefile runs it."""
        shutil.rmtree(folder, ignore_errors=True)
        cdk_out, dist = folder / "cdk.out", folder / "dist"
        npx = ["npx", "--no-install", "cdk", "synth", "--quiet", "-c", f"config={self.config_path}", "--no-notices"]
        done = self.command(step, [*npx, "-c", f"dist={dist}", "--output", str(cdk_out)], cwd=REPO)
        if done.returncode != 0:
            said = [line for line in (done.stdout + done.stderr).splitlines() if "Subprocess exited" not in line]
            raise StepFailed(
                f"make synth exited {done.returncode}: {_last_words(chr(10).join(said))}",
                f"read the sentence and fix {self.config_path.name}, or the code it names",
            )
        report = self.command(
            step, [sys.executable, "-m", "tools.synth_report", "--out", str(cdk_out), "--dist", str(dist)], cwd=REPO
        )
        self.expect_ok(step, report, "tools/synth_report.py refused the cloud assembly")
        try:
            return read_synth(cdk_out, dist, account=MOTO_ACCOUNT, region=self.config.region)
        except SynthError as err:
            raise StepFailed(str(err), "the synth output is incomplete: run make synth and read its output") from None

    def synth(self) -> str:
        self.rendered = self.render("synth", self.world_dir / "synth")
        r = self.rendered
        for p in self.config.profiles:
            r.one("Deployment", p.name)
            if self.config.scaling.enabled:
                r.one("ScaledObject", p.name)
        from_dist = len([o for o in yaml.safe_load_all((r.dist / "serving.yaml").read_text()) if o])
        return (
            f"{len(r.templates)} templates; {len(r.objects)} Kubernetes objects `cdk deploy` applies ({from_dist} of "
            f"them in dist/serving.yaml); a Deployment{' and ScaledObject' if self.config.scaling.enabled else ''} per "
            f"profile ({', '.join(p.name for p in self.config.profiles)})"
        )

    def profile_port(self) -> str:
        """Issue 35 finding 4: a profile on the port its own metrics sidecar listens on must be refused when the
        config loads (the dist/ writer, `python -m charts`, loads it as make synth does), not render a pod whose two
        containers collide."""
        assert self.rendered is not None
        profile = self.config.profiles[0].name
        ports = [
            (c["name"], p["containerPort"]) for c in _containers(self.rendered, profile) for p in c.get("ports", [])
        ]
        taken = next((port for name, port in ports if name != "vllm"), None)
        if taken is None:
            return f"the {profile} pod has no port besides vLLM's: nothing to collide with"
        data = yaml.safe_load(self.config_path.read_text())
        data["serving"]["port"] = taken
        copy = self.world_dir / "port-config.yaml"
        copy.write_text(yaml.safe_dump(data, sort_keys=False))
        done = self.ops("profile port", "charts", "--config", str(copy), "--out", str(self.world_dir / "port-dist"))
        if done.returncode == 2 and str(taken) in done.stderr:
            return f"serving.port {taken} (the metrics sidecar's) is refused when the config loads: {_last_words(done.stderr, 1)}"
        if done.returncode != 0:
            raise StepFailed(
                f"`python -m charts` with serving.port {taken} failed otherwise: {_last_words(done.stdout + done.stderr)}",
                "see its log",
            )
        rendered = [o for o in yaml.safe_load_all((self.world_dir / "port-dist" / "serving.yaml").read_text()) if o]
        deploy = next(o for o in rendered if o["kind"] == "Deployment" and o["metadata"]["name"] == profile)
        listeners = [
            (c["name"], p["containerPort"])
            for c in deploy["spec"]["template"]["spec"]["containers"]
            for p in c.get("ports", [])
        ]
        clash = sorted(name for name, port in listeners if port == taken)
        if len(clash) > 1:
            raise StepFailed(
                f"serving.port {taken} validated, and the rendered {profile} pod has {' and '.join(clash)} both listening on "
                f"{taken}: one of them cannot bind, the pod never serves",
                "one port vocabulary (a config leaf naming every port a pod uses) that the config rules check each "
                "profile port against (issue 35, finding 4)",
            )
        return f"serving.port {taken} renders without a collision ({listeners})"

    # --- preflight --------------------------------------------------------------------------------------------

    def preflight(self) -> str:
        iam = self.world.boto("iam")
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"AWS": f"arn:aws:iam::{MOTO_ACCOUNT}:root"},
                    "Action": "sts:AssumeRole",
                }
            ],
        }
        iam.create_role(RoleName=ADMIN_ROLE, AssumeRolePolicyDocument=json.dumps(trust))
        done = self.ops("preflight", "ops.preflight", "--config", str(self.config_path))
        results = {}
        for line in done.stdout.splitlines():
            m = re.match(r"^(ok|FAIL|skipped)\s+([^:]+): (.*)$", line)
            if m:
                results[m[2]] = (m[1], m[3])
        if not results:
            raise StepFailed(
                f"the preflight printed no check: {_last_words(done.stdout + done.stderr)}",
                "run make preflight and read it",
            )
        wrong = {k: v for k, v in results.items() if k not in MOTO_CANNOT and v[0] == "FAIL"}
        if wrong:
            name, (_, text) = next(iter(wrong.items()))
            raise StepFailed(f"preflight check {name!r} failed against moto: {text}", "fix what the sentence names")
        answered = [k for k in results if k not in MOTO_CANNOT]
        gaps = sorted({MOTO_CANNOT[k] for k in results if k in MOTO_CANNOT})
        return (
            f"{len(answered)} checks ok or skipped against moto and the loopback Hugging Face ({', '.join(answered)}); "
            f"{len(results) - len(answered)} need APIs moto lacks ({'; '.join(gaps)}): covered with Stubber in "
            "tests/ops/test_preflight.py"
        )

    # --- deploy -----------------------------------------------------------------------------------------------

    def deploy(self) -> str:
        """What `make deploy` leaves, without CloudFormation (moto cannot create EKS): the bucket as the Models
        stack declares it, and every object the Workloads stack applies, in the fake cluster."""
        assert self.rendered is not None
        bucket = self._bucket_from_template()
        s3 = self.world.boto("s3")
        s3.create_bucket(Bucket=bucket["name"], CreateBucketConfiguration={"LocationConstraint": self.config.region})
        s3.put_bucket_tagging(Bucket=bucket["name"], Tagging={"TagSet": bucket["tags"]})
        if bucket["name"] != self.bucket:
            raise StepFailed(
                f"the Models stack names bucket {bucket['name']}, the config {self.bucket}",
                "make the Models stack use config.models_bucket_name",
            )
        for obj in self.rendered.objects:
            self.world.cluster.apply_object(obj, self.ns)
        waiting = self._wait(lambda: self._init_failures(), "every serving pod's init check to run")
        return (
            f"bucket {self.bucket} as the Models template declares it; {len(self.rendered.objects)} objects applied; "
            f"before any build each serving pod stops in its init check: {'; '.join(waiting)}"
        )

    def _bucket_from_template(self) -> dict[str, Any]:
        from tests.journey.manifests import resolve

        assert self.rendered is not None
        (res,) = [r for r in self.rendered.template("Models")["Resources"].values() if r["Type"] == "AWS::S3::Bucket"]
        props = resolve(res["Properties"], MOTO_ACCOUNT, self.config.region)
        return {"name": props["BucketName"], "tags": props.get("Tags", [])}

    def _init_failures(self) -> list[str] | None:
        out = []
        for p in self.config.profiles:
            pods = self._pods(p.name)
            logs = [self._init_log(pod) for pod in pods]
            hit = [text for text in logs if "FAIL: no manifest.json" in text and f"make build PROFILE={p.name}" in text]
            if not hit:
                return None
            out.append(f"{p.name}: `FAIL: no manifest.json ... fix: make build PROFILE={p.name}`")
        return out

    # --- stage and build -----------------------------------------------------------------------------------

    def stage(self) -> str:
        done = self.ops("stage", "ops.stage_checkpoints", "--apply", "--config", str(self.config_path))
        self.expect_ok("stage", done, f"see `kubectl -n {self.ns} logs job/<stage job>` in {self.logs / 'stage.log'}")
        s3 = self.world.boto("s3")
        staged = []
        for key in self.config.models_in_use():
            model = self.config.models[key]
            manifest = checkpoint_prefix(model.hf_id, model.revision) + MANIFEST_NAME
            files = json.loads(s3.get_object(Bucket=self.bucket, Key=manifest)["Body"].read())["files"]
            staged.append(f"{model.hf_id} ({len(files)} files)")
        jobs = [
            j["metadata"]["name"]
            for j in self.world.cluster.list("Job", self.ns)
            if j["metadata"]["name"].startswith("stage-")
        ]
        return f"{', '.join(jobs)} ran the shipped archives and config.yaml: staged {', '.join(staged)}, manifest last"

    def build(self, profile: str) -> str:
        from model_build.digest import profile_digest

        step = f"build {profile}"
        calls_before = len(self.world.cluster.calls)
        done = self.ops(step, "ops.build_artifact", profile, "--apply", "--config", str(self.config_path))
        self.expect_ok(step, done, f"see {self.logs / (_slug(step) + '.log')} and the build Job's log there")
        calls = [
            c[:-1] if c and c[-1].startswith("--request-timeout") else c
            for c in self.world.cluster.calls[calls_before:]
        ]
        verbs = [c[2] if len(c) > 2 else "" for c in calls]
        if self.config.scaling.enabled:
            pause = next(
                (
                    i
                    for i, c in enumerate(calls)
                    if c[2:4] == ["annotate", f"scaledobject/{profile}"] and c[4].endswith("=0")
                ),
                None,
            )
            resume = next(
                (
                    i
                    for i, c in enumerate(calls)
                    if c[2:4] == ["annotate", f"scaledobject/{profile}"] and c[4].endswith("-")
                ),
                None,
            )
            apply = verbs.index("apply") if "apply" in verbs else None
            gone = [i for i, c in enumerate(calls) if c[2:4] == ["get", "pods"]]
            if (
                None in (pause, resume, apply)
                or not gone
                or not (pause < gone[-1] < apply < resume)
                or "scale" in verbs
            ):
                raise StepFailed(
                    f"make build did not pause scaledobject/{profile}, wait for its pods, apply the Job and resume in that order (kubectl calls: {[' '.join(c[2:5]) for c in calls]})",
                    "ops/out_of_service.py must own taking the profile out of service",
                )
        digest = profile_digest(self.config, self.config.profile(profile))
        manifest = json.loads(
            self.world.boto("s3")
            .get_object(Bucket=self.bucket, Key=artifact_prefix(digest) + MANIFEST_NAME)["Body"]
            .read()
        )
        return (
            f"paused scaledobject/{profile} at 0, waited {len([c for c in calls if c[2:4] == ['get', 'pods']])} polls "
            f"until its pods were gone, ran job/build-{profile}-{digest[:12]}, resumed it; artifacts/{digest}/ "
            f"published ({len(manifest['files'])} files, manifest last)"
        )

    # --- serving ----------------------------------------------------------------------------------------------

    def serve(self) -> str:
        """Each profile's pod Ready behind its Service: the init check passed on the built artifact (and the start-up
        guard saw vLLM serve without compiling, where the Deployment runs vLLM under it), the endpoint's Envoy Ready."""

        def ready() -> list[str] | None:
            out = []
            for p in self.config.profiles:
                pods = [pod for pod in self._pods(p.name) if _ready(pod)]
                if not pods:
                    return None
                checked = re.search(INIT_OK, self._init_log(pods[0]))
                guarded = any("startup_guard" in " ".join(c.get("command", [])) for c in pods[0]["spec"]["containers"])
                guard_ok = "startup-guard: OK" in self._log(pods[0], "vllm")
                if not checked or (guarded and not guard_ok):
                    return None
                out.append(f"{p.name} (init check: {checked[1]} files match{'; start-up guard OK' if guarded else ''})")
            endpoint = [
                pod
                for pod in self.world.cluster.list("Pod", self.ns)
                if pod["metadata"]["name"].startswith("endpoint-") and _ready(pod)
            ]
            return out if endpoint else None

        lines = self._wait(ready, "every serving pod and the endpoint to be Ready")
        models = []
        for p in self.config.profiles:
            service = self.world.cluster.get("Service", self.ns, p.name)
            assert service is not None
            with urllib.request.urlopen(f"http://{service['spec']['clusterIP']}:{p.port}/v1/models", timeout=5) as r:
                models.append(json.loads(r.read())["data"][0]["id"])
        return f"Ready: {'; '.join(lines)}; endpoint Ready; /v1/models through each Service: {', '.join(sorted(set(models)))}"

    # --- benchmarks -------------------------------------------------------------------------------------------

    def bench(self) -> str:
        done = self.ops("bench", "ops.run_benchmark", "--apply", "--config", str(self.config_path), "--", *BENCH_ARGS)
        self.expect_ok("bench", done, f"see {self.logs / 'bench.log'}")
        results = _result_path(done.stdout, self.out)
        data = json.loads(results.read_text())
        report = results.with_suffix("")
        metrics = self.world.boto("cloudwatch").list_metrics(Namespace=self.config.observability.metrics_namespace)[
            "Metrics"
        ]
        s3_key = f"results/{results.name}"
        self.world.boto("s3").head_object(Bucket=self.bucket, Key=s3_key)
        return (
            f"job/bench ran `bench run` against {len(self.config.profiles)} Services: {_summary(data)}; report "
            f"{report.relative_to(self.out)}/ ({', '.join(sorted(p.name for p in report.iterdir()))}); s3://{self.bucket}/{s3_key}; "
            f"{len(metrics)} CloudWatch metrics in {self.config.observability.metrics_namespace}"
        )

    def sweep(self) -> str:
        done = self.ops(
            "bench-sweep",
            "ops.run_benchmark",
            "--apply",
            "--sweep",
            "--config",
            str(self.config_path),
            "--",
            *SWEEP_ARGS,
        )
        self.expect_ok("bench-sweep", done, f"see {self.logs / 'bench-sweep.log'}")
        results = _result_path(done.stdout, self.out)
        self.sweep_report = results.with_suffix("")
        crossover = json.loads(self.world.boto("s3").get_object(Bucket=self.bucket, Key=CROSSOVER_KEY)["Body"].read())
        plots = sorted(p.name for p in self.sweep_report.glob("*.png"))
        if not plots:
            raise StepFailed(
                f"the sweep report {self.sweep_report} has no plots", "make bench-sweep draws them locally"
            )
        entries = [
            f"{c['variant']}/{c['kind']}: crossover {c['crossover']}, last paying {c['last_paying']}"
            for c in crossover["crossovers"]
        ]
        return f"s3://{self.bucket}/{CROSSOVER_KEY} ({'; '.join(entries)}); report and {', '.join(plots)} in {self.sweep_report.relative_to(self.out)}/"

    def sweep_args(self) -> str:
        """Issue 35 finding 3: BENCH_ARGS the Job's `bench sweep` refuses (a budget on the full grid) must be refused
        by `make bench-sweep`'s local check, before any Job is applied, not inside the pod."""
        bad = ["--grid", "full", "--budget-minutes", "30"]
        calls_before = len(self.world.cluster.calls)
        done = self.ops(
            "bench-sweep args", "ops.run_benchmark", "--apply", "--sweep", "--config", str(self.config_path), "--", *bad
        )
        applied = [c for c in self.world.cluster.calls[calls_before:] if "apply" in c]
        if done.returncode == 2 and not applied and "--budget-minutes" in done.stderr:
            return f"BENCH_ARGS {' '.join(bad)!r} refused before any Job: {_last_words(done.stderr, 1)}"
        job = re.search(r"job/([\w.-]+) failed", done.stdout + done.stderr)
        said = _last_words(self.job_log(job[1]), 1) if job else _last_words(done.stdout + done.stderr)
        raise StepFailed(
            f"BENCH_ARGS {' '.join(bad)!r} passed make bench-sweep's local check (exit {done.returncode}, "
            f"{len(applied)} Job applied) and was refused only in the pod: {said}",
            "run the sweep command's own checks (its --budget-minutes/--grid refusal, bench/commands/sweep.py) in "
            "ops/run_benchmark.py bench_args_problem before the Job is applied (issue 35, finding 3)",
        )

    # --- the crossover, fed back ---------------------------------------------------------------------------

    def crossover(self) -> str:
        """docs/sweep.md and docs/endpoint.md: take the sweep's crossover.json, set endpoint.crossover_file, deploy.
        The file goes next to the config copy and is named relative to it; weights give a speculative arm traffic,
        so the endpoint renders its spill threshold (without weights nothing spills). When the step fails, the
        config copy is put back, so the later steps check their own part."""
        before = self.config_path.read_text()
        try:
            return self._crossover()
        except BaseException:
            self.config_path.write_text(before)
            raise

    def _crossover(self) -> str:
        source = self.world.boto("s3").get_object(Bucket=self.bucket, Key=CROSSOVER_KEY)["Body"].read()
        (self.out / "crossover.json").write_bytes(source)
        data = yaml.safe_load(self.config_path.read_text())
        arm = next(p.name for p in self.config.profiles if p.speculative)
        data.setdefault("endpoint", {})["crossover_file"] = "crossover.json"
        data["endpoint"]["weights"] = {self.config.baseline_profile.name: 50, arm: 50}
        self.config_path.write_text(yaml.safe_dump(data, sort_keys=False))
        try:
            rendered = self.render("crossover", self.world_dir / "synth-crossover")
        except StepFailed as err:
            raise StepFailed(
                f"with endpoint.crossover_file: crossover.json next to the config, make synth refused it: {err.broke}",
                "resolve endpoint.crossover_file relative to the config file when the config loads (config/loader.py "
                "_fold_crossover) and ship the spill thresholds, not the path, in config.yaml (issue 35, What to "
                "build 2)",
            ) from None
        thresholds = self._spill_thresholds(rendered)
        expected = {arm: _expected_threshold(json.loads(source), arm, self.config.profile(arm).max_num_seqs)}
        if thresholds != expected:
            raise StepFailed(
                f"the endpoint renders spill thresholds {thresholds}; crossover.json and max_num_seqs give {expected}",
                "charts/envoy_bootstrap.py spill_thresholds and config/crossover.py paying_per_replica",
            )
        for obj in rendered.objects:
            self.world.cluster.apply_object(obj, self.ns)
        shipped = yaml.safe_load(rendered.one("ConfigMap", "trn-specdec-config")["data"]["config.yaml"])
        done = self.ops(
            "crossover", "ops.run_benchmark", "--apply", "--config", str(self.config_path), "--", *RERUN_ARGS
        )
        if done.returncode != 0:
            job = re.search(r"job/([\w.-]+) failed", done.stdout + done.stderr)
            said = _last_words(self.job_log(job[1]) if job else done.stdout + done.stderr)
            raise StepFailed(
                f"the benchmark Job with the new config.yaml (endpoint.crossover_file="
                f"{shipped['endpoint'].get('crossover_file')!r}) failed in its pod: {said}",
                "the config.yaml the Jobs get must load in the pod: resolve the crossover into spill thresholds before "
                "anything dumps the config (charts/code_bundle.py ConfigFile), issue 35 What to build 2",
            )
        self.config = load_config(self.config_path)
        self.rendered = rendered
        return (
            f"crossover.json next to the config, endpoint.crossover_file set (weights 50/50 to {arm}): make synth "
            f"rendered the endpoint spilling {arm} above {thresholds[arm]} in flight per replica (crossover.json, else "
            "max_num_seqs); the objects applied again; a bench Job loaded the new config.yaml in its pod"
        )

    def _spill_thresholds(self, rendered: Rendered) -> dict[str, int]:
        """Per replica, what each capped cluster admits: its max_requests is threshold x the profile's configured
        replicas (charts/envoy_bootstrap.py cap)."""
        bootstrap = yaml.safe_load(rendered.one("ConfigMap", "endpoint-envoy")["data"]["envoy.yaml"])
        config = load_config(self.config_path)
        return {
            name: c["circuit_breakers"]["thresholds"][0]["max_requests"] // max(config.profile(name).replicas, 1)
            for c in bootstrap["static_resources"]["clusters"]
            if (name := c["name"].removesuffix("-capped")) != c["name"]
        }

    # --- the endpoint -------------------------------------------------------------------------------------------

    def endpoint(self) -> str:
        """docs/endpoint.md, Use: port-forward svc/endpoint, then bench through it with --pick-arm, and sessions
        without the override header answered by an arm the weights name."""
        from tests.ports import free_port

        self._wait(self._rolled_out("endpoint"), "the endpoint's Deployment to roll out its current template")
        local = free_port()
        forward = subprocess.Popen(
            ["kubectl", "-n", self.ns, "port-forward", "svc/endpoint", f"{local}:{self.config.endpoint.port}"],
            env=self.world.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        try:
            assert forward.stdout is not None
            said = forward.stdout.readline()
            if "Forwarding from" not in said:
                raise StepFailed(f"kubectl port-forward svc/endpoint said {said!r}", "see the fake kubectl")
            url = f"http://127.0.0.1:{local}"
            picked = self._arms(url, {p.name: {"x-trn-specdec-variant": p.name} for p in self.config.profiles})
            wrong = {k: v for k, v in picked.items() if v != {k}}
            if wrong:
                raise StepFailed(
                    f"x-trn-specdec-variant did not pick the arm: {wrong}", "charts/envoy_bootstrap.py routes"
                )
            weighted = self._arms(url, {f"session-{i}": {"x-session-id": f"session-{i}"} for i in range(8)})
            arms = set().union(*weighted.values())
            allowed = set(self.config.endpoint.weights) or {self.config.baseline_profile.name}
            if not arms <= allowed:
                raise StepFailed(
                    f"weighted sessions were answered by {arms}, the weights name {allowed}",
                    "charts/envoy_bootstrap.py weights",
                )
            endpoints = [a for p in self.config.profiles for a in ("--endpoint", f"{p.name}={url}")]
            out = self.out / "endpoint-bench.json"
            done = self.command(
                "endpoint",
                [sys.executable, "-m", "bench", "run", *endpoints, "--pick-arm", "--config", str(self.config_path),
                 "--out", str(out), "--overwrite", *ENDPOINT_ARGS],
            )  # fmt: skip
            self.expect_ok("endpoint", done, f"see {self.logs / 'endpoint.log'}")
            data = json.loads(out.read_text())
        finally:
            forward.terminate()
            forward.wait(timeout=10)
        return (
            f"kubectl port-forward svc/endpoint, Envoy 1.40 on the rendered bootstrap: x-trn-specdec-variant picks each "
            f"arm ({', '.join(sorted(picked))}); 8 sessions answered by {', '.join(sorted(arms))}; bench run --pick-arm "
            f"through it: {_summary(data)} ({out.name})"
        )

    def _arms(self, url: str, requests: dict[str, dict[str, str]]) -> dict[str, set[str]]:
        body = json.dumps(
            {"model": self.config.models[self.config.profiles[0].target].hf_id, "prompt": "hello", "max_tokens": 2}
        ).encode()
        seen: dict[str, set[str]] = {}
        for name, headers in requests.items():
            request = urllib.request.Request(
                url + "/v1/completions", data=body, headers={"content-type": "application/json", **headers}
            )
            with urllib.request.urlopen(request, timeout=10) as r:  # the port-forward on loopback
                r.read()
                seen.setdefault(name, set()).add(r.headers.get("x-trn-specdec-arm", "<none>"))
        return seen

    # --- what the lead fills ---------------------------------------------------------------------------------

    def dashboard(self) -> str:
        """docs/dashboard.md: every live-dashboard panel, annotation, alert rule and KEDA trigger asked of a real
        Prometheus (2.42) that scrapes the running pods through the rendered scrape configuration and holds the
        rendered alert rules (tests/journey/metrics.py says what differs from AMP). Each panel has data, or is a text
        panel that says why its stack cannot report it; the panels' last minute is drawn as dashboard.png."""
        from tests.journey import metrics

        assert self.rendered is not None
        pods = self.world.cluster.list("Pod", self.ns)
        serving = {p.name: self._pods(p.name) for p in self.config.profiles}
        empty = [name for name, found in serving.items() if not found]
        if empty:
            raise StepFailed(f"no running pod of {', '.join(empty)} to scrape", "see the serve step")
        urls = [f"http://{pod['status']['podIP']}:{p.port}" for p in self.config.profiles for pod in serving[p.name]]
        endpoint = [pod for pod in pods if pod["metadata"]["name"].startswith("endpoint-") and "podIP" in pod["status"]]
        routers = [f"http://{pod['status']['podIP']}:{self.config.endpoint.port}" for pod in endpoint]
        model = self.config.models[self.config.profiles[0].target].hf_id
        try:
            with metrics.prometheus_on(self.rendered, pods, self.world_dir / "prometheus") as prom:
                metrics.drive(urls, model, endpoints=routers)
                # Scrapes and rule evaluations every second; on a loaded machine a scrape can lag, so the queries are
                # asked again until they all have data or 20 s have passed (then the last answer is the failure).
                deadline = time.monotonic() + 20.0
                while True:
                    time.sleep(2.0)
                    try:
                        result = metrics.evaluate(
                            prom, self.rendered, self.ns, self.world.boto("cloudwatch"), self.out / "dashboard.png"
                        )
                        break
                    except metrics.MetricsFailed:
                        if time.monotonic() > deadline:
                            raise
        except metrics.MetricsFailed as err:
            raise StepFailed(
                str(err), "the queries must read the series the profile's stack serves (serving_stacks LIVE_METRICS)"
            ) from None
        return (
            f"Prometheus 2.42 scraped {len(pods)} pods through the rendered scrape config: {result.panels} panel queries "
            f"with data, {result.text_panels} text panels saying why their stack cannot report, {result.annotations} "
            f"annotations evaluated, {result.rules} alert rules loaded and healthy (each series they read served, but "
            f"{', '.join(metrics.CONTROL_PLANE_SERIES)}: EKS control plane), {result.triggers} KEDA queries with one "
            f"value, {result.cloudwatch} CloudWatch series in moto; {result.png.name}"
        )

    # --- cold start -----------------------------------------------------------------------------------------

    def coldstart(self) -> str:
        done = self.ops(
            "coldstart-report",
            "ops.coldstart_report",
            "--config",
            str(self.config_path),
            "--out",
            "coldstart",
            "--publish",
        )
        self.expect_ok("coldstart-report", done, f"see {self.logs / 'coldstart-report.log'}")
        table = [line for line in done.stdout.splitlines() if line.startswith("|") and "---" not in line][1:]
        ready = [row for row in table if row.rstrip(" |").endswith("Ready") and "not Ready" not in row]
        serving = [pod for p in self.config.profiles for pod in self._pods(p.name)]
        if len(ready) < len(serving):
            raise StepFailed(
                f"the report shows {len(ready)} Ready pods of {len(serving)} serving: {table}", "ops/coldstart.py"
            )
        pngs = sorted((self.out / "coldstart").glob("*.png"))
        metrics = self.world.boto("cloudwatch").list_metrics(
            Namespace=self.config.observability.metrics_namespace, MetricName="TimeToReadySeconds"
        )["Metrics"]
        if not pngs or not metrics:
            raise StepFailed(
                f"no timeline PNG ({pngs}) or no TimeToReadySeconds in CloudWatch ({metrics})",
                "ops/coldstart_report.py",
            )
        return f"{len(table)} serving pods ({len(ready)} Ready) with their phases from the fake cluster's record; {pngs[-1].relative_to(self.out)}; TimeToReadySeconds sent ({len(metrics)} series)"

    # --- teardown ---------------------------------------------------------------------------------------------

    def teardown(self) -> str:
        """What `make destroy`'s sweep finds after cdk destroy: it refuses while a stack of the deployment exists, then
        lists (deleting nothing) what controllers left outside CloudFormation, and leaves what is not the
        deployment's alone."""
        ec2, cfn = self.world.boto("ec2"), self.world.boto("cloudformation")
        cluster = self.config.cluster_name
        vpc = ec2.create_vpc(CidrBlock="10.99.0.0/16")["Vpc"]["VpcId"]
        subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.99.1.0/24")["Subnet"]["SubnetId"]

        def group(name: str, tags: dict[str, str]) -> str:
            made = ec2.create_security_group(GroupName=name, Description=name, VpcId=vpc)["GroupId"]
            ec2.create_tags(Resources=[made], Tags=[{"Key": k, "Value": v} for k, v in tags.items()])
            return made

        owned_group = group(
            "k8s-elb-left", {f"kubernetes.io/cluster/{cluster}": "owned"}
        )  # AWS Load Balancer Controller
        shared = group("shared-with-another", {f"kubernetes.io/cluster/{cluster}": "shared"})
        managed = group(
            "cfn-managed",
            {
                f"kubernetes.io/cluster/{cluster}": "owned",
                "aws:cloudformation:stack-id": "arn:aws:cloudformation:stack/x",
            },
        )
        eni = ec2.create_network_interface(SubnetId=subnet)["NetworkInterface"]["NetworkInterfaceId"]
        ec2.create_tags(Resources=[eni], Tags=[{"Key": "cluster.k8s.amazonaws.com/name", "Value": cluster}])  # VPC CNI
        stack = next(iter(self.config.stack_names.values()))
        cfn.create_stack(
            StackName=stack,
            TemplateBody=json.dumps({"Resources": {"Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"}}}),
        )
        refused = self.ops("teardown-dry-run", "ops.teardown_sweep", "--config", str(self.config_path), "--dry-run")
        if refused.returncode != 2 or stack not in refused.stderr:
            raise StepFailed(
                f"the sweep ran while stack {stack} exists (exit {refused.returncode})",
                "ops/teardown_sweep.py live_stacks",
            )
        cfn.delete_stack(StackName=stack)
        done = self.ops("teardown-dry-run", "ops.teardown_sweep", "--config", str(self.config_path), "--dry-run")
        self.expect_ok("teardown-dry-run", done, f"see {self.logs / 'teardown-dry-run.log'}")
        listed = set(re.findall(r"would delete [\w ]+? (\S+)$", done.stdout, re.MULTILINE))
        if listed != {owned_group, eni}:
            raise StepFailed(
                f"the dry run listed {sorted(listed)}; expected {owned_group} and {eni} (not {shared} or {managed})",
                "ops/teardown_sweep.py Ownership",
            )
        still = {g["GroupId"] for g in ec2.describe_security_groups(GroupIds=[owned_group])["SecurityGroups"]}
        if owned_group not in still:
            raise StepFailed("the dry run deleted a security group", "ops/teardown_sweep.py dry_run")
        return (
            f"refused while stack {stack} existed; after it: would delete security group {owned_group} (owned tag) and "
            f"ENI {eni} (VPC CNI tag), left the shared and the CloudFormation-managed groups, deleted nothing"
        )

    # --- helpers ----------------------------------------------------------------------------------------------

    def _pods(self, profile: str) -> list[dict[str, Any]]:
        return [
            p
            for p in self.world.cluster.list("Pod", self.ns)
            if p["metadata"].get("labels", {}).get("app.kubernetes.io/instance") == profile
            and p["metadata"]["labels"].get("app.kubernetes.io/name") == "vllm"
            and "deletionTimestamp" not in p["metadata"]
        ]

    def _rolled_out(self, deployment: str) -> Callable[[], bool]:
        """Every pod of the Deployment Ready and of its current template (a changed ConfigMap hash restarts it)."""

        def done() -> bool:
            current = self.world.cluster.get("Deployment", self.ns, deployment)
            pods = self.world.cluster.list("Pod", self.ns)
            mine = [p for p in pods if any(r["name"] == deployment for r in p["metadata"].get("ownerReferences", []))]
            template = (current or {}).get("spec", {}).get("template", {}).get("metadata", {}).get("annotations", {})
            return bool(mine) and all(
                _ready(p)
                and p["metadata"].get("annotations", {}) == template
                and "deletionTimestamp" not in p["metadata"]
                for p in mine
            )

        return done

    def _log(self, pod: dict[str, Any], container: str) -> str:
        code, out, _ = self.world.cluster.kubectl(["-n", self.ns, "logs", pod["metadata"]["name"], "-c", container])
        return out if code == 0 else ""

    def _init_log(self, pod: dict[str, Any]) -> str:
        return self._log(pod, "verify-artifact")

    def _wait(self, ready: Callable[[], Any], what: str, timeout: float = READY_TIMEOUT_S) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = ready()
            if found:
                return found
            time.sleep(0.5)
        pods = {p["metadata"]["name"]: _pod_state(p) for p in self.world.cluster.list("Pod", self.ns)}
        raise StepFailed(
            f"waited {timeout:g} s for {what}; pods: {pods}", "see the pods' logs under the world folder (--keep-world)"
        )


def _containers(rendered: Rendered, deployment: str) -> list[dict[str, Any]]:
    return list(rendered.one("Deployment", deployment)["spec"]["template"]["spec"]["containers"])


def _expected_threshold(crossover: dict[str, Any], arm: str, max_num_seqs: int) -> int:
    """The spill threshold docs/endpoint.md and config/crossover.py (paying_per_replica) give an arm: the highest
    concurrency that still paid, for the prompt kind that stops paying first; max_num_seqs where the sweep found no
    crossover."""
    paying = [
        max(int(c["last_paying"] or 1), 1)
        for c in crossover["crossovers"]
        if c["variant"] == arm and c["load"] == "concurrency" and c["crossover"] is not None
    ]
    return min(paying) if paying else max_num_seqs


def _ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))


def _pod_state(pod: dict[str, Any]) -> str:
    statuses = [*pod["status"].get("initContainerStatuses", []), *pod["status"].get("containerStatuses", [])]
    return f"{pod['status'].get('phase')} " + ", ".join(
        f"{s['name']}: {next(iter(s.get('state', {'?': 0})))}" for s in statuses
    )


def _first(text: str, pattern: str) -> str:
    found = re.search(pattern, text)
    return found[0] if found else text.strip().splitlines()[-1][:120] if text.strip() else "no log"


def _result_path(stdout: str, base: Path) -> Path:
    found = re.search(r"^results: (\S+);", stdout, re.MULTILINE)
    if not found:
        raise StepFailed(
            f"the driver named no results file: {_last_words(stdout)}",
            "ops/run_benchmark.py prints `results: <file>; report: <dir>/`",
        )
    return base / found[1]


def _summary(data: dict[str, Any]) -> str:
    """Requests answered per variant and the median p50 TPOT speedup of each variant over the cases, from a
    `bench run` results file (bench/results.py's schema, read as JSON)."""
    runs = data["runs"]
    ok = {v["name"]: [0, 0] for v in data["variants"]}
    tpot: dict[tuple[str, str], float] = {}
    for run in runs:
        ok[run["variant"]][0] += run["summary"]["ok"]
        ok[run["variant"]][1] += run["summary"]["requests"]
        tpot[(run["variant"], run["test_case"])] = run["summary"]["tpot_s"].get("p50") or 0.0
    failed = {name: f"{good}/{total}" for name, (good, total) in ok.items() if good != total or not total}
    if failed:
        raise StepFailed(f"requests failed or none ran: {failed}", "see the run's errors in its results file")
    baseline = data.get("baseline_variant") or data["variants"][0]["name"]
    speedups = []
    for name in ok:
        if name == baseline:
            continue
        ratios = sorted(
            tpot[(baseline, case)] / value for (variant, case), value in tpot.items() if variant == name and value
        )
        if ratios:
            speedups.append(f"{name} {ratios[len(ratios) // 2]:.2f}x")
    answered = ", ".join(f"{name} {good}/{total}" for name, (good, total) in ok.items())
    return f"requests answered {answered}; median p50 TPOT speedup {', '.join(speedups) or '-'}"


def _slug(name: str) -> str:
    return re.sub(r"[^\w.-]+", "-", name)


def _shown(argv: Any) -> str:
    text = " ".join(str(a) for a in argv)
    return text if len(text) < 300 else text[:300] + " ..."


def _last_words(text: str, lines: int = 3) -> str:
    kept = [line for line in text.strip().splitlines() if line.strip() and not line.startswith(("b'!!", "!!"))]
    return " | ".join(kept[-lines:])[-600:] or "(no output)"
