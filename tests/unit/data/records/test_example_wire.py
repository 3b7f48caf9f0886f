"""The TensorFlow-free Example parser (data/records/example_wire.py) reads
what tf.io.parse_single_example reads, and fails where it fails: records
from the project's writer, and hand-made malformed ones, side by side with
TensorFlow's parser under the records pipeline's feature spec."""

import struct

import pytest

from official_bench.data.build import example_proto as ep
from official_bench.data.records import example_wire as wire
from official_bench.runtime.keras_setup import tf

V, F = ep._varint, ep._field
SPEC = {"image": tf.io.FixedLenFeature((), tf.string, b""),
        "label": tf.io.FixedLenFeature((), tf.int64, -1),
        "box": tf.io.VarLenFeature(tf.float32)}


def raw(number, wire_type, payload):
    return V(number << 3 | wire_type) + payload


def entry(key, feature):
    return F(1, F(1, key.encode()) + F(2, feature))


def example(*entries):
    return F(1, b"".join(entries))


def floats(*values):
    return [round(v, 5) for v in values]


def tensorflow(data):
    try:
        p = tf.io.parse_single_example(data, SPEC)
    except Exception:  # noqa: BLE001 - any parse failure
        return "error"
    return (p["image"].numpy(), int(p["label"].numpy()),
            floats(*p["box"].values.numpy().tolist()))


def ours(data):
    try:
        f = wire.parse_example(data, ["image", "label", "box"])
        return (wire.fixed(f, "image", wire.BYTES, b""),
                wire.fixed(f, "label", wire.INT64, -1),
                floats(*wire.var_len(f, "box", wire.FLOAT)))
    except wire.ParseError:
        return "error"


