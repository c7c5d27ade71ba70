"""kafka-dump-log.sh: print the batches and records of segment files (.log), and the entries
of offset (.index) and time (.timeindex) indexes, in Kafka's line formats."""
from __future__ import annotations

import json
import mmap
import os
import struct
import sys

from protocol import records as rec
from protocol.compression import CODEC_NAMES
from tools import record_json as RJ
from tools.common import OptionParser, ToolError, parse_or_exit, require, run

DESCRIPTION = ("Prints what is stored in segment files (.log) and their offset and time indexes, "
               "for inspecting data on disk or checking suspect files.")
TS_TYPES = {0: "CreateTime", 1: "LogAppendTime", -1: "NoTimestampType"}
CONTROL_TYPES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER",
                 4: "SNAPSHOT_FOOTER", 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}


def build_parser() -> OptionParser:
    p = OptionParser(DESCRIPTION)
    p.add("help", "Show this help and exit.")
    p.add("version", "Show the version (the Kafka release these tools follow, and Odradek) and exit.")
    p.add("files", "REQUIRED: the segment (.log) and index (.index, .timeindex) files to "
                   "print, separated by commas.", "file1, file2, ...")
    p.add("print-data-log", "Print record keys and values too (implies --deep-iteration).")
    p.add("deep-iteration", "Print every record, not only the batch lines.")
    p.add("verify-index-only", "Check index entries against the log without printing them.")
    p.add("index-sanity-check", "Only check that index files look sane.")
    p.add("max-message-size", "Upper bound on a message's size, in bytes.", "Integer", type=int,
          default=5 * 1024 * 1024)
    p.add("max-bytes", "Read at most this many bytes of each .log file.", "Integer", type=int,
          default=2 ** 31 - 1)
    p.add("offsets-decoder", "Decode the records as __consumer_offsets keys and values "
                             "(implies --print-data-log).")
    p.add("share-group-state-decoder", "Decode the records as __share_group_state keys and "
                                       "values (implies --print-data-log).")
    p.add("transaction-log-decoder", "Decode the records as __transaction_state keys "
                                     "(implies --print-data-log).")
    p.add("skip-record-metadata", "Leave out each record's offset, timestamp, sizes, sequence and "
                                  "header keys (keys and payloads are still printed).")
    p.add("key-decoder-class", "Only the string decoder is available.", "String",
          default="org.apache.kafka.tools.api.StringDecoder")
    p.add("value-decoder-class", "Only the string decoder is available.", "String",
          default="org.apache.kafka.tools.api.StringDecoder")
    return p


# -- __consumer_offsets / __transaction_state decoding ------------------------------------------

def _j(o):
    return json.dumps(o, separators=(",", ":"))


def _coordinator_parser(key_of, value_of):
    """A --*-decoder: each record as DumpLogSegments prints a coordinator record,
    ``{"type":"<key type>","data":{...}}`` and ``{"version":"<value version>","data":{...}}``
    (``<DELETE>`` for a tombstone)."""
    def parse(key, value):
        if key is None:
            return "NO_KEY", "NO_PAYLOAD" if value is None else "<unknown>"
        try:
            kind, kd = key_of(key)
        except Exception:
            return "<unparseable>", "<unparseable>"
        if kd is None:
            return _j({"type": str(kind), "data": "<unknown>"}), "<unknown>"
        key_s = _j({"type": str(kind), "data": kd})
        if value is None:
            return key_s, "<DELETE>"
        try:
            version, data = value_of(kind, value)
        except Exception:
            return key_s, "<unparseable>"
        return key_s, _j({"version": str(version), "data": data})
    return parse


offsets_parser = _coordinator_parser(RJ.group_key, lambda kind, value: RJ.group_value(kind, value, decode_embedded=True))
share_state_parser = _coordinator_parser(RJ.share_state_key, RJ.share_state_value)


def txn_parser(key, value):
    """A __transaction_state record as Kafka 3.9's TransactionLog.formatRecordKeyAndValue prints
    it: ``transaction_metadata::transactionalId=<id>`` and ``producerId:..,producerEpoch:..,
    state=..,partitions=[t-0,..],txnLastUpdateTimestamp=..,txnTimeoutMs=..``."""
    from broker.txn import records as TR
    from broker.txn.metadata import TxnState
    if key is None:
        return "NO_KEY", "NO_PAYLOAD"
    try:
        tid = TR.parse_key(key)
    except TR.RecordFormatError:
        return "<unparseable>", None
    if tid is None:
        return f"unknown::version={struct.unpack_from('>h', bytes(key))[0]}", None
    key_s = f"transaction_metadata::transactionalId={tid}"
    try:
        v = TR.parse_value(value)
    except TR.RecordFormatError:
        return key_s, "<unparseable>"
    if v is None:
        return key_s, "<DELETE>"
    parts = ",".join(f"{t}-{p}" for t, ps in (v.partitions or {}).items() for p in ps)
    return key_s, (f"producerId:{v.producer_id},producerEpoch:{v.producer_epoch},"
                   f"state={TxnState(v.state).display},partitions=[{parts}],"
                   f"txnLastUpdateTimestamp={v.last_update_ms},txnTimeoutMs={v.timeout_ms}")


