"""tf.train.Example read from its protobuf wire bytes, without TensorFlow
or the protobuf package (the inverse of data/build/example_proto.py).

`parse_example(data, keys)` returns the wanted features as (kind, values);
`fixed` and `var_len` then read one as tf.io.parse_single_example reads a
FixedLenFeature of shape () or a VarLenFeature: a missing key gives the
default (or nothing), a key of another kind or with the wrong number of
values raises ParseError. Malformed bytes follow TensorFlow's own example
parser, which is stricter than protobuf's (tested side by side): the
features map holds only entries, each a key and a value; a feature's
first field decides its kind and only that list is read; features not
asked for are not parsed; a later entry for a key wins. TensorFlow-free.
"""

from __future__ import annotations

import struct
from typing import Dict, Iterable, List, Optional, Tuple

BYTES, FLOAT, INT64 = "bytes", "float", "int64"
VARINT, I64, LEN, I32 = 0, 1, 2, 5
_LIST_TAGS = {0x0A: BYTES, 0x12: FLOAT, 0x1A: INT64}  # Feature's oneof

Feature = Tuple[Optional[str], list]  # (kind or None when unset, values)
Span = Tuple[int, int]


class ParseError(ValueError):
    """The bytes are not a tf.train.Example (or a key has the wrong kind
    or number of values)."""


def _varint(buf: bytes, pos: int, end: int) -> Tuple[int, int]:
    result = shift = 0
    while pos < end and shift < 70:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result & 0xFFFFFFFFFFFFFFFF, pos
        shift += 7
    raise ParseError("malformed varint")


def _fields(buf: bytes, pos: int, end: int):
    """(field number, wire type, value, start of the field) of a message in
    buf[pos:end]; LEN values are (start, stop) offsets."""
    while pos < end:
        at = pos
        tag, pos = _varint(buf, pos, end)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise ParseError("field number 0")
        if wire == VARINT:
            value, pos = _varint(buf, pos, end)
        elif wire == LEN:
            size, pos = _varint(buf, pos, end)
            if size > end - pos:
                raise ParseError("length past the end")
            value, pos = (pos, pos + size), pos + size
        elif wire in (I64, I32):
            width = 8 if wire == I64 else 4
            if pos + width > end:
                raise ParseError("fixed-width value past the end")
            value, pos = buf[pos:pos + width], pos + width
        else:
            raise ParseError(f"wire type {wire}")
        yield number, wire, value, at


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _packed(buf: bytes, kind: str, span: Span) -> list:
    start, stop = span
    if kind == FLOAT:  # a length not a multiple of 4: the rest is ignored
        return list(struct.unpack(f"<{(stop - start) // 4}f",
                                  buf[start:start + (stop - start) // 4 * 4]))
    out = []
    while start < stop:
        item, start = _varint(buf, start, stop)
        out.append(_signed(item))
    return out


def _list(buf: bytes, kind: str, span: Span) -> list:
    """The values of a BytesList, FloatList or Int64List: field 1 only; a
    numeric list ends at its packed run or its first other field."""
    out: list = []
    for number, wire, value, _ in _fields(buf, *span):
        if kind == BYTES:
            if number != 1 or wire != LEN:
                raise ParseError(f"a bytes list with field {number}")
            out.append(buf[value[0]:value[1]])
        elif number != 1 or wire not in (LEN, I32 if kind == FLOAT
                                         else VARINT):
            if not out:
                raise ParseError(f"a {kind} list with field {number}")
            break
        elif wire == LEN:
            out.extend(_packed(buf, kind, value))
            break
        else:
            out.append(struct.unpack("<f", value)[0] if kind == FLOAT
                       else _signed(value))
    return out


def _feature(buf: bytes, span: Span) -> Feature:
    """A Feature's kind (its first field's) and that list's values."""
    start, stop = span
    if start == stop:
        return None, []
    kind = _LIST_TAGS.get(buf[start])
    if kind is None:
        raise ParseError(f"a feature of unsupported type (tag {buf[start]})")
    number, wire, value, _ = next(_fields(buf, start, stop))
    return kind, _list(buf, kind, value)


def _entry(buf: bytes, span: Span) -> Tuple[bytes, Span]:
    """A map entry: exactly a key and a value, in either order."""
    found: Dict[int, Span] = {}
    for number, wire, value, _ in _fields(buf, *span):
        if number not in (1, 2) or wire != LEN or number in found:
            raise ParseError(f"a feature entry with field {number}")
        found[number] = value
    if len(found) != 2:
        raise ParseError("a feature entry without a key or a value")
    return buf[found[1][0]:found[1][1]], found[2]


def parse_example(data: bytes, keys: Iterable[str]) -> Dict[str, Feature]:
    """The features named in `keys` of a serialized tf.train.Example:
    name -> (kind, values); missing names are left out. Raises
    ParseError when the bytes are not an Example."""
    wanted = {key.encode("utf-8"): key for key in keys}
    spans: Dict[str, Span] = {}
    for number, wire, value, _ in _fields(data, 0, len(data)):
        if number != 1 or wire != LEN:
            continue
        for inner, inner_wire, entry, _ in _fields(data, *value):
            if inner != 1 or inner_wire != LEN:
                raise ParseError(f"a features map with field {inner}")
            key, feature = _entry(data, entry)
            if key in wanted:
                spans[wanted[key]] = feature
    return {key: _feature(data, span) for key, span in spans.items()}


def fixed(features: Dict[str, Feature], key: str, kind: str, default):
    """One value of `kind` (a FixedLenFeature of shape ()): `default` when
    the key is missing or has no kind set."""
    got_kind, values = features.get(key, (None, []))
    if got_kind is None:
        return default
    if got_kind != kind:
        raise ParseError(f"{key} holds {got_kind} values, expected {kind}")
    if len(values) != 1:
        raise ParseError(f"{key} holds {len(values)} values, expected 1")
    return values[0]


def var_len(features: Dict[str, Feature], key: str, kind: str) -> List:
    """All values of `kind` (a VarLenFeature); [] when the key is
    missing."""
    got_kind, values = features.get(key, (None, []))
    if got_kind is None:
        return []
    if got_kind != kind:
        raise ParseError(f"{key} holds {got_kind} values, expected {kind}")
    return values