IMG = entry("image", ep._feature(b"abc"))
LAB = entry("label", ep._feature(7))
F32 = struct.Struct("<f").pack
CASES = {
    "plain": example(IMG, LAB, entry("box", ep._feature([0.1, 0.5]))),
    "empty bytes": b"",
    "garbage": b"\xff\xff\xff",
    "a jpeg": b"\xff\xd8\xff\xe0" + b"x" * 30,
    "missing label": example(IMG),
    "missing image": example(LAB),
    "negative label": example(IMG, entry("label", ep._feature(-5))),
    "label as bytes": example(IMG, entry("label", ep._feature(b"7"))),
    "label as float": example(IMG, entry("label", ep._feature(7.0))),
    "two labels": example(IMG, entry("label", ep._feature([7, 8]))),
    "empty int list": example(IMG, entry("label", F(3, b""))),
    "feature kind unset": example(IMG, entry("label", b"")),
    "two images": example(entry("image", ep._feature([b"a", b"b"])), LAB),
    "boxes as ints": example(IMG, LAB, entry("box", ep._feature([1, 2]))),
    "unpacked floats": example(IMG, LAB, entry("box", F(2, raw(
        1, 5, F32(0.25)) + raw(1, 5, F32(0.5))))),
    "unpacked int": example(IMG, entry("label", F(3, raw(1, 0, V(9))))),
    "later entry wins": example(IMG, LAB, entry("label", ep._feature(3))),
    "two features fields": F(1, IMG) + F(1, LAB),
    "unknown top-level field": example(IMG, LAB) + raw(5, 0, V(3)),
    "features as a varint": raw(1, 0, V(3)),
    "entry of wire type 0": F(1, raw(1, 0, V(1))),
    "oneof of two kinds": example(IMG, entry("label", F(1, F(1, b"x")) + F(
        3, F(1, V(4))))),
    "two int lists: first": example(IMG, entry("label", F(3, F(1, V(4))) + F(
        3, F(1, V(5))))),
    "unknown field after the list": example(IMG, entry("label", F(3, F(
        1, V(4))) + raw(9, 0, V(1)))),
    "list of wire type 0": example(IMG, entry("label", raw(3, 0, V(4)))),
    "bytes value of wire type 0": example(entry("image", F(1, raw(
        1, 0, V(3)))), LAB),
    "unknown field in an int list": example(IMG, entry("label", F(3, F(
        1, V(4)) + raw(2, 0, V(1))))),
    "cut short": example(IMG, LAB)[:-2],
    "group wire type": example(IMG, LAB) + raw(6, 3, b""),
    "name not UTF-8": example(IMG, LAB, F(1, F(1, b"\xff\xfe") + F(
        2, ep._feature(1)))),
    "entry without a value": example(IMG, LAB, F(1, F(1, b"zz"))),
    "entry without a key": example(IMG, LAB, F(1, F(2, ep._feature(1)))),
    "packed floats, 3 bytes": example(IMG, LAB, entry("box", F(2, F(
        1, b"abc")))),
    "value before key": example(IMG, F(1, F(2, ep._feature(7)) + F(
        1, b"label"))),
    "entry with a third field": example(IMG, F(1, F(1, b"label") + F(
        2, ep._feature(7)) + raw(3, 0, V(1)))),
    "features with another field": F(1, IMG + LAB + raw(2, 0, V(1))),
    "feature of unknown kind": example(IMG, entry("label", raw(
        9, 0, V(1)) + F(3, F(1, V(4))))),
    "int list starting unknown": example(IMG, entry("label", F(3, raw(
        2, 0, V(1)) + F(1, V(4))))),
    "float lists: first": example(IMG, LAB, entry("box", F(2, F(1, F32(
        .5))) + F(2, F(1, F32(.25))))),
    "bytes lists: first": example(entry("image", F(1, F(1, b"a")) + F(
        1, F(1, b"b"))), LAB),
    "packed then unpacked int": example(IMG, entry("label", F(3, F(
        1, V(4)) + raw(1, 0, V(5))))),
    "bytes list with unknown": example(entry("image", F(1, F(1, b"a") + raw(
        2, 0, V(1)))), LAB),
    "bad feature not asked for": example(IMG, LAB, entry("other", raw(
        9, 0, V(1)))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_parses_as_tensorflow_parses(name):
    assert ours(CASES[name]) == tensorflow(CASES[name])


def test_the_cases_cover_both_outcomes():
    outcomes = [tensorflow(d) == "error" for d in CASES.values()]
    assert 10 < sum(outcomes) < len(outcomes) - 10


def test_a_classic_record_round_trips():
    image = bytes(range(256)) * 400
    data = ep.classic_example(image, 1000, 375, 500, synset="n01440764",
                              boxes=[(0.1, 0.2, 0.9, 0.8),
                                     (0.0, 0.5, 1.0, 1.0)])
    keys = ["image/encoded", "image/class/label", "image/height",
            "image/object/bbox/xmin", "image/object/bbox/ymax",
            "image/class/synset", "image/format"]
    f = wire.parse_example(data, keys + ["absent"])
    assert set(f) == set(keys)
    assert wire.fixed(f, "image/encoded", wire.BYTES, b"") == image
    assert wire.fixed(f, "image/class/label", wire.INT64, -1) == 1000
    assert wire.fixed(f, "image/height", wire.INT64, -1) == 375
    assert wire.fixed(f, "image/class/synset", wire.BYTES, b"") == \
        b"n01440764"
    assert floats(*wire.var_len(f, "image/object/bbox/xmin", wire.FLOAT)) \
        == floats(0.1, 0.0)
    # classic_example's boxes are (xmin, ymin, xmax, ymax)
    assert floats(*wire.var_len(f, "image/object/bbox/ymax", wire.FLOAT)) \
        == floats(0.8, 1.0)
    assert wire.var_len(f, "absent", wire.FLOAT) == []
    assert wire.fixed(f, "absent", wire.INT64, -1) == -1
    parsed = tf.io.parse_single_example(data, {
        "image/encoded": tf.io.FixedLenFeature((), tf.string),
        "image/class/label": tf.io.FixedLenFeature((), tf.int64)})
    assert parsed["image/encoded"].numpy() == image
    assert int(parsed["image/class/label"].numpy()) == 1000


def test_large_and_negative_int64s():
    for value in (0, 1, 2 ** 31, 2 ** 63 - 1, -1, -2 ** 63):
        data = example(entry("label", ep._feature(value)))
        f = wire.parse_example(data, ["label"])
        assert wire.fixed(f, "label", wire.INT64, 0) == value
        assert int(tf.io.parse_single_example(data, {
            "label": tf.io.FixedLenFeature((), tf.int64)})["label"]) == value