def string_parser(key, value):
    k = None if key is None else bytes(key).decode("utf-8", "replace")
    v = "null" if value is None else bytes(value).decode("utf-8", "replace")
    return k, v


# -- dumping --------------------------------------------------------------------------------------

def batch_line(h, position, out):  # noqa: ARG001
    if h.magic >= 2:
        horizon = (f"OptionalLong[{h.base_timestamp}]" if h.attributes & rec.DELETE_HORIZON_MASK
                   else "OptionalLong.empty")
        head = (f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
                f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} "
                f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
                f"partitionLeaderEpoch: {h.partition_leader_epoch} "
                f"isTransactional: {str(h.is_transactional).lower()} "
                f"isControl: {str(h.is_control).lower()} deleteHorizonMs: {horizon}")
    else:
        head = f"offset: {h.base_offset}"
    return head


def dump_log(path, o, parser, deep, out):
    name = os.path.basename(path)
    if name.endswith(".log"):
        try:
            out.append(f"Log starting offset: {int(name.split('.')[0])}")
        except ValueError:
            pass
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
    try:
        buf = memoryview(data)[:min(size, o["max-bytes"])]
        valid = 0
        last = -1
        gaps = []
        try:
            for h in rec.iter_batches(buf):
                emit_batch(buf, h, valid, o, parser, deep, out)
                if deep and h.magic >= 2:
                    for r in rec.iter_records(buf, h):
                        if last != -1 and r.offset != last + 1:
                            gaps.append((last, r.offset))
                        last = r.offset
                valid += h.size
                if len(out) > 2000:
                    sys.stdout.write("\n".join(out) + "\n")
                    out.clear()
        except rec.CorruptRecordError as e:
            out.append(f"Found a corrupt batch at position {valid}: {e}")
        trailing = len(buf) - valid
        if trailing > 0 and o["max-bytes"] == 2 ** 31 - 1:
            out.append(f"Found {trailing} invalid bytes at the end of {name}")
        buf.release()
    finally:
        if size:
            data.close()
    return gaps


def emit_batch(buf, h, position, o, parser, deep, out):
    if h.magic >= 2:
        try:
            rec.validate_batch(buf, h)
            valid = True
        except rec.RecordError:
            valid = False
        ts_type = TS_TYPES[h.timestamp_type]
        out.append(batch_line(h, position, out) +
                   f" position: {position} {ts_type}: {h.max_timestamp} size: {h.size} "
                   f"magic: {h.magic} compresscodec: {CODEC_NAMES.get(h.compression, 'unknown')} "
                   f"crc: {h.crc} isvalid: {str(valid).lower()}")
        if not deep:
            return
        for r in rec.iter_records(buf, h):
            parts = []
            if not o.has("skip-record-metadata"):
                seq = -1 if h.base_sequence < 0 else (h.base_sequence + r.offset - h.base_offset) & 0x7FFFFFFF
                klen = -1 if r.key is None else len(r.key)
                vlen = -1 if r.value is None else len(r.value)
                parts.append(f"offset: {r.offset} {ts_type}: {r.timestamp} keySize: {klen} "
                             f"valueSize: {vlen} sequence: {seq} headerKeys: "
                             f"[{','.join(k for k, _ in r.headers)}]")
                if h.is_control:
                    try:
                        cr = rec.parse_control_record(r.key, r.value)
                        if cr.type in (0, 1):
                            parts.append(f"endTxnMarker: {CONTROL_TYPES[cr.type]} "
                                         f"coordinatorEpoch: {cr.coordinator_epoch}")
                        else:
                            parts.append(f"controlType: {CONTROL_TYPES.get(cr.type, 'UNKNOWN')}({cr.type})")
                    except rec.RecordError:
                        parts.append("controlType: UNKNOWN(-1)")
            if o.has("print-data-log") and not h.is_control:
                key, payload = parser(r.key, r.value)
                if key is not None:
                    parts.append(f"key: {key}")
                if payload is not None:          # none for a key Kafka's parser does not know
                    parts.append(f"payload: {payload}")
            out.append("| " + " ".join(parts))
    else:
        end = h.pos + h.size
        msgs = list(rec.iter_legacy(buf, h.pos, end, deep=False, check_crc=False))
        m = msgs[0] if msgs else None
        ts_type = "NoTimestampType" if h.magic == 0 else TS_TYPES[getattr(m, "timestamp_type", 0)]
        ts = -1 if h.magic == 0 else (m.timestamp if m else -1)
        codec = CODEC_NAMES.get((m.attributes if m else 0) & 7, "unknown")
        try:
            list(rec.iter_legacy(buf, h.pos, end, deep=False, check_crc=True))
            valid = True
        except rec.RecordError:
            valid = False
        out.append(f"offset: {h.base_offset} position: {position} {ts_type}: {ts} size: {h.size} "
                   f"magic: {h.magic} compresscodec: {codec} crc: {m.crc if m else 0} "
                   f"isvalid: {str(valid).lower()}")
        if deep:
            for lm in rec.iter_legacy(buf, h.pos, end, deep=True, check_crc=False):
                line = (f"| offset: {lm.offset} {ts_type}: {lm.timestamp if h.magic else -1} "
                        f"keySize: {-1 if lm.key is None else len(lm.key)} "
                        f"valueSize: {-1 if lm.value is None else len(lm.value)}")
                if o.has("print-data-log"):
                    key, payload = parser(lm.key, lm.value)
                    if key is not None:
                        line += f" key: {key}"
                    if payload is not None:
                        line += f" payload: {payload}"
                out.append(line)


