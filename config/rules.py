"""The deployment config's cross-field rules: each returns every problem it finds as a sentence naming the field,
the value and the fix. The loader (config/loader.py parse_config) runs them, through config_problems, on a
DeploymentConfig whose fields are valid one by one, so a bad value fails before any construct is created. The
schema does not call them: it imports nothing of this module, which reads the schema's models.
"""

from __future__ import annotations

from config.catalogue import CLOUDFORMATION_TEMPLATE_BYTES, GP3_IOPS_PER_MIBPS, MAX_PROFILES
from config.neuron_ami import ami_driver, driver_text
from config.ports import DEFAULT_API_PORT, VLLM_POD_PORTS, endpoint_pod_ports
from config.profiles import DraftSpeculation, ServingProfile
from config.scaling import devices_available, scaling_problems
from config.schema import DeploymentConfig
from serving_stacks import STACKS, stack_named
from serving_stacks.contract import ServingStack


def config_problems(config: DeploymentConfig) -> list[str]:
    """Every cross-field problem, in the order they are shown; the endpoint's arm rules only once the others hold
    (its arms are profiles those rules check)."""
    problems = [*model_problems(config), *placement_problems(config), *node_group_problems(config)]
    problems += scaling_problems(config) + port_problems(config)
    if len(config.models_bucket_name("0" * 12)) > 63:
        problems.append(
            f"name={config.name!r} is too long for the bucket name {config.models_bucket_name('<account>')!r} "
            "(S3 allows 63 characters); use a shorter name"
        )
    return problems or endpoint_problems(config)


def model_problems(config: DeploymentConfig) -> list[str]:
    """Unique profile names, a baseline without speculation, and the models, stack and draft of each profile."""
    problems = profile_list_problems(config) + baseline_problems(config)
    for i, p in enumerate(config.profiles):
        problems += profile_model_problems(config, f"profiles[{i}] ({p.name})", p)
    return problems


def profile_list_problems(config: DeploymentConfig) -> list[str]:
    """Unique names, at least one profile without speculation, and no more profiles than one template holds."""
    problems: list[str] = []
    names = [p.name for p in config.profiles]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"profiles: name {dup!r} is used twice; give every profile a unique name")
    if all(p.speculative for p in config.profiles):
        problems.append(
            "profiles: every profile speculates, so there is no reference to measure speedups against; add a "
            "profile with decoding.method: none"
        )
    if len(config.profiles) > MAX_PROFILES:
        problems.append(
            f"profiles: {len(config.profiles)} profiles are more than {MAX_PROFILES}; the Workloads stack's "
            f"template would exceed CloudFormation's {CLOUDFORMATION_TEMPLATE_BYTES // 1_000_000} MB limit "
            "(about 22 kB per profile); split them over deployments (config files with different names)"
        )
    return problems


def baseline_problems(config: DeploymentConfig) -> list[str]:
    """A named baseline is a profile, and one without speculation."""
    problems: list[str] = []
    if config.baseline is None:
        return problems
    named = next((p for p in config.profiles if p.name == config.baseline), None)
    if named is None:
        problems.append(
            f"baseline={config.baseline!r} is not a profile; use one of {', '.join(p.name for p in config.profiles)}"
        )
    elif named.speculative:
        plain = [p.name for p in config.profiles if not p.speculative]
        problems.append(
            f"baseline={config.baseline!r} speculates ({named.decoding.method}); speedups need a reference "
            "without speculation: "
            + (f"name one of {', '.join(plain)}" if plain else "add a profile with decoding.method: none")
        )
    return problems


def profile_model_problems(config: DeploymentConfig, where: str, p: ServingProfile) -> list[str]:
    """The profile's target is a model, its image's stack serves its method and accepts it, and so does its draft."""
    problems: list[str] = []
    if p.target not in config.models:
        problems.append(
            f"{where}.target={p.target!r} is not a key of models; add it under models or use one of "
            f"{', '.join(sorted(config.models))}"
        )
        return problems
    stack = stack_named(p.image.stack)
    if p.decoding.method not in stack.METHODS:
        serving = [s for s in STACKS if p.decoding.method in s.METHODS]
        problems.append(
            f"{where}.decoding.method={p.decoding.method!r} cannot be served by image {p.image.tag!r}: the "
            f"{stack.NAME} stack serves {', '.join(stack.METHODS)}; "
            + "; ".join(f"for {p.decoding.method} use image tag {s.IMAGE_TAG} ({s.NAME} stack)" for s in serving)
        )
    problems += stack.profile_problems(p, where)
    if isinstance(p.decoding, DraftSpeculation):
        problems += draft_problems(config, where, p, p.decoding, stack)
    return problems


