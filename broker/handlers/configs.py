"""DescribeConfigs (key 32) v0-4, AlterConfigs (key 33) v0-2, IncrementalAlterConfigs (key 44) v0-1.

Resources: TOPIC (2), BROKER (4), BROKER_LOGGER (8), CLIENT_METRICS (16: KIP-714's client metrics
subscriptions, below) and GROUP (32: KIP-848's group configs, IncrementalAlterConfigs SET/DELETE
only, as Kafka).  A broker resource is named by this broker's id, or ``""`` for the cluster-wide default entity; any other id is INVALID_REQUEST.
A broker logger resource must name this broker.

DescribeConfigs
    Null ``configuration_keys`` lists every config (topic: every topic key with its effective
    value; broker: every non-internal key; default entity: the dynamic defaults that are set);
    otherwise only the named keys that exist.  v0 reports ``is_default``; v1+ the config source
    and, when asked, synonyms; v3+ the config type and, when asked, documentation; v4 flexible.
    Sensitive values are null.  Unknown topic: UNKNOWN_TOPIC_OR_PARTITION; illegal topic name:
    INVALID_TOPIC_EXCEPTION.

AlterConfigs (legacy: replaces every override of the resource) and IncrementalAlterConfigs
(SET / DELETE / APPEND / SUBTRACT on the current overrides) answer per resource, the way a
ZooKeeper-mode Kafka 3.x broker does:
    * a resource listed twice: INVALID_REQUEST for both ("Each resource must appear at most once.")
    * duplicate config names, null values (except DELETE), APPEND/SUBTRACT on a non-list key,
      unknown operations, unknown resource types, bad broker ids: INVALID_REQUEST
    * topic: missing topic UNKNOWN_TOPIC_OR_PARTITION; unknown config name INVALID_CONFIG; a
      value that does not parse or validate INVALID_REQUEST ("Invalid config value for
      resource ..."); conflicting values INVALID_CONFIG
    * broker: any validation failure INVALID_REQUEST (Kafka's KAFKA-13609 behaviour)
    ``validate_only`` runs every check and changes nothing.  Accepted topic changes reach the
    partition logs through the controller's ConfigsChanged event (broker/server.py).

CLIENT_METRICS, as a Kafka 3.9 KRaft broker and controller answer it (ConfigHelper,
ControllerConfigurationValidator, ClientMetricsConfigs):
    * DescribeConfigs lists the keys set on the subscription (metrics, interval.ms, match), whatever
      ``configuration_keys`` asks, with source CLIENT_METRICS_CONFIG (7), no synonyms, not read-only;
      an unknown subscription has none.  An empty name: INVALID_REQUEST.
    * Both alter APIs give the controller the subscription's whole new set of keys, checked by
      ``controller.api.check_client_metrics_configs`` (its docstring has the error codes);
      APPEND/SUBTRACT: INVALID_CONFIG (Kafka's controller has no list schema for the resource).
      Removing every key removes the subscription.  An alter.config.policy sees resource type
      "CLIENT_METRICS".
    * Authorization (broker/security/enforce.py): the CLUSTER resource, as for BROKER.
"""
from __future__ import annotations

import logging

from broker.config import (ConfigError, describe_broker_configs, describe_topic_configs,
                           apply_incremental, validate_topic_config)
from broker.configdefs import TOPIC_KEYS
from broker.dispatch import handler
from controller.api import java_hash_order, validate_topic_name
from protocol.errors import ErrorCode as E
from protocol.messages import (AlterConfigsResponse, DescribeConfigsResponse,
                               IncrementalAlterConfigsResponse)