def dump_index(path, o, out):
    base = int(os.path.basename(path).split(".")[0])
    with open(path, "rb") as f:
        data = f.read()
    if not data:
        out.append(f"{path} is empty.")
        return
    n = len(data) // 8
    for i in range(n):
        rel, pos = struct.unpack_from(">ii", data, i * 8)
        if rel == 0 and (i > 0 or pos == 0):
            break          # the zero-filled, preallocated tail
        if not o.has("verify-index-only"):
            out.append(f"offset: {base + rel} position: {pos}")
    if o.has("index-sanity-check"):
        out.append(f"{path} passed sanity check.")


def dump_time_index(path, o, out):
    base = int(os.path.basename(path).split(".")[0])
    with open(path, "rb") as f:
        data = f.read()
    if not data:
        out.append(f"{path} is empty.")
        return
    for i in range(len(data) // 12):
        ts, rel = struct.unpack_from(">qi", data, i * 12)
        if ts == 0 and rel == 0:
            break
        if not o.has("verify-index-only"):
            out.append(f"timestamp: {ts} offset: {base + rel}")


def execute(o):
    files = [f.strip() for f in o["files"].split(",") if f.strip()]
    if o.has("offsets-decoder"):
        parser = offsets_parser
    elif o.has("transaction-log-decoder"):
        parser = txn_parser
    elif o.has("share-group-state-decoder"):
        parser = share_state_parser
    else:
        parser = string_parser
    if o.has("offsets-decoder") or o.has("transaction-log-decoder") or o.has("share-group-state-decoder"):
        o["print-data-log"] = True
        o._given.add("print-data-log")
    deep = o.has("deep-iteration") or o.has("print-data-log")
    status = 0
    gaps_by_file = {}
    for path in files:
        out = [f"Dumping {path}"]
        try:
            if path.endswith(".log"):
                gaps = dump_log(path, o, parser, deep, out)
                if gaps:
                    gaps_by_file[os.path.abspath(path)] = gaps
            elif path.endswith(".index"):
                dump_index(path, o, out)
            elif path.endswith(".timeindex"):
                dump_time_index(path, o, out)
            else:
                sys.stdout.write("\n".join(out) + "\n")
                print(f"Ignoring unknown file {path}", file=sys.stderr)
                continue
        except FileNotFoundError:
            sys.stdout.write("\n".join(out) + "\n")
            raise ToolError(f"{path} (No such file or directory)") from None
        except (OSError, ValueError) as e:
            sys.stdout.write("\n".join(out) + "\n")
            raise ToolError(f"{path}: {e}") from None
        if out:
            sys.stdout.write("\n".join(out) + "\n")
    for path, gaps in gaps_by_file.items():
        print(f"Non-consecutive offsets in {path}", file=sys.stderr)
        for a, b in gaps:
            print(f"  {a} is followed by {b}", file=sys.stderr)
    return status


def main(argv=None) -> int:
    p = build_parser()

    def body(args):
        o = parse_or_exit(p, args, "This tool prints the contents of log segment and index "
                                   "files.")
        require(p, o, "files")
        return execute(o)

    return run(body, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