def draft_problems(
    config: DeploymentConfig, where: str, p: ServingProfile, d: DraftSpeculation, stack: ServingStack
) -> list[str]:
    """The draft's acceptance can be watched on the stack, and the draft is a smaller model of the target's tokenizer
    family, no longer than the target."""
    problems: list[str] = []
    if d.tuned_acceptance_rate is not None and stack.LIVE_METRICS.acceptance is None:
        problems.append(
            f"{where}.decoding.tuned_acceptance_rate={d.tuned_acceptance_rate} cannot be watched on the "
            f"{stack.NAME} stack: {stack.LIVE_METRICS.no_acceptance} Leave it out (no acceptance alert on "
            "this stack), or serve the profile on a stack that reports acceptance"
        )
    if d.draft not in config.models:
        problems.append(f"{where}.decoding.draft={d.draft!r} is not a key of models; add it under models")
        return problems
    if d.draft == p.target:
        problems.append(f"{where}.decoding.draft={d.draft!r} is the target itself; pick a smaller model")
    if d.draft_max_model_len is not None and d.draft_max_model_len > p.max_model_len:
        problems.append(
            f"{where}.decoding.draft_max_model_len={d.draft_max_model_len} is larger than "
            f"{where}.max_model_len={p.max_model_len}, and vLLM refuses to start with a draft longer "
            f"than its target; set draft_max_model_len: {p.max_model_len} (or leave it out), or raise "
            "max_model_len"
        )
    tf, df = config.models[p.target].tokenizer_family, config.models[d.draft].tokenizer_family
    if tf != df and not d.tokenizers_compatible:
        problems.append(
            f"{where}.decoding.draft={d.draft!r} has tokenizer family {df!r} (models.{d.draft}) but the "
            f"target has {tf!r} (models.{p.target}); use a same-family draft, or set decoding.tokenizers_compatible: true if you "
            "verified they tokenize identically"
        )
    return problems


def placement_problems(config: DeploymentConfig) -> list[str]:
    """Each profile's tensor parallelism and devices against the instance, and all claims against the node group."""
    problems: list[str] = []
    inst = config.trn2_nodes.instance
    for i, p in enumerate(config.profiles):
        where = f"profiles[{i}] ({p.name}).placement"
        pl = p.placement
        cores = inst.physical_cores_per_device // pl.logical_neuron_cores
        if pl.tensor_parallel_size != pl.devices * cores:
            problems.append(
                f"{where}.tensor_parallel_size={pl.tensor_parallel_size} but {pl.devices} devices x {cores} "
                f"logical cores per device (LNC={pl.logical_neuron_cores}) = {pl.devices * cores}; "
                f"set tensor_parallel_size: {pl.devices * cores} or change devices"
            )
        if pl.devices > inst.devices:
            problems.append(
                f"{where}.devices={pl.devices} exceeds the {inst.devices} devices of "
                f"{config.trn2_nodes.instance_type}; use at most {inst.devices}"
            )
    needed = sum(config.profile_devices(p) for p in config.profiles)
    offered = devices_available(config)
    if needed > offered:
        problems.append(
            f"profiles claim {needed} Neuron devices in all but trn2_nodes.max_size={config.trn2_nodes.max_size} "
            f"x {inst.devices} devices = {offered}; raise trn2_nodes.max_size or lower replicas/devices"
        )
    return problems


def node_group_problems(config: DeploymentConfig) -> list[str]:
    """Node group sizes, Capacity Block fields, gp3 disk, AMI release, zones and the alarm topic's region."""
    return [
        *node_size_problems(config),
        *node_autoscaling_problems(config),
        *capacity_block_problems(config),
        *disk_problems(config),
        *ami_release_problems(config),
        *driver_problems(config),
        *zone_problems(config),
    ]


def node_size_problems(config: DeploymentConfig) -> list[str]:
    """Each node group's sizes in order."""
    problems: list[str] = []
    for group, ng in (("trn2_nodes", config.trn2_nodes), ("system_nodes", config.system_nodes)):
        if not ng.min_size <= ng.desired_size <= ng.max_size:
            problems.append(
                f"{group}: min_size={ng.min_size} <= desired_size={ng.desired_size} <= max_size={ng.max_size} "
                "does not hold; order them"
            )
    return problems


