"""``strom dump-log FILE...``: Kafka's DumpLogSegments for strom's (Kafka's) segment files.

For .log files every batch with its header fields and CRC check, and with --print-data-log
every record (transaction markers as Kafka prints them: ``endTxnMarker: COMMIT``; the records of
__consumer_offsets and __transaction_state decoded as JSON, as Kafka's --offsets-decoder and
--transaction-log-decoder do, chosen from the partition directory's name); for .index and
.timeindex files every entry, flagged where it disagrees with the segment's .log next to it; for
.txnindex files every aborted transaction.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from typing import TextIO

from strom.group import records as group_records
from strom.protocol.compression import CompressionType
from strom.protocol.errors import KafkaError
from strom.protocol.records import (
    BatchHeader,
    batch_crc,
    decode_batch_records,
    read_batch_header,
    read_control_record,
)
from strom.storage.txn_index import CorruptTxnIndexError, TransactionIndex
from strom.txn import records as txn_records

TIMESTAMP_NAMES = {0: "CreateTime", 1: "LogAppendTime"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help=".log, .index, .timeindex or .txnindex files")
    parser.add_argument("--print-data-log", action="store_true", help="print every record's key, value and headers")
    parser.add_argument("--max-bytes", type=int, default=2**31 - 1, help="stop after this many bytes of a .log")
    parser.add_argument(
        "--offsets-decoder",
        action="store_true",
        help="decode records as __consumer_offsets records (implied in its partition directories)",
    )
    parser.add_argument(
        "--transaction-log-decoder",
        action="store_true",
        help="decode records as __transaction_state records (implied in its partition directories)",
    )


def _decode_offsets_record(key: bytes, value: bytes | None) -> tuple[str, str]:
    decoded = group_records.decode_key(key)
    if isinstance(decoded, group_records.OffsetKey):
        payload = None if value is None else dataclasses.asdict(group_records.decode_offset_value(value))
        kind = "offset_commit"
    else:
        payload = None if value is None else dataclasses.asdict(group_records.decode_group_value(value))
        kind = "group_metadata"
        if payload is not None:
            for member in payload["members"]:  # opaque protocol bytes: their sizes say enough
                member["subscription"] = len(member["subscription"])
                member["assignment"] = len(member["assignment"])
    return (
        json.dumps({"type": kind, "data": dataclasses.asdict(decoded)}),
        "<DELETE>" if payload is None else json.dumps(payload),
    )


def _decode_transaction_record(key: bytes, value: bytes | None) -> tuple[str, str]:
    key_json = json.dumps(
        {"type": str(txn_records.KEY_VERSION), "data": {"transactionalId": txn_records.decode_key(key)}}
    )
    if value is None:
        return key_json, "<DELETE>"
    v = txn_records.decode_value(value)
    return key_json, json.dumps(
        {
            "version": str(txn_records.VALUE_VERSION),
            "data": {
                "producerId": v.producer_id,
                "producerEpoch": v.producer_epoch,
                "transactionTimeoutMs": v.timeout_ms,
                "transactionStatus": v.state.display_name,
                "transactionPartitions": [{"topic": t, "partitionIds": ps} for t, ps in sorted(v.partitions.items())],
                "transactionLastUpdateTimestampMs": v.last_update_ms,
                "transactionStartTimestampMs": v.start_ms,
            },
        }
    )


def _decoder_for(path: str, args: argparse.Namespace):
    directory = os.path.basename(os.path.dirname(os.path.abspath(path)))
    if getattr(args, "transaction_log_decoder", False) or directory.startswith("__transaction_state-"):
        return _decode_transaction_record
    if getattr(args, "offsets_decoder", False) or directory.startswith("__consumer_offsets-"):
        return _decode_offsets_record
    return None


def _plain_record(key: bytes | None, value: bytes | None) -> tuple[str, str]:
    return (
        "" if key is None else key.decode("utf-8", "replace"),
        "" if value is None else value.decode("utf-8", "replace"),
    )


def scan_log(path: str, max_bytes: int = -1) -> tuple[list[tuple[BatchHeader, bytes]], str | None]:
    """Every batch of a .log file with its bytes, and a description of trailing damage if any."""
    with open(path, "rb") as handle:
        data = handle.read(max_bytes)
    batches: list[tuple[BatchHeader, bytes]] = []
    position = 0
    while position < len(data):
        try:
            header = read_batch_header(data, position, len(data) - position)
        except KafkaError as exc:
            return batches, f"at position {position}: {exc}"
        batches.append((header, data[position : position + header.size]))
        position += header.size
    return batches, None


def _bool(value: bool) -> str:
    return "true" if value else "false"


def dump_log(path: str, print_data: bool, max_bytes: int, out: TextIO, decoder=None) -> None:
    base = os.path.basename(path).split(".")[0]
    out.write(f"Dumping {path}\nLog starting offset: {int(base) if base.isdigit() else 0}\n")
    batches, damage = scan_log(path, max_bytes)
    for header, data in batches:
        valid = batch_crc(data, 0, header.size) == header.crc
        codec = CompressionType(header.compression).kafka_name if header.compression <= 4 else "unknown"
        out.write(
            f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} count: {header.records_count} "
            f"baseSequence: {header.base_sequence} lastSequence: {header.last_sequence} "
            f"producerId: {header.producer_id} producerEpoch: {header.producer_epoch} "
            f"partitionLeaderEpoch: {header.partition_leader_epoch} "
            f"isTransactional: {_bool(header.is_transactional)} isControl: {_bool(header.is_control)} "
            f"position: {header.position} {TIMESTAMP_NAMES[header.timestamp_type]}: {header.max_timestamp} "
            f"size: {header.size} magic: {header.magic} compresscodec: {codec} crc: {header.crc} "
            f"isvalid: {_bool(valid)}\n"
        )
        if print_data and valid:
            header_at_zero = BatchHeader(**{**_fields(header), "position": 0})
            if header.is_control:
                out.write(_marker_line(data, header_at_zero))
                continue
            for record in decode_batch_records(data, header_at_zero):
                keys = ",".join(k for k, _ in record.headers)
                key, value = _plain_record(record.key, record.value)
                if decoder is not None and record.key is not None:
                    try:
                        key, value = decoder(record.key, record.value)
                    except group_records.RecordFormatError as exc:
                        value = f"{value} (undecodable: {exc})"
                out.write(
                    f"| offset: {record.offset} {TIMESTAMP_NAMES[header.timestamp_type]}: {record.timestamp} "
                    f"keySize: {-1 if record.key is None else len(record.key)} "
                    f"valueSize: {-1 if record.value is None else len(record.value)} "
                    f"headerKeys: [{keys}] key: {key} payload: {value}\n"
                )
    if damage:
        out.write(f"Found a corrupt or truncated batch {damage}\n")


def _marker_line(data: bytes, header: BatchHeader) -> str:
    try:
        commit, coordinator_epoch = read_control_record(data, header)
        what = f"endTxnMarker: {'COMMIT' if commit else 'ABORT'} coordinatorEpoch: {coordinator_epoch}"
    except KafkaError as exc:
        what = f"unknown control record: {exc}"
    return f"| offset: {header.base_offset} {TIMESTAMP_NAMES[header.timestamp_type]}: {header.max_timestamp} {what}\n"


def dump_txn_index(path: str, out: TextIO) -> int:
    """Print the aborted transactions of a .txnindex; returns 1 if the file is corrupt."""
    out.write(f"Dumping {path}\n")
    try:
        entries = TransactionIndex.read_entries(path)
    except CorruptTxnIndexError as exc:
        out.write(f"{exc}\n")
        return 1
    for entry in entries:
        out.write(
            f"version: 0 producerId: {entry.producer_id} firstOffset: {entry.first_offset} "
            f"lastOffset: {entry.last_offset} lastStableOffset: {entry.last_stable_offset}\n"
        )
    return 0


def _fields(header: BatchHeader) -> dict:
    return {name: getattr(header, name) for name in BatchHeader.__slots__}


def dump_index(path: str, out: TextIO) -> int:
    """Print the entries of a .index/.timeindex; returns how many disagree with the .log."""
    is_time = path.endswith(".timeindex")
    entry_size = 12 if is_time else 8
    base = int(os.path.basename(path).split(".")[0])
    log_path = os.path.join(os.path.dirname(path), f"{base:020d}.log")
    batches, _ = scan_log(log_path) if os.path.exists(log_path) else ([], None)
    by_position = {h.position: h for h, _ in batches}
    with open(path, "rb") as handle:
        data = handle.read()
    out.write(f"Dumping {path}\n")
    mismatches = 0
    usable = len(data) - len(data) % entry_size
    for start in range(0, usable, entry_size):
        chunk = data[start : start + entry_size]
        if start and chunk == bytes(entry_size):
            break  # preallocated tail
        if is_time:
            timestamp = int.from_bytes(chunk[:8], "big", signed=True)
            offset = base + int.from_bytes(chunk[8:], "big")
            seen = [h.max_timestamp for h, _ in batches if h.base_offset <= offset]
            ok = bool(seen) and max(seen) == timestamp
            out.write(
                f"timestamp: {timestamp} offset: {offset}{'' if ok else '  MISMATCH: not the max timestamp of the log up to this offset'}\n"
            )
        else:
            offset = base + int.from_bytes(chunk[:4], "big")
            position = int.from_bytes(chunk[4:], "big")
            batch = by_position.get(position)
            ok = batch is not None and batch.last_offset == offset
            out.write(
                f"offset: {offset} position: {position}{'' if ok else '  MISMATCH: no batch ending at this offset starts at this position'}\n"
            )
        mismatches += not ok
    if len(data) % entry_size:
        out.write(f"Index size {len(data)} is not a multiple of {entry_size}: corrupt\n")
        mismatches += 1
    return mismatches


def run(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    status = 0
    for path in args.files:
        if not os.path.exists(path):
            print(f"strom dump-log: {path}: no such file", file=sys.stderr)
            status = 1
        elif path.endswith(".log"):
            dump_log(path, args.print_data_log, args.max_bytes, out, _decoder_for(path, args))
        elif path.endswith((".index", ".timeindex")):
            if dump_index(path, out):
                status = 2
        elif path.endswith(".txnindex"):
            if dump_txn_index(path, out):
                status = 2
        else:
            print(f"strom dump-log: {path}: not a .log, .index, .timeindex or .txnindex file", file=sys.stderr)
            status = 1
    return status
