"""The fuzz targets: each takes the fuzzer's bytes and returns, or raises Finding.

A target never needs atheris: tests/fuzz replays the kept corpora through the same functions.
Every target tells the documented error path (DecodeError, CloseConnection, KafkaError: an
error code or a closed connection) from a bug (anything else, an ERROR logged by strom, a
response that does not decode, an output past its stated bound, a wait longer than allowed).
"""

from __future__ import annotations

import logging
import os
import random
import resource
import shutil
import struct
import tempfile
import time
import traceback
from datetime import timedelta
from typing import TYPE_CHECKING

import crc32c

from strom.protocol import api
from strom.protocol.api import ApiKey
from strom.protocol.codec import decode, decode_request, decode_response, encode
from strom.protocol.errors import DecodeError, KafkaError
from strom.protocol.frame import FrameDecoder, FrameError, parse_request_header
from strom.protocol.records import ATTRIBUTES_OFFSET, BATCH_HEADER_SIZE, CRC_OFFSET, LOG_OVERHEAD

if TYPE_CHECKING:
    from strom.fuzz.harness import ErrorLog, InProcessBroker
    from strom.storage.log import Log

_I32 = struct.Struct(">i")
_CRC = struct.Struct(">I")


class Finding(AssertionError):
    """The input made strom do something outside its documented error path: a bug."""


# One input may raise the process's peak RSS by at most this much: every target handles inputs
# of at most a few KiB, so anything near it is an allocation the input made strom do.
RSS_GROWTH_LIMIT_KB = 96 * 1024


def run_checked(target, data: bytes) -> None:
    """``target.check(data)``, plus the memory bound: the peak RSS (ru_maxrss) may not jump."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    target.check(data)
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    if grown > RSS_GROWTH_LIMIT_KB:
        raise Finding(f"one input of {len(data)} bytes raised the peak RSS by {grown // 1024} MiB")


def unexpected(what: str, exc: BaseException) -> Finding:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return Finding(f"{what}: {type(exc).__name__}: {exc}\n{text}")


def fix_crcs(view: memoryview) -> int:
    """Rewrite the CRC of every whole batch in a writable record-set view; returns how many.

    A fuzzer cannot solve CRC-32C, so without this every mutated batch stops at the checksum.
    """
    position, total, fixed = 0, len(view), 0
    while total - position >= BATCH_HEADER_SIZE:
        size = _I32.unpack_from(view, position + 8)[0] + LOG_OVERHEAD
        if size < BATCH_HEADER_SIZE or size > total - position:
            break
        _CRC.pack_into(view, position + CRC_OFFSET, crc32c.crc32c(view[position + ATTRIBUTES_OFFSET : position + size]))
        fixed += 1
        position += size
    return fixed


# -- frame: FrameDecoder over a chunked stream, then request headers --------------------------------

FRAME_LIMIT = 1 << 16
_CHUNKS = (1, 2, 3, 4, 5, 7, 13, 61, 512, 4096)


def check_frame(data: bytes) -> None:
    """First byte: how the stream is chunked; the rest: the byte stream a client sends."""
    if not data:
        return
    rng = random.Random(data[0])
    stream = data[1:]
    expected, expect_error = _reference_frames(stream)
    decoder = FrameDecoder(FRAME_LIMIT)
    frames: list[bytes] = []
    failed = False
    position = 0
    while position < len(stream):
        size = rng.choice(_CHUNKS)
        chunk = stream[position : position + size]
        position += len(chunk)
        try:
            decoder.feed(chunk if rng.random() < 0.5 else bytearray(chunk))
            while (frame := decoder.next_frame()) is not None:
                frames.append(bytes(frame))
        except FrameError:
            failed = True
            break
        if decoder.buffered_bytes > position:
            raise Finding(f"decoder holds {decoder.buffered_bytes} bytes after receiving {position}")
    if failed != expect_error:
        raise Finding(f"FrameError raised: {failed}, expected: {expect_error}")
    if failed:
        if frames != expected[: len(frames)]:
            raise Finding("frames before the bad size prefix differ from the stream's")
    elif frames != expected:
        raise Finding(f"decoded {len(frames)} frames, the stream holds {len(expected)}")
    for whole in frames:
        _check_header(whole)


def _reference_frames(stream: bytes) -> tuple[list[bytes], bool]:
    frames: list[bytes] = []
    position = 0
    while len(stream) - position >= 4:
        (size,) = _I32.unpack_from(stream, position)
        if size < 0 or size > FRAME_LIMIT:
            return frames, True
        if len(stream) - position - 4 < size:
            break
        frames.append(stream[position + 4 : position + 4 + size])
        position += 4 + size
    return frames, False


def _check_header(frame: bytes) -> None:
    try:
        header, offset = parse_request_header(frame)
    except DecodeError:
        return
    except Exception as exc:
        raise unexpected("parse_request_header", exc) from None
    if not 8 <= offset <= len(frame):
        raise Finding(f"header ends at {offset} in a frame of {len(frame)} bytes")
    if header.header_version not in (0, 1, 2):
        raise Finding(f"header version {header.header_version}")


# -- decode: the dispatcher's decoders, without handlers --------------------------------------------


def _handlers():
    from strom.server.handlers import HANDLERS

    return HANDLERS


def warm_up_codec() -> None:
    """Compile the codec's reader of every served request version now, so that
    ``instrument_generated_readers`` sees them all (they are generated with exec, not imported)."""
    for spec in _handlers().values():
        for version in range(spec.min_version, spec.max_version + 1):
            cls = api.request_class(spec.api_key, version)
            if cls is not None:
                try:
                    decode(cls, b"")
                except DecodeError:
                    pass


def instrument_generated_readers(atheris) -> None:
    """Give the fuzzer coverage of the codec's generated readers (atheris instruments in place)."""
    from strom.protocol import codec

    warm_up_codec()
    for reader in list(codec._READERS.values()):
        if getattr(reader, "__code__", None) is not None and not getattr(reader, "_fuzz_instrumented", False):
            atheris.instrument_func(reader)
            setattr(reader, "_fuzz_instrumented", True)  # setattr: to mypy a function is a Callable, with no attributes