def node_autoscaling_problems(config: DeploymentConfig) -> list[str]:
    """The trn2 group's floor and ceiling as the Cluster Autoscaler needs them (docs/elastic-capacity.md)."""
    problems: list[str] = []
    t = config.trn2_nodes
    if t.min_size < 1:
        problems.append(
            f"trn2_nodes.min_size={t.min_size}: the Cluster Autoscaler cannot grow a node group from zero nodes for "
            "pods that claim devices through DRA on AWS (it predicts a new node's devices from a running node of "
            "the same group and the AWS provider supplies none: kubernetes/autoscaler "
            "cluster-autoscaler/docs/dra_support.md, Configuration); set min_size: 1"
        )
    if t.capacity_type == "CAPACITY_BLOCK":
        block = t.capacity_block_instances
        if block is None and t.max_size > t.min_size:
            problems.append(
                f"trn2_nodes.max_size={t.max_size} lets the Capacity Block node group grow above min_size="
                f"{t.min_size}, but trn2_nodes.capacity_block_instances is not set, so the ceiling cannot be checked "
                "against the reservation; set capacity_block_instances to the instance count of the block (EC2 console)"
            )
        elif block is not None and t.max_size > block:
            problems.append(
                f"trn2_nodes.max_size={t.max_size} is above the Capacity Block size capacity_block_instances={block}: "
                f"the node group cannot grow past its reservation; set max_size: {block}"
            )
    elif t.capacity_block_instances is not None:
        problems.append(
            _capacity_block_only(
                config, "capacity_block_instances", str(t.capacity_block_instances), "capacity_block_instances"
            )
        )
    return problems


def capacity_block_problems(config: DeploymentConfig) -> list[str]:
    """A Capacity Block names its reservation and zone; its end and reservation id mean nothing on demand."""
    problems: list[str] = []
    t = config.trn2_nodes
    if t.capacity_type == "CAPACITY_BLOCK":
        if not t.capacity_reservation_id:
            problems.append(
                "trn2_nodes.capacity_type=CAPACITY_BLOCK needs trn2_nodes.capacity_reservation_id (cr-...); "
                "buy a Capacity Block in the EC2 console and paste its reservation id"
            )
        if not t.availability_zone:
            problems.append(
                "trn2_nodes.capacity_type=CAPACITY_BLOCK needs trn2_nodes.availability_zone: the AZ of the "
                "Capacity Block (see the reservation in the EC2 console)"
            )
    elif t.capacity_block_end:
        problems.append(
            _capacity_block_only(config, "capacity_block_end", t.capacity_block_end.isoformat(), "capacity_block_end")
        )
    elif t.capacity_reservation_id:
        problems.append(
            _capacity_block_only(config, "capacity_reservation_id", repr(t.capacity_reservation_id), "the id")
        )
    return problems


def _capacity_block_only(config: DeploymentConfig, field: str, value: str, remove: str) -> str:
    """The sentence for a trn2_nodes field that only a Capacity Block uses, set on another capacity type."""
    return (
        f"trn2_nodes.{field}={value} is set but capacity_type is {config.trn2_nodes.capacity_type}; set "
        f"capacity_type: CAPACITY_BLOCK or remove {remove}"
    )


def disk_problems(config: DeploymentConfig) -> list[str]:
    """gp3 throughput within what the provisioned IOPS allow."""
    problems: list[str] = []
    t = config.trn2_nodes
    if t.disk_throughput_mibps * GP3_IOPS_PER_MIBPS > t.disk_iops:
        problems.append(
            f"trn2_nodes.disk_throughput_mibps={t.disk_throughput_mibps} needs at least "
            f"{t.disk_throughput_mibps * GP3_IOPS_PER_MIBPS} IOPS (gp3 allows 0.25 MiB/s per provisioned IOPS) but "
            f"disk_iops={t.disk_iops}; raise disk_iops or lower disk_throughput_mibps to {t.disk_iops // GP3_IOPS_PER_MIBPS}"
        )
    return problems


def ami_release_problems(config: DeploymentConfig) -> list[str]:
    """A pinned AMI release no newer than the control plane."""
    problems: list[str] = []
    release = config.trn2_nodes.ami_release_version
    if not release:
        return problems
    ami_minor = ".".join(release.split(".")[:2])
    if tuple(map(int, ami_minor.split("."))) > tuple(map(int, config.kubernetes_version.split("."))):
        problems.append(
            f"trn2_nodes.ami_release_version={release!r} is for Kubernetes {ami_minor}, newer "
            f"than kubernetes_version={config.kubernetes_version}; nodes cannot run ahead of the control "
            f"plane, use a {config.kubernetes_version}.x release"
        )
    return problems


def zone_problems(config: DeploymentConfig) -> list[str]:
    """The trn2 zone among the network's zones, those in the region, and the alarm topic in the region too."""
    problems: list[str] = []
    zone, zones, region = config.trn2_nodes.availability_zone, config.network.availability_zones, config.region
    if zone and zone not in zones:
        problems.append(
            f"trn2_nodes.availability_zone={zone!r} is not one of network.availability_zones "
            f"({', '.join(zones)}); add it there or pick one of them"
        )
    for az in zones:
        if not az.startswith(region):
            problems.append(
                f"network.availability_zones contains {az!r}, which is not in region {region}; use zones like {region}a"
            )
    topic = config.observability.alarm_topic_arn
    if topic and topic.split(":")[3] != region:
        problems.append(
            f"observability.alarm_topic_arn={topic!r} is in region {topic.split(':')[3]}, but alarms can only notify "
            f"a topic in their own region {region}; create the topic in {region} or set it to null"
        )
    return problems


