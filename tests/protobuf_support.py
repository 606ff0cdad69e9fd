"""One Protobuf schema in two compatible versions, and its messages, for the tests that read
Protobuf records as columns (the Spark source and sink, the Iceberg schema modes)."""

from __future__ import annotations

import datetime as dt

from strom.iceberg.protobuf_columns import message_class
from strom.spark.protobuf_types import load

ORDER_V1 = """
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Order {
  int64 id = 1;
  string item = 2;
  double price = 3;
  Kind kind = 4;
  optional string coupon = 5;
  google.protobuf.Timestamp at = 6;
  Ship ship = 7;
  repeated string tags = 8;
  map<string, int32> counts = 9;
  message Ship { string city = 1; }
}
enum Kind { VIEW = 0; BUY = 1; RETURN = 2; }
"""
# version 2 adds a field (BACKWARD compatible): version-1 records read with it have it unset
ORDER_V2 = ORDER_V1.replace("  message Ship", "  optional string channel = 10;\n  message Ship")
AT = 1_772_323_200  # 2026-03-01T00:00:00Z


def order_class(text: str):
    """The message class of the schema's first message (shop.Order)."""
    return message_class(load(text).message())


def order(cls, i: int):
    """Order ``i`` as a message of ``cls`` (either version's class)."""
    message = cls(id=i, item=f"item-{i}-ü", price=i * 0.5, kind=i % 3, ship={"city": f"c{i % 4}"}, tags=["t"] * (i % 3))
    if i % 2 == 0:
        message.coupon = f"C{i}"
    message.at.seconds = AT + i
    message.counts["n"] = i
    if "channel" in cls.DESCRIPTOR.fields_by_name and i % 3:
        message.channel = "app"
    return message


def expected(i: int, version: int) -> dict:
    """Order ``i`` of ``version`` as its columns hold it (at an instant, counts a dict), read with version 2's columns."""
    return {
        "id": i,
        "item": f"item-{i}-ü",
        "price": i * 0.5,
        "kind": ["VIEW", "BUY", "RETURN"][i % 3],
        "coupon": f"C{i}" if i % 2 == 0 else None,
        "at": dt.datetime.fromtimestamp(AT + i, dt.UTC),
        "ship": {"city": f"c{i % 4}"},
        "tags": ["t"] * (i % 3),
        "counts": {"n": i},
        "channel": "app" if version == 2 and i % 3 else None,
    }