def check_decode(data: bytes) -> None:
    """A request frame (no size prefix) through the decoder the dispatcher would pick."""
    try:
        header, offset = parse_request_header(data)
    except DecodeError:
        return
    except Exception as exc:
        raise unexpected("parse_request_header", exc) from None
    spec = _handlers().get(header.api_key)
    if spec is None or not spec.min_version <= header.api_version <= spec.max_version:
        return
    try:
        if spec.decode is not None:
            request = spec.decode(data, offset, header.api_version)
        else:
            request = decode_request(header.api_key, header.api_version, data, offset)
    except DecodeError:
        return
    except Exception as exc:
        raise unexpected(f"decoding api {header.api_key} v{header.api_version}", exc) from None
    if header.api_key == ApiKey.PRODUCE:
        _compare_produce(data, offset, header.api_version, request)
    else:
        _round_trip(header.api_key, header.api_version, request)


def _compare_produce(data: bytes, offset: int, version: int, request) -> None:
    """The hand-written Produce decoder must read what kio's schema says, where both accept."""
    try:
        generic = decode_request(ApiKey.PRODUCE, version, data, offset)
    except DecodeError:
        return  # the hand decoder is more lenient (names are labels, invalid UTF-8 is replaced)
    want = (
        generic.transactional_id,
        generic.acks,
        generic.timeout // timedelta(milliseconds=1),
        [
            (t.name, [(p.index, None if p.records is None else bytes(p.records)) for p in t.partition_data])
            for t in generic.topic_data
        ],
    )
    got = (
        request.transactional_id,
        request.acks,
        request.timeout,
        [
            (name, [(index, None if records is None else bytes(records)) for index, records in partitions])
            for name, partitions in request.topic_data
        ],
    )
    if want != got:
        raise Finding(f"Produce v{version}: hand decoder read {got!r:.300}, the schema says {want!r:.300}")


