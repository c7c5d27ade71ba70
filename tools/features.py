"""kafka-features.sh: Kafka 3.9's FeatureCommand (argparse4j style) over ApiVersions and
UpdateFeatures (KIP-584).

    kafka-features.sh --bootstrap-server h:p [--command-config f] describe
    kafka-features.sh --bootstrap-server h:p upgrade [--metadata 3.9-IV0] [--feature name=level ...] [--dry-run]
    kafka-features.sh --bootstrap-server h:p downgrade [--metadata V] [--feature name=level ...] [--unsafe] [--dry-run]
    kafka-features.sh --bootstrap-server h:p disable --feature name [...] [--unsafe] [--dry-run]

``describe`` prints one line per feature, Kafka's
``Feature: f<TAB>SupportedMinVersion: a<TAB>SupportedMaxVersion: b<TAB>FinalizedVersionLevel: l<TAB>Epoch: e``
for the features the broker supports and, unlike Kafka's (which lists supported ones only),
also for finalized features it does not support (supported range shown as ``-``), so that such a
feature can be seen before it is disabled.  Levels of ``metadata.version`` are shown as release
names (``3.9-IV0``).  Odradek's brokers support one feature flag, ``transaction.version`` 0-2
(Kafka 4.x's; ``upgrade --feature transaction.version=2`` turns on transaction version 2); any
other upgrade fails with the broker's reason.  ``describe`` asks with ApiVersions v4, as the Java
admin client does (v3 answers leave out features whose minimum is 0).  Updates print, per feature in name order, ``f was upgraded to n.`` / ``f can be
upgraded to n.`` (dry run) or ``Could not upgrade f to n. <reason>``, and the tool fails with
``k out of n operation(s) failed.`` when one did.
"""
from __future__ import annotations

import sys

from protocol.errors import error_message
from protocol.messages import ApiVersionsRequest, UpdateFeaturesRequest
from tools.common import ToolError, cluster_from, refuse_bootstrap_controller, run_parsed
from tools.transactions import Parser

PROG = "kafka-features.sh"
METADATA_VERSION = "metadata.version"
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3
# MetadataVersion feature levels (KRaft's metadata.version) -> release names, Kafka 3.0 to 3.9
METADATA_LEVELS = {
    1: "3.0-IV1", 2: "3.1-IV0", 3: "3.2-IV0", 4: "3.3-IV0", 5: "3.3-IV1", 6: "3.3-IV2", 7: "3.3-IV3",
    8: "3.4-IV0", 9: "3.5-IV0", 10: "3.5-IV1", 11: "3.5-IV2", 12: "3.6-IV0", 13: "3.6-IV1",
    14: "3.6-IV2", 15: "3.7-IV0", 16: "3.7-IV1", 17: "3.7-IV2", 18: "3.7-IV3", 19: "3.7-IV4",
    20: "3.8-IV0", 21: "3.9-IV0",
}
MINIMUM_BOOTSTRAP_LEVEL, LATEST_PRODUCTION_LEVEL = 4, 21


def build_parser() -> Parser:
    p = Parser(prog="kafka-features", description="This tool manages feature flags in Kafka.")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--bootstrap-server", help="A comma-separated list of host:port pairs to use for "
                   "establishing the connection to the Kafka cluster.")
    g.add_argument("--bootstrap-controller", help="A comma-separated list of host:port pairs to use for "
                   "establishing the connection to the KRaft quorum.")
    p.add_argument("--command-config", help="Property file containing configs to be passed to Admin Client.")
    sub = p.add_subparsers(dest="command", metavar="{describe,upgrade,downgrade,disable}", parser_class=Parser)
    sub.required = True
    sub.add_parser("describe", help="Describes the current active feature flags.")
    up = sub.add_parser("upgrade", help="Upgrade one or more feature flags.")
    up.add_argument("--metadata", help="The level to which we should upgrade the metadata. For example, 3.3-IV3.")
    up.add_argument("--feature", action="append", help="A feature upgrade we should perform, in feature=level "
                    "format. For example: `metadata.version=5`.")
    up.add_argument("--dry-run", action="store_true", help="Validate this upgrade, but do not perform it.")
    down = sub.add_parser("downgrade", help="Upgrade one or more feature flags.")
    down.add_argument("--metadata", help="The level to which we should downgrade the metadata. For example, 3.3-IV0.")
    down.add_argument("--feature", action="append", help="A feature downgrade we should perform, in "
                      "feature=level format. For example: `metadata.version=5`.")
    down.add_argument("--unsafe", action="store_true", help="Perform this downgrade even if it may irreversibly "
                      "destroy metadata.")
    down.add_argument("--dry-run", action="store_true", help="Validate this downgrade, but do not perform it.")
    dis = sub.add_parser("disable", help="Disable one or more feature flags. This is the same as downgrading "
                         "the version to zero.")
    dis.add_argument("--feature", action="append", help="A feature flag to disable.")
    dis.add_argument("--unsafe", action="store_true", help="Disable this feature flag even if it may "
                     "irreversibly destroy metadata.")
    dis.add_argument("--dry-run", action="store_true", help="Perform a dry-run of this disable operation.")
    return p


def level_to_string(feature: str, level: int) -> str:
    if feature == METADATA_VERSION and level != 0:
        return METADATA_LEVELS.get(level, f"UNKNOWN {level}")
    return str(level)