def driver_problems(config: DeploymentConfig) -> list[str]:
    """Every profile runs on the one Trainium2 node group, so its AMI's Neuron driver must serve every image.

    Each stack names the driver its images were released with (serving_stacks/); a newer driver serves
    older runtimes, not the other way round (config/neuron_ami.py). Mixing stacks needs a pinned AMI whose
    driver is known here to serve both; none known here does yet, so such a config is refused.
    """
    problems: list[str] = []
    stacks = sorted({stack_named(p.image.stack) for p in config.profiles}, key=lambda s: s.NAME)
    needed = max(s.MIN_DRIVER for s in stacks)
    release = config.trn2_nodes.ami_release_version
    driver = ami_driver(release.rsplit("-", 1)[1]) if release else None
    if len(stacks) > 1 and (driver is None or driver < needed):
        names = " and ".join(f"{s.NAME} (driver {driver_text(s.MIN_DRIVER)}+)" for s in stacks)
        if release is None:
            pinned = "trn2_nodes.ami_release_version is null (the latest AMI, whose driver is not known here)"
        else:
            shipped = f"ships driver {driver_text(driver)}" if driver else "has a driver not known here"
            pinned = f"trn2_nodes.ami_release_version={release!r} {shipped}"
        problems.append(
            f"profiles mix the {names} stacks on one Trainium2 node group, but {pinned}, so no pinned driver is "
            "known to serve both; put each stack in its own "
            "deployment (config file), or pin an AMI release whose aws-neuronx-dkms is at least "
            f"{driver_text(needed)} (add it to config/neuron_ami.py with its release note)"
        )
    elif driver is not None and driver < needed:
        problems.append(
            f"trn2_nodes.ami_release_version={release!r} ships Neuron driver {driver_text(driver)}, older than "
            f"the {driver_text(needed)} the {', '.join(s.NAME for s in stacks)} images were released with; pin a newer "
            "release or leave ami_release_version: null (the latest)"
        )
    return problems


def endpoint_problems(config: DeploymentConfig) -> list[str]:
    """The endpoint's arms are profiles serving one model name (the baseline's); spill is for speculative arms."""
    e, problems = config.endpoint, []
    names = {p.name: p for p in config.profiles}
    for name in [*e.weights, *e.spill_threshold]:
        if name not in names:
            problems.append(f"endpoint: {name!r} is not a profile; use one of {', '.join(names)}")
    if e.weights and sum(e.weights.values()) != 100:
        problems.append(f"endpoint.weights add up to {sum(e.weights.values())} ({e.weights}); make them add up to 100")
    target = config.baseline_profile.target if not problems else None
    for name, weight in e.weights.items():
        if target and weight and names[name].target != target:
            problems.append(
                f"endpoint.weights.{name}={weight} but profile {name} serves {names[name].target}, not the "
                f"baseline's {target}: one endpoint serves one model name; set its weight to 0"
            )
    for name in e.spill_threshold:
        if name in names and not names[name].speculative:
            problems.append(
                f"endpoint.spill_threshold.{name} is set but profile {name} does not speculate; spill applies to "
                "speculative profiles only, remove it"
            )
    return problems


def port_problems(config: DeploymentConfig) -> list[str]:
    """Each port the config sets against the fixed ports of the pod it listens in (config/ports.py): a profile's
    port shares its vLLM pod with the metrics sidecar, endpoint.port the router pod with Envoy's admin, metrics and
    spill-gate listeners (one gate per spilling arm; every profile counted, the most there can be)."""
    problems: list[str] = []
    for i, p in enumerate(config.profiles):
        if p.port in VLLM_POD_PORTS:
            problems.append(
                f"profiles[{i}] ({p.name}).port={p.port} is the port of the {VLLM_POD_PORTS[p.port]} in the same "
                f"pod, so vLLM or the sidecar could not bind it; use another port, e.g. {DEFAULT_API_PORT}"
            )
    own = endpoint_pod_ports(len(config.profiles))
    if config.endpoint.port in own:
        problems.append(
            f"endpoint.port={config.endpoint.port} is the router's own {own[config.endpoint.port]} port (Envoy would "
            f"refuse to bind it twice); use a port not among {', '.join(map(str, sorted(own)))}, e.g. "
            f"{DEFAULT_API_PORT}"
        )
    return problems