def _round_trip(api_key: int, version: int, request) -> None:
    """What strom decoded must encode (kio's writer as the reference), and that encoding must
    decode and encode to the same bytes. Bytes, not objects, are compared: kio's writer turns
    timedeltas into milliseconds through a float, which moves 30-bit day counts by a millisecond.
    """
    try:
        encoded = encode(request)
        again = encode(decode(type(request), encoded)[0])
    except Exception as exc:
        raise unexpected(f"api {api_key} v{version}: a decoded request does not re-encode", exc) from None
    if again != encoded:
        raise Finding(f"api {api_key} v{version}: encode(decode(encode(request))) differs from encode(request)")


# -- broker: a real broker in this process -----------------------------------------------------------

# APIs whose answer may legitimately wait past the harness's cap (long polls, group barriers,
# transaction markers). Any other API that waits is a hang.
WAITING_APIS = {
    ApiKey.FETCH,
    ApiKey.PRODUCE,
    ApiKey.JOIN_GROUP,
    ApiKey.SYNC_GROUP,
    ApiKey.END_TXN,
    ApiKey.INIT_PRODUCER_ID,
    ApiKey.ADD_PARTITIONS_TO_TXN,
    ApiKey.ADD_OFFSETS_TO_TXN,
    ApiKey.TXN_OFFSET_COMMIT,
    ApiKey.OFFSET_COMMIT,
    ApiKey.WRITE_TXN_MARKERS,
}
RESTART_EVERY = 20_000  # inputs; a fresh broker and data dir keep a long run's state bounded
MAX_PARTITIONS = 400  # partitions a broker may accumulate before the harness restarts it
FUZZ_MAX_PARTITIONS_PER_REQUEST = 100
HANG_S = 5.0  # a request handled without waiting that takes this long blocks every other client


class BrokerTarget:
    """Request frames through Dispatcher.handle_frame and encode on a live in-process broker.

    A Produce request whose correlation id is odd gets its batches' CRCs fixed first, so the
    fuzzer reaches record validation, storage and idempotence; even ones keep their bytes.
    """

    def __init__(self, root: str | None = None):
        self.root = root
        self.broker: InProcessBroker | None = None
        self.errors: ErrorLog | None = None
        self._saved_cap: int | None = None
        self.executed = 0
        self.counts = {
            "answered": 0,
            "closed": 0,
            "kafka_error_closed": 0,
            "no_response": 0,
            "cut_waits": 0,
            "restarts": 0,
        }

    def setup(self) -> None:
        from strom.fuzz.harness import ErrorLog, InProcessBroker

        self.errors = errors = ErrorLog()
        strom_log = logging.getLogger("strom")
        strom_log.addHandler(errors)
        strom_log.setLevel(logging.WARNING)
        strom_log.propagate = False  # malformed input makes strom warn a lot; only ERRORs matter here
        warm_up_codec()
        # Kafka's cap of 10,000 new partitions per request still costs strom ~2 ms and 3 file
        # descriptors a partition; the harness lowers it so that one input stays within the
        # fuzzer's time and fd budget (tests/fuzz/test_found_bugs.py checks the real cap).
        from strom.server.handlers import create_topics

        self._saved_cap = create_topics.MAX_PARTITIONS_PER_REQUEST
        create_topics.MAX_PARTITIONS_PER_REQUEST = FUZZ_MAX_PARTITIONS_PER_REQUEST
        self.broker = InProcessBroker(root=self.root).start()
        errors.take()

    def teardown(self) -> None:
        if self.broker is not None:
            self.broker.close()
            self.broker = None
        if self.errors is not None:
            logging.getLogger("strom").removeHandler(self.errors)
        if self._saved_cap is not None:
            from strom.server.handlers import create_topics

            create_topics.MAX_PARTITIONS_PER_REQUEST = self._saved_cap

    def check(self, data: bytes) -> None:
        if self.broker is None:
            self.setup()
        broker, errors = self.broker, self.errors
        assert broker is not None and errors is not None  # setup() made them
        self.executed += 1
        if self.executed % RESTART_EVERY == 0 or broker.partitions > MAX_PARTITIONS:
            broker.restart()
            self.counts["restarts"] += 1
            errors.take()
        elif self.executed % 200 == 0:
            broker.settle(0.03)  # let timers run: session expiry, delayed reloads, the scheduler
        frame = bytearray(data)
        _maybe_fix_produce_crcs(frame)
        started = time.monotonic()
        header, outcome = broker.request(frame)
        took = time.monotonic() - started - outcome.waited
        if took > HANG_S:
            raise Finding(f"one request held the event loop for {took:.1f}s")
        logged = errors.take()
        if outcome.error is not None and not isinstance(outcome.error, KafkaError):
            raise unexpected("request", outcome.error)
        if logged:
            raise Finding("strom logged an error:\n" + "\n".join(_format_record(r) for r in logged))
        if outcome.error is not None or outcome.closed is not None:
            self.counts["closed"] += 1
            if outcome.error is not None and not isinstance(outcome.error, DecodeError):
                # documented, but the connection logs it as an internal error: worth a look in the report
                self.counts["kafka_error_closed"] += 1
            if outcome.closed == "cut by the harness after waiting":
                self.counts["cut_waits"] += 1
                if header.api_key not in WAITING_APIS:
                    raise Finding(
                        f"api {header.api_key} v{header.api_version} did not answer within {outcome.waited:.2f}s"
                    )
            return
        if outcome.response is None:
            self.counts["no_response"] += 1
            if header.api_key != ApiKey.PRODUCE:
                raise Finding(f"api {header.api_key} v{header.api_version} sent no response")
            return
        self.counts["answered"] += 1
        check_response(header, outcome.response, _handlers())