def metadata_level(text: str) -> int:
    """A release name (``3.3-IV3``, or ``3.3`` for its last one) -> feature level."""
    by_name = {v: k for k, v in METADATA_LEVELS.items()}
    if text in by_name:
        return by_name[text]
    last = [k for k, v in METADATA_LEVELS.items() if v.split("-")[0] == text]
    if last:
        return max(last)
    names = ", ".join(METADATA_LEVELS[k] for k in range(MINIMUM_BOOTSTRAP_LEVEL, LATEST_PRODUCTION_LEVEL + 1))
    raise ToolError(f"Unsupported metadata.version {text}. Supported metadata.version are {names}")


def parse_name_and_level(text: str) -> tuple[str, int]:
    if "=" not in text:
        raise ToolError(f"Can't parse feature=level string {text}: equals sign not found.")
    name, _, raw = text.partition("=")
    name, raw = name.strip(), raw.strip()
    try:
        level = int(raw)
        if not -32768 <= level <= 32767:
            raise ValueError
    except ValueError:
        raise ToolError(f"Can't parse feature=level string {text}: unable to parse {raw} as a short.") from None
    return name, level


def updates_from(a) -> dict[str, int]:
    updates: dict[str, int] = {}
    if a.command == "disable":
        for name in a.feature or []:
            if name in updates:
                raise ToolError(f"Feature {name} was specified more than once.")
            updates[name] = 0
        return updates
    if a.metadata is not None:
        updates[METADATA_VERSION] = metadata_level(a.metadata)
    for item in a.feature or []:
        name, level = parse_name_and_level(item)
        if name in updates:
            raise ToolError(f"Feature {name} was specified more than once.")
        updates[name] = level
    return updates


async def describe(client) -> None:
    resp = await client.send_any(ApiVersionsRequest(client_software_name="odradek-tools",
                                                    client_software_version="1.0"), version=4)
    if resp.error_code:
        raise ToolError(error_message(resp.error_code))
    supported = {f.name: (f.min_version, f.max_version) for f in resp.supported_features or []}
    finalized = {f.name: f.max_version_level for f in resp.finalized_features or []}
    epoch = resp.finalized_features_epoch
    epoch_text = str(epoch) if epoch is not None and epoch >= 0 else "-"
    for name in sorted(set(supported) | set(finalized)):
        rng = supported.get(name)
        lo = level_to_string(name, rng[0]) if rng else "-"
        hi = level_to_string(name, rng[1]) if rng else "-"
        print(f"Feature: {name}\tSupportedMinVersion: {lo}\tSupportedMaxVersion: {hi}\t"
              f"FinalizedVersionLevel: {level_to_string(name, finalized.get(name, 0))}\tEpoch: {epoch_text}")


async def update(client, op: str, updates: dict[str, int], kind: int, dry_run: bool) -> int:
    if not updates:
        raise ToolError(f"You must specify at least one feature to {op}")
    req = UpdateFeaturesRequest(
        timeout_ms=30000, validate_only=dry_run,
        feature_updates=[UpdateFeaturesRequest.FeatureUpdateKey(
            feature=n, max_version_level=lvl, allow_downgrade=kind != UPGRADE, upgrade_type=kind)
            for n, lvl in updates.items()])
    resp = await client.send_to_controller(req, version=1 if dry_run else None)
    errors: dict[str, str | None] = {}
    if resp.error_code:
        reason = resp.error_message or error_message(resp.error_code)
        errors = {n: reason for n in updates}
    elif not resp.results:
        errors = {n: None for n in updates}     # v2 (Kafka 4.0): no per-feature results, all written
    else:
        answered = {r.feature: r for r in resp.results}
        for n in updates:
            r = answered.get(n)
            if r is None:
                errors[n] = "The controller did not answer for this feature."
            elif r.error_code:
                errors[n] = r.error_message or error_message(r.error_code)
            else:
                errors[n] = None
    failures = 0
    for name in sorted(errors):
        level = updates[name]
        if errors[name] is not None:
            helper = "Can not " if dry_run else "Could not "
            suffix = f"disable {name}" if op == "disable" else f"{op} {name} to {level}"
            print(f"{helper}{suffix}. {errors[name]}")
            failures += 1
        else:
            verb = " can be " if dry_run else " was "
            obj = "disabled." if op == "disable" else f"{op}d to {level}."
            print(f"{name}{verb}{obj}")
    if failures:
        raise ToolError(f"{failures} out of {len(updates)} operation(s) failed.")
    return 0


async def execute(a) -> int:
    refuse_bootstrap_controller(a.bootstrap_controller)
    updates = {} if a.command == "describe" else updates_from(a)
    client = await cluster_from({"bootstrap-server": a.bootstrap_server, "command-config": a.command_config})
    try:
        if a.command == "describe":
            await describe(client)
            return 0
        kind = UPGRADE if a.command == "upgrade" else (UNSAFE_DOWNGRADE if a.unsafe else SAFE_DOWNGRADE)
        return await update(client, a.command, updates, kind, a.dry_run)
    finally:
        await client.close()


def main(argv=None) -> int:
    return run_parsed(build_parser(), execute, argv)


if __name__ == "__main__":
    sys.exit(main())