log = logging.getLogger("odradek.admin")

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
_TYPE_NAMES = {0: "UNKNOWN", 2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER", 16: "CLIENT_METRICS", 32: "GROUP"}
CLIENT_METRICS_CONFIG = 7       # DescribeConfigs' config source of a subscription's keys
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {OP_SET: "SET", OP_DELETE: "DELETE", OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}
DR = DescribeConfigsResponse


class ResourceError(Exception):
    def __init__(self, code: int, message: str | None):
        super().__init__(message)
        self.code = code
        self.message = message


def _resource_str(rtype: int, name: str) -> str:
    return f"ConfigResource(type={_TYPE_NAMES.get(rtype, 'UNKNOWN')}, name='{name}')"


def _broker_entity(broker, name: str, *, allow_default: bool = True) -> int | None:
    """The broker id a resource name refers to (None: the cluster default entity)."""
    if name == "" or name is None:
        if allow_default:
            return None
        raise ResourceError(E.INVALID_REQUEST, "Broker id must not be empty")
    try:
        bid = int(name)
    except ValueError:
        raise ResourceError(E.INVALID_REQUEST,
                            f"Broker id must be an integer, but it is: {name}") from None
    if bid != broker.broker_id:
        expect = f"{broker.broker_id} or empty string" if allow_default else f"{broker.broker_id}"
        raise ResourceError(E.INVALID_REQUEST,
                            f"Unexpected broker id, expected {expect}, but received {name}")
    return bid


# ----------------------------------------------------------------------------- broker loggers
# Kafka exposes log4j levels; Odradek maps them onto Python's logging.

_ROOT = "root"
_TO_PY = {"TRACE": 5, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
          "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}


def _level_name(level: int) -> str:
    if level >= logging.CRITICAL:
        return "FATAL"
    if level >= logging.ERROR:
        return "ERROR"
    if level >= logging.WARNING:
        return "WARN"
    if level >= logging.INFO:
        return "INFO"
    if level >= logging.DEBUG:
        return "DEBUG"
    return "TRACE"


def _loggers() -> dict[str, logging.Logger]:
    out = {_ROOT: logging.getLogger()}
    for name, lg in sorted(logging.root.manager.loggerDict.items()):
        if isinstance(lg, logging.Logger):
            out[name] = lg
    return out


def _check_logger_ops(ops) -> None:
    known = _loggers()
    for name, op, value in ops:
        if op in (OP_SET, OP_DELETE) and name not in known:
            raise ResourceError(E.INVALID_CONFIG, f"Logger {name} does not exist!")
        if op == OP_SET and value not in _TO_PY:
            raise ResourceError(E.INVALID_CONFIG,
                                f"Cannot set the log level of {name} to {value} as it is not a "
                                "supported log level. Valid log levels are "
                                + ", ".join(sorted(_TO_PY)))      # Kafka sorts them
        if op == OP_DELETE and name == _ROOT:
            raise ResourceError(E.INVALID_REQUEST,
                                f"Removing the log level of the {_ROOT} logger is not allowed")
        if op in (OP_APPEND, OP_SUBTRACT):
            raise ResourceError(E.INVALID_REQUEST, f"{_OP_NAMES[op]} operation is not allowed "
                                "for the BROKER_LOGGER resource")
        if op not in _OP_NAMES:
            raise ResourceError(E.INVALID_REQUEST, f"Unknown operation type {op} is not allowed "
                                "for the BROKER_LOGGER resource")


def _apply_logger_ops(ops) -> None:
    known = _loggers()
    for name, op, value in ops:
        lg = known[name]
        if op == OP_SET:
            log.info("Updating the log level of %s to %s", name, value)
            lg.setLevel(_TO_PY[value])
        else:
            log.info("Unset the log level of %s", name)
            lg.setLevel(logging.NOTSET)


# ----------------------------------------------------------------------------- DescribeConfigs

def _describe_one(ctx, res, synonyms: bool, docs: bool) -> list:
    broker = ctx.broker
    keys = res.configuration_keys
    if res.resource_type == TOPIC:
        err = validate_topic_name(res.resource_name)
        if err:
            raise ResourceError(E.INVALID_TOPIC_EXCEPTION, err)
        info = broker.controller.topic(res.resource_name)
        if info is None:
            raise ResourceError(E.UNKNOWN_TOPIC_OR_PARTITION, None)     # Kafka sets no message here
        return describe_topic_configs(broker.config, info.configs, include_synonyms=synonyms,
                                      include_documentation=docs, keys=keys)
    if res.resource_type == BROKER:
        bid = _broker_entity(broker, res.resource_name)
        entries = describe_broker_configs(broker.config, default_resource=bid is None,
                                          include_synonyms=synonyms, include_documentation=docs,
                                          keys=keys)
        if bid is None:   # the default entity shows only its own layer
            for e in entries:
                e.synonyms = [s for s in e.synonyms if s.source == 3]
        return entries
    if res.resource_type == BROKER_LOGGER:
        _broker_entity(broker, res.resource_name, allow_default=False)
        wanted = set(keys) if keys is not None else None
        out = []
        for name, lg in _loggers().items():
            if wanted is None or name in wanted:
                out.append(DR.DescribeConfigsResourceResult(
                    name=name, value=_level_name(lg.getEffectiveLevel()), read_only=False,
                    is_default=False, config_source=6, is_sensitive=False, synonyms=[],
                    config_type=0, documentation=None))
        return out
    if res.resource_type == GROUP:
        return _describe_group(broker, res.resource_name, keys, synonyms, docs)
    if res.resource_type == CLIENT_METRICS:
        return _describe_client_metrics(broker, res.resource_name)
    raise ResourceError(E.INVALID_REQUEST, f"Unsupported resource type: "
                        f"{_TYPE_NAMES.get(res.resource_type, res.resource_type)}")


_GROUP_DOCS = {"consumer.session.timeout.ms": "The timeout to detect client failures when using the consumer "
                                              "group protocol.",
               "consumer.heartbeat.interval.ms": "The heartbeat interval given to the members of a consumer group.",
               "share.session.timeout.ms": "The timeout to detect client failures when using the share group "
                                           "protocol.",
               "share.heartbeat.interval.ms": "The heartbeat interval given to the members of a share group.",
               "share.record.lock.duration.ms": "The record acquisition lock duration in milliseconds for share "
                                                "groups.",
               "share.auto.offset.reset": "The strategy to initialize the share-partition start offset: latest, "
                                          "earliest or by_duration:<ISO-8601 duration>.",
               "share.isolation.level": "Whether share group members read transactional records: "
                                        "read_uncommitted or read_committed.",
               "streams.session.timeout.ms": "The timeout to detect client failures when using the streams "
                                             "group protocol.",
               "streams.heartbeat.interval.ms": "The heartbeat interval given to the members of a streams group.",
               "streams.num.standby.replicas": "The number of standby replicas for each task of a streams group.",
               "streams.initial.rebalance.delay.ms": "How long a new streams group waits for more members before "
                                                     "its first task assignment."}


def _describe_group(broker, group: str, keys, synonyms: bool, docs: bool) -> list:
    """KIP-848's GROUP resource: each group config with the group's own value (source
    GROUP_CONFIG) or the broker's (source DEFAULT_CONFIG).  As in Kafka 4.x the one synonym is
    the key itself, with that value and source (no broker key: Kafka's broker synonyms of a
    group config name are that name alone, which is no broker config)."""
    from broker.config import GROUP_CONFIG
    from controller.api import GROUP_CONFIGS, GROUP_STRING_CONFIGS
    if not group:
        raise ResourceError(E.INVALID_REQUEST, "Group name must not be empty")
    own = broker.controller.group_configs(group)
    out = []
    for name, (broker_key, _lo, _hi) in GROUP_CONFIGS.items():
        if keys is not None and name not in keys:
            continue
        value = own.get(name, str(broker.config.get(broker_key)))
        syn = [DR.DescribeConfigsSynonym(name=name, value=value, source=GROUP_CONFIG if name in own else 5)] \
            if synonyms else []
        out.append(DR.DescribeConfigsResourceResult(
            name=name, value=value, read_only=False, is_default=name not in own,
            config_source=GROUP_CONFIG if name in own else 5, is_sensitive=False, synonyms=syn,
            config_type=3, documentation=_GROUP_DOCS[name] if docs else None))
    for name, default in GROUP_STRING_CONFIGS.items():
        if keys is not None and name not in keys:
            continue
        value = own.get(name, default)
        syn = [DR.DescribeConfigsSynonym(name=name, value=value, source=GROUP_CONFIG if name in own else 5)] \
            if synonyms else []
        out.append(DR.DescribeConfigsResourceResult(
            name=name, value=value, read_only=False, is_default=name not in own,
            config_source=GROUP_CONFIG if name in own else 5, is_sensitive=False, synonyms=syn,
            config_type=2, documentation=_GROUP_DOCS[name] if docs else None))
    return out


async def _alter_group(ctx, group: str, new_configs: dict, validate_only: bool) -> None:
    r = await ctx.broker.controller.alter_group_configs(group, new_configs, validate_only=validate_only)
    if r.error_code:
        raise ResourceError(r.error_code, r.error_message)


def _describe_client_metrics(broker, name: str) -> list:
    """KIP-714's CLIENT_METRICS resource: the keys set on the subscription, in the order Kafka's
    broker lists them (its Properties' hash order); Kafka ignores ``configuration_keys`` here."""
    if not name:
        raise ResourceError(E.INVALID_REQUEST, "Client metrics subscription name must not be empty")
    own = broker.controller.client_metrics_configs().get(name, {})
    return [DR.DescribeConfigsResourceResult(
        name=key, value=own[key], read_only=False, is_default=False, config_source=CLIENT_METRICS_CONFIG,
        is_sensitive=False, synonyms=[], config_type=0, documentation=None) for key in java_hash_order(own)]


async def _alter_client_metrics(ctx, name: str, new_configs: dict, validate_only: bool, entries: dict) -> None:
    async def attempt(only: bool):
        r = await ctx.broker.controller.alter_client_metrics(name, new_configs, validate_only=only)
        if r.error_code:
            raise ResourceError(r.error_code, r.error_message)
    await _checked(ctx, "CLIENT_METRICS", name, entries, attempt, validate_only)


def _entry(e) -> DR.DescribeConfigsResourceResult:
    return DR.DescribeConfigsResourceResult(
        name=e.name, value=e.value, read_only=e.read_only, is_default=e.is_default,
        config_source=e.source, is_sensitive=e.sensitive,
        synonyms=[DR.DescribeConfigsSynonym(name=s.name, value=s.value, source=s.source)
                  for s in e.synonyms],
        config_type=e.config_type, documentation=e.documentation)


@handler(32, 0, 4)
async def describe_configs(ctx, req):
    v = ctx.api_version
    synonyms = bool(req.include_synonyms) if v >= 1 else False
    docs = bool(req.include_documentation) if v >= 3 else False
    refresh = getattr(ctx.broker.controller, "refresh_topic_configs", None)
    if refresh is not None:     # ZooKeeper mode: read as Kafka does, from ZooKeeper
        await refresh([r.resource_name for r in req.resources if r.resource_type == TOPIC])
    results = []
    for res in req.resources:
        out = DR.DescribeConfigsResult(error_code=0, error_message=None,
                                       resource_type=res.resource_type,
                                       resource_name=res.resource_name, configs=[])
        try:
            entries = _describe_one(ctx, res, synonyms, docs)
            out.configs = [e if isinstance(e, DR.DescribeConfigsResourceResult) else _entry(e)
                           for e in entries]
        except ResourceError as e:
            out.error_code, out.error_message = e.code, e.message
        except ConfigError as e:
            out.error_code, out.error_message = e.error_code, str(e)
        results.append(out)
    return DR(throttle_time_ms=0, results=results)


# ----------------------------------------------------------------------------- altering

def _check_topic_values(name: str, configs: dict) -> None:
    unknown = [k for k in configs if k not in TOPIC_KEYS]
    if unknown:
        raise ResourceError(E.INVALID_CONFIG, f"Unknown topic config name: {unknown[0]}")
    for k, val in configs.items():
        try:
            validate_topic_config(k, val)
        except ConfigError as e:
            raise ResourceError(E.INVALID_CONFIG, f"Invalid config value for resource "      # as Kafka 3.9
                                f"{_resource_str(TOPIC, name)}: {e}") from None


async def _checked(ctx, rtype: str, name: str, entries: dict, attempt, validate_only: bool) -> None:
    """``attempt(validate_only)`` (raises ResourceError on failure); with an
    alter.config.policy.class.name (broker/policy.py) a validate-only attempt comes first and the
    policy is asked after it, with the request's entries, as Kafka asks it."""
    policies = ctx.broker.policies
    if policies is not None and policies.alter_config is not None:
        await attempt(True)
        verdict = policies.check_alter(rtype, name, entries)
        if verdict is not None:
            raise ResourceError(*verdict)
    await attempt(validate_only)


async def _alter_topic(ctx, name: str, new_configs: dict, validate_only: bool, entries: dict) -> None:
    ctrl = ctx.broker.controller
    if name == "":
        raise ResourceError(E.INVALID_REQUEST, "Default topic resources are not allowed.")
    if ctrl.topic(name) is None:
        raise ResourceError(E.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
    _check_topic_values(name, new_configs)

    async def attempt(only: bool):
        r = await ctrl.alter_topic_configs(name, new_configs, validate_only=only)
        if r.error_code:
            raise ResourceError(r.error_code, r.error_message)
    await _checked(ctx, "TOPIC", name, entries, attempt, validate_only)


_THREAD_POOLS = ("num.io.threads", "num.network.threads", "num.replica.fetchers",
                 "num.recovery.threads.per.data.dir", "background.threads")


def _check_thread_counts(ctx, bid, new_configs: dict) -> None:
    """Kafka's reconfiguration checks of thread counts (DynamicThreadPool, the socket server's
    processors, the log cleaner): at least 1, and no less than half and no more than double the
    value this broker runs with, for a change that takes effect on this broker."""
    cfg = ctx.broker.config
    own = {} if bid is not None else (ctx.broker.controller.broker_configs(ctx.broker.broker_id) or {})
    for key in (*_THREAD_POOLS, "log.cleaner.threads"):
        value = new_configs.get(key)
        if value is None or key in own:       # absent, or overridden for this broker
            continue
        try:
            new, old = int(value), int(cfg.get(key))
        except (TypeError, ValueError):
            continue                          # not a number: the value check reports it
        if new == old:
            continue
        if key == "log.cleaner.threads":
            why = ("Log cleaner threads should be at least 1" if new < 1 else
                   f"Log cleaner threads cannot be reduced to less than half the current value {old}"
                   if new < old // 2 else
                   f"Log cleaner threads cannot be increased to more than double the current value {old}"
                   if new > old * 2 else None)
        else:
            head = f"Dynamic thread count update validation failed for {key}={value}"
            why = (f"{head}, value should be at least 1" if new <= 0 else
                   f"{head}, value should be at least half the current value {old}" if new < old // 2 else
                   f"{head}, value should not be greater than double the current value {old}"
                   if new > old * 2 else None)
        if why:   # Kafka wraps it twice, into this odd text
            raise ResourceError(E.INVALID_REQUEST, f"Invalid value org.apache.kafka.common.config.ConfigException: "
                                                   f"{why} for configuration Invalid dynamic configuration")


async def _alter_broker(ctx, bid, new_configs: dict, validate_only: bool, name: str, entries: dict) -> None:
    _check_thread_counts(ctx, bid, new_configs)

    async def attempt(only: bool):
        r = await ctx.broker.controller.alter_broker_configs(bid, new_configs, validate_only=only)
        if r.error_code:
            # Kafka answers every broker-config validation failure with INVALID_REQUEST.
            raise ResourceError(E.INVALID_REQUEST, r.error_message)
    await _checked(ctx, "BROKER", name, entries, attempt, validate_only)


def _preflight(resources, ops_of) -> dict[int, ResourceError]:
    """Checks common to both alter APIs, by resource index."""
    errors: dict[int, ResourceError] = {}
    first: dict[tuple, int] = {}
    for i, res in enumerate(resources):
        key = (res.resource_type, res.resource_name)
        if key in first:
            for j in (first[key], i):
                errors[j] = ResourceError(E.INVALID_REQUEST, "Each resource must appear at most once.")
        else:
            first[key] = i
    for i, res in enumerate(resources):
        if i in errors:
            continue
        ops = ops_of(res)
        names = [n for n, _op, _v in ops]
        if len(set(names)) != len(names):
            errors[i] = ResourceError(E.INVALID_REQUEST, "Error due to duplicate config keys")
            continue
        nulls = [n for n, op, val in ops if val is None and op != OP_DELETE]
        if nulls:
            errors[i] = ResourceError(E.INVALID_REQUEST,
                                      "Null value not supported for : " + ", ".join(nulls))
            continue
        unknown_ops = [op for _n, op, _v in ops if op not in _OP_NAMES]
        if unknown_ops:
            errors[i] = ResourceError(E.INVALID_REQUEST, f"Unknown operations type {unknown_ops[0]}")
    return errors


def _response_entry(cls, res, err: ResourceError | None):
    return cls(error_code=err.code if err else 0, error_message=err.message if err else None,
               resource_type=res.resource_type, resource_name=res.resource_name)


@handler(33, 0, 2)
async def alter_configs(ctx, req):
    R = AlterConfigsResponse
    validate_only = bool(req.validate_only)
    ops_of = lambda res: [(c.name, OP_SET, c.value) for c in res.configs]   # noqa: E731
    errors = _preflight(req.resources, ops_of)
    out = []
    for i, res in enumerate(req.resources):
        err = errors.get(i)
        if err is None:
            configs = {c.name: c.value for c in res.configs}
            try:
                if res.resource_type == TOPIC:
                    await _alter_topic(ctx, res.resource_name, configs, validate_only, configs)
                elif res.resource_type == BROKER:
                    bid = _broker_entity(ctx.broker, res.resource_name)
                    await _alter_broker(ctx, bid, configs, validate_only, res.resource_name, configs)
                elif res.resource_type == CLIENT_METRICS:
                    await _alter_client_metrics(ctx, res.resource_name, configs, validate_only, configs)
                else:
                    raise ResourceError(E.INVALID_REQUEST,
                                        f"Unknown resource type {res.resource_type}")
            except ResourceError as e:
                err = e
        if err is not None:
            log.info("AlterConfigs of %s failed: %s",
                     _resource_str(res.resource_type, res.resource_name), err.message)
        out.append(_response_entry(R.AlterConfigsResourceResponse, res, err))
    return R(throttle_time_ms=0, responses=out)


@handler(44, 0, 1)
async def incremental_alter_configs(ctx, req):
    R = IncrementalAlterConfigsResponse
    broker = ctx.broker
    ctrl = broker.controller
    validate_only = bool(req.validate_only)
    ops_of = lambda res: [(c.name, c.config_operation, c.value) for c in res.configs]  # noqa: E731
    errors = _preflight(req.resources, ops_of)
    out = []
    for i, res in enumerate(req.resources):
        err = errors.get(i)
        if err is None:
            ops = ops_of(res)
            try:
                if res.resource_type == TOPIC:
                    info = ctrl.topic(res.resource_name)
                    current = info.configs if info is not None else {}
                    try:
                        new = apply_incremental(current, ops, "topic")
                    except ConfigError as e:
                        raise ResourceError(e.error_code, str(e)) from None
                    await _alter_topic(ctx, res.resource_name, new, validate_only,
                                       {n: v for n, _op, v in ops})
                elif res.resource_type == BROKER:
                    bid = _broker_entity(broker, res.resource_name)
                    try:
                        new = apply_incremental(ctrl.broker_configs(bid), ops, "broker")
                    except ConfigError as e:
                        raise ResourceError(e.error_code, str(e)) from None
                    await _alter_broker(ctx, bid, new, validate_only, res.resource_name,
                                        {n: v for n, _op, v in ops})
                elif res.resource_type == BROKER_LOGGER:
                    _broker_entity(broker, res.resource_name, allow_default=False)
                    _check_logger_ops(ops)
                    if not validate_only:
                        _apply_logger_ops(ops)
                elif res.resource_type == GROUP:
                    bad = [n for n, op, _v in ops if op not in (OP_SET, OP_DELETE)]
                    if bad:
                        raise ResourceError(E.INVALID_CONFIG, f"Config value append or subtract is not allowed "
                                                              f"for config key: {bad[0]}")
                    new = dict(ctrl.group_configs(res.resource_name))
                    for name, op, value in ops:
                        if op == OP_SET:
                            new[name] = value
                        else:
                            new.pop(name, None)
                    await _alter_group(ctx, res.resource_name, new, validate_only)
                elif res.resource_type == CLIENT_METRICS:
                    for name, op, _v in ops:
                        if op in (OP_APPEND, OP_SUBTRACT):
                            raise ResourceError(E.INVALID_CONFIG, f"Can't {_OP_NAMES[op]} to key {name} "
                                                                  "because its type is not LIST.")
                    new = dict(ctrl.client_metrics_configs().get(res.resource_name, {}))
                    for name, op, value in ops:
                        if op == OP_SET:
                            new[name] = value
                        else:
                            new.pop(name, None)
                    await _alter_client_metrics(ctx, res.resource_name, new, validate_only,
                                                {n: v for n, _op, v in ops})
                else:
                    raise ResourceError(E.INVALID_REQUEST,
                                        f"Unknown resource type {res.resource_type}")
            except ResourceError as e:
                err = e
        if err is not None:
            log.info("IncrementalAlterConfigs of %s failed: %s",
                     _resource_str(res.resource_type, res.resource_name), err.message)
        out.append(_response_entry(R.AlterConfigsResourceResponse, res, err))
    return R(throttle_time_ms=0, responses=out)