def _format_record(record: logging.LogRecord) -> str:
    text = f"{record.levelname} {record.name}: {record.getMessage()}"
    if record.exc_info:
        text += "\n" + "".join(traceback.format_exception(*record.exc_info))
    return text


def _maybe_fix_produce_crcs(frame: bytearray) -> None:
    if len(frame) < 10 or _I32.unpack_from(frame, 4)[0] & 1 == 0 or struct.unpack_from(">h", frame, 0)[0] != 0:
        return
    from strom.server.handlers import produce

    try:
        header, offset = parse_request_header(frame)
        with memoryview(frame) as view:
            request = produce.decode(view, offset, header.api_version)
            for _, partitions in request.topic_data:
                for _, records in partitions:
                    if records is not None:
                        fix_crcs(records)
                        records.release()
    except (DecodeError, ValueError, KafkaError):  # a version with no schema, say: the broker answers it
        return


def check_response(header, response: bytes, handlers) -> None:
    """A response frame must carry the request's correlation id and decode as the API's response."""
    if len(response) < 8:
        raise Finding(f"response of {len(response)} bytes")
    (size, correlation_id) = struct.unpack_from(">ii", response, 0)
    if size != len(response) - 4:
        raise Finding(f"response size prefix {size}, body {len(response) - 4}")
    if correlation_id != header.correlation_id:
        raise Finding(f"response correlation id {correlation_id}, request {header.correlation_id}")
    spec = handlers.get(header.api_key)
    if spec is None or not spec.min_version <= header.api_version <= spec.max_version:
        if header.api_key == ApiKey.API_VERSIONS:
            _decode_or_finding(ApiKey.API_VERSIONS, 0, response, 8, header)
        elif size != 6 + api.response_header_version(header.api_key, header.api_version):
            raise Finding(f"UNSUPPORTED_VERSION answer of {size} bytes")
        return
    if header.api_key == ApiKey.API_VERSIONS:
        body = 8
    else:
        body = 8 + api.response_header_version(header.api_key, header.api_version)
    _decode_or_finding(header.api_key, header.api_version, response, body, header)


def _decode_or_finding(api_key: int, version: int, response: bytes, offset: int, header) -> None:
    try:
        decode_response(api_key, version, response, offset)
    except Exception as exc:
        raise unexpected(f"response to api {header.api_key} v{header.api_version} does not decode", exc) from None


# -- records: a producer's record set into a real log --------------------------------------------

