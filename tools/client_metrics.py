"""kafka-client-metrics.sh: list, describe, create/alter and delete client metrics subscriptions
(KIP-714's CLIENT_METRICS config resource), with the flags and output of Kafka 3.9's
ClientMetricsCommand.

* ``--list``: one subscription name a line (ListClientMetricsResources).
* ``--describe [--name N]``: ``Client metrics configs for N are:`` and ``  key=value`` per config
  (every subscription without --name).
* ``--alter --name N | --generate-name`` with ``--metrics m1,m2``, ``--interval ms`` and
  ``--match k1=v1,k2=v2``: IncrementalAlterConfigs SET of the given keys (an empty value deletes
  the key); --generate-name names a new subscription with a random Kafka UUID.
* ``--delete --name N``: deletes every config of N, which removes the subscription.

Bad command lines print the reason (and for a missing or extra action the usage) on stderr; a
failure of the request prints ``Error while executing client metrics command : <message>`` on
stdout.  Either way the exit status is 1.
"""
from __future__ import annotations

import sys

from protocol.client import KafkaConnectionError
from protocol.errors import KafkaError
from protocol.messages import (DescribeConfigsRequest, IncrementalAlterConfigsRequest,
                               ListClientMetricsResourcesRequest)
from tools.common import (OptionParser, ToolError, check_invalid, cluster_from, parse_or_exit, raise_error,
                          run, standard_options)

DESCRIPTION = "This tool helps to manipulate and describe client metrics configurations."
CLIENT_METRICS = 16
SET, DELETE = 0, 1
SELECTORS = ("client_id", "client_instance_id", "client_software_name", "client_software_version",
             "client_source_address", "client_source_port")


def build_parser() -> OptionParser:
    p = OptionParser(DESCRIPTION)
    standard_options(p, "Properties file with admin client settings (security, timeouts, client.id, ...).")
    p.add("alter", "Create or change a client metrics subscription (--name or --generate-name).")
    p.add("delete", "Delete a client metrics subscription (--name).")
    p.add("describe", "Print the configs of the --name subscription, or of every subscription.")
    p.add("list", "List the names of the client metrics subscriptions.")
    p.add("name", "The name of the client metrics subscription.", "name")
    p.add("generate-name", "With --alter: name the subscription with a new random UUID.")
    p.add("interval", "How often matching clients push their metrics, in milliseconds (100 to 3600000).",
          "push interval", type=int)
    p.add("match", "Which clients the subscription applies to, as selector=regex pairs 'k1=v1,k2=v2' "
                   "(repeatable); every selector must match. Selectors:\n"
          + "\n".join("  " + s for s in SELECTORS), "k1=v1,k2=v2", multi=True)
    p.add("metrics", "Metric name prefixes the clients push, 'm1,m2' (repeatable); '*' for every metric.",
          "m1,m2", multi=True)
    return p


def _values(items: list[str]) -> list[str]:
    """joptsimple's withValuesSeparatedBy(','): every given value split at its commas."""
    return [v for item in items for v in item.split(",")]


def check_args(p: OptionParser, o) -> None:
    """ClientMetricsCommandOptions.checkArgs."""
    actions = [a for a in ("alter", "delete", "describe", "list") if o.has(a)]
    if len(actions) != 1:
        p.usage_exit("Command must include exactly one action: --alter, --delete, --describe or --list.")
    if not o.has("bootstrap-server"):
        raise ToolError("--bootstrap-server must be specified.")
    change = ["generate-name", "interval", "match", "metrics"]
    check_invalid(p, o, "delete", change)
    check_invalid(p, o, "describe", change)
    check_invalid(p, o, "list", ["name"] + change)
    if o.has("alter") and o.has("name") == o.has("generate-name"):
        raise ToolError("One of --name or --generate-name must be specified with --alter.")
    if o.has("delete") and not o.has("name"):
        raise ToolError("A client metrics resource name must be specified with --delete.")


async def list_names(client) -> list[str]:
    resp = await client.send_any(ListClientMetricsResourcesRequest(resource_types=[16]))    # v1: CLIENT_METRICS only
    raise_error(resp.error_code)
    return [r.name for r in resp.client_metrics_resources]


async def subscription_configs(client, name: str) -> list[tuple[str, str]]:
    """(key, value) of a subscription, in the order Kafka's admin client lists them."""
    from controller.api import java_hash_order
    R = DescribeConfigsRequest
    resp = await client.send_any(R(resources=[R.DescribeConfigsResource(
        resource_type=CLIENT_METRICS, resource_name=name, configuration_keys=None)],
        include_synonyms=False, include_documentation=False))
    r = resp.results[0]
    raise_error(r.error_code, r.error_message)
    values = {c.name: c.value for c in r.configs}
    return [(k, values[k]) for k in java_hash_order(values)]


async def incremental_alter(client, name: str, ops: list[tuple[str, int, str]]) -> None:
    R = IncrementalAlterConfigsRequest
    req = R(resources=[R.AlterConfigsResource(
        resource_type=CLIENT_METRICS, resource_name=name,
        configs=[R.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])],
        validate_only=False)
    resp = await client.send_any(req)
    for r in resp.responses:
        raise_error(r.error_code, r.error_message)


async def alter(client, o) -> None:
    if o.has("generate-name"):
        from controller.api import random_kafka_uuid, uuid_to_base64
        name = uuid_to_base64(random_kafka_uuid())
    else:
        name = o["name"]
    to_set = {}
    if o.has("interval"):
        to_set["interval.ms"] = str(o["interval"])
    if o.has("metrics"):
        to_set["metrics"] = ",".join(_values(o["metrics"]))
    if o.has("match"):
        to_set["match"] = ",".join(_values(o["match"]))
    await incremental_alter(client, name, [(k, DELETE if v == "" else SET, v) for k, v in to_set.items()])
    print(f"Altered client metrics config for {name}.")


async def delete(client, o) -> None:
    name = o["name"]
    current = await subscription_configs(client, name)
    await incremental_alter(client, name, [(k, DELETE, v) for k, v in current])
    print(f"Deleted client metrics config for {name}.")


async def describe(client, o) -> None:
    names = [o["name"]] if o.has("name") else await list_names(client)
    for name in names:
        print(f"Client metrics configs for {name} are:")
        for k, v in await subscription_configs(client, name):
            print(f"  {k}={v}")


async def execute(o) -> int:
    try:
        client = await cluster_from(o)
        try:
            if o.has("alter"):
                await alter(client, o)
            elif o.has("describe"):
                await describe(client, o)
            elif o.has("delete"):
                await delete(client, o)
            else:
                print("\n".join(await list_names(client)))
        finally:
            await client.close()
    except (KafkaError, KafkaConnectionError, ToolError) as e:
        print(f"Error while executing client metrics command : {e}")
        return 1
    return 0


def main(argv=None) -> int:
    p = build_parser()

    def body(args):
        o = parse_or_exit(p, args, DESCRIPTION)
        check_args(p, o)
        return execute(o)

    return run(body, sys.argv[1:] if argv is None else argv, error_prefix="")


if __name__ == "__main__":
    sys.exit(main())