RECORDS_MAX_MESSAGE_BYTES = 64 * 1024
_TOPIC_CONFIGS: tuple[dict[str, str], ...] = (
    {},
    {"cleanup.policy": "compact"},
    {"message.timestamp.before.max.ms": "3600000", "message.timestamp.after.max.ms": "3600000"},
    {"message.timestamp.type": "LogAppendTime"},
)
_TOPIC_CODECS = ("producer", "gzip", "snappy", "lz4", "zstd", "uncompressed", "producer", "producer")


class RecordsTarget:
    """First byte: bit 0 fix CRCs, bits 1-2 topic rules, bits 3-5 the topic's compression.type.

    The rest is a Produce payload, appended as leader to a real log (max.message.bytes 64 KiB,
    so a decompression bomb meets its bound within a few buffers). Every decompression is
    checked against the bound it was given; an accepted append must read back as valid batches.
    """

    def __init__(self, root: str | None = None):
        self.root = root
        self.dir: str | None = None
        self.logs: dict[tuple[int, int], Log] = {}
        self.executed = 0
        self.counts = {"appended": 0, "refused": 0}

    def setup(self) -> None:
        from strom.protocol import compression

        self.dir = tempfile.mkdtemp(prefix="strom-fuzz-records-", dir=self.root)
        if not getattr(compression.decompress, "_bounded_check", False):
            compression.decompress = _checked_decompress(compression.decompress)

    def teardown(self) -> None:
        for log_ in self.logs.values():
            log_.close()
        self.logs.clear()
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def _log(self, rules: int, codec: int) -> Log:
        from strom.storage.log import Log
        from strom.storage.log_config import LogConfig

        assert self.dir is not None  # setup() made it
        key = (rules, codec)
        found = self.logs.get(key)
        if found is not None and found.size_in_bytes < 8 * 1024 * 1024:
            return found
        if found is not None:
            found.close()
            shutil.rmtree(found.directory, ignore_errors=True)
        overrides = {
            **_TOPIC_CONFIGS[rules],
            "compression.type": _TOPIC_CODECS[codec],
            "max.message.bytes": str(RECORDS_MAX_MESSAGE_BYTES),
        }
        config = LogConfig().with_overrides(overrides)
        self.logs[key] = Log(os.path.join(self.dir, f"fuzz{rules}{codec}-0"), config)
        return self.logs[key]

    def check(self, data: bytes) -> None:
        if self.dir is None:
            self.setup()
        if len(data) < 2:
            return
        self.executed += 1
        flags = data[0]
        records = bytearray(data[1:])
        if flags & 1:
            fix_crcs(memoryview(records))
        log_ = self._log((flags >> 1) & 3, (flags >> 3) & 7)
        try:
            info = log_.append_as_leader(bytes(records), leader_epoch=0)
        except KafkaError:
            self.counts["refused"] += 1
            return
        except Exception as exc:
            raise unexpected("append_as_leader", exc) from None
        self.counts["appended"] += 1
        _check_stored(log_, info)


def _checked_decompress(decompress):
    def checked(codec, data, max_output):
        out = decompress(codec, data, max_output)
        if len(out) > max_output:
            raise Finding(f"codec {codec} produced {len(out)} bytes past its bound of {max_output}")
        return out

    setattr(checked, "_bounded_check", True)  # setattr: to mypy a function is a Callable, with no attributes
    return checked


def _check_stored(log_, info) -> None:
    """What an append accepted must come back as whole batches that pass their CRC."""
    from strom.protocol.records import validate_batches

    if info.duplicate:
        return
    log_.flush()
    read = log_.read(info.first_offset, 1 << 24)
    data = b"".join(s.read() for s in read.slices)
    try:
        headers = validate_batches(data, from_producer=False)
    except KafkaError as exc:
        raise unexpected("a stored batch does not validate", exc) from None
    if headers[0].base_offset > info.first_offset or headers[-1].last_offset < info.last_offset:
        raise Finding(
            f"read back offsets {headers[0].base_offset}..{headers[-1].last_offset}, "
            f"appended {info.first_offset}..{info.last_offset}"
        )
