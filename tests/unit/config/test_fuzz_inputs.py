"""Issue 17 §4: random input to every text parser ends in the project's own
error, never a raw TypeError/AttributeError/KeyError/IndexError/ValueError/
RecursionError.

Seeded random generators (hypothesis is not installed; the TF_CONFIG fuzz in
unit/contracts/test_tf_config.py does the same), in-process and
TensorFlow-free, a few seconds per parser:
  --params_override strings      -> config.ConfigError
  config files (YAML documents)  -> config.ConfigError
  node lists, hostfiles, Slurm   -> node_list.NodeError /
                                    hostport.HostPortError
  log lines and log directories  -> no exception from the line parsers
                                    (bad lines are reported as MalformedLine);
                                    results.errors.ExtractError from extract()
Each generator mixes valid pieces (real key paths, host:port items,
TimeHistory lines) with wrong types, unknown keys, deep nesting, YAML
aliases, non-ASCII digits and truncation, so that most inputs get past the
first check. A failure prints the seed and the input.
"""

import dataclasses
import math
import random
import typing

import pytest

from official_bench import config as C
from official_bench.contracts import hostport, throughput
from official_bench.extract import extractor as extract_lib, logparse
from official_bench.extract.errors import ExtractError
from official_bench.launch import node_list, slurm

N = 300  # random inputs per parser
N_YAML = 150  # for the YAML-heavy cases: PyYAML takes ~10 ms a document


def _key_paths(cls=C.ExperimentConfig, prefix=""):
    """Every dotted key of the config, walked from the dataclasses."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        path = prefix + f.name
        sub = C._dataclass_of(hints[f.name])
        if sub is not None:
            yield path
            yield from _key_paths(sub, path + ".")
        else:
            yield path


KEYS = sorted(_key_paths())
ODD_KEYS = ["", ".", "a..b", "train.", ".train", "train.stepz", "runtime.x.y",
            "model.optimizer.momentum.deep", "1", "_", "tpu", "ü.ß"]
# Scalars and fragments, as YAML flow text.
VALUES = ["0", "-1", "1", "2", "4", "1e3", "1.0e3", "1e-3", ".inf", "-.inf",
          ".nan", "2147483648", "99999999999999999999999", "true", "no",
          "null", "~", "''", '""', "x", "mirrored", "one_device", "fp16",
          "h:1", "127.0.0.1:5000,127.0.0.1:5001", "[::1]:5", "h:²", "²",
          "٣", "[1, 2]", "[]", "[0.1, 1.0]", "{}", "{a: 1}", "{steps: 2}",
          "[1, [2, [3]]]", "!!binary aGVsbG8=", "2001-12-14", "&a [*a]",
          "&x {b: *x}", "*undefined", "!!python/object:os.system x", "'",
          '"', "[", "{", "]", "}", ":", "- 1", "%", "@", "`", "\t", "\\",
          "a=b", "=", ",", "{a: [1, {b: 2}]}", "1,2", "(1, 2)", "0x10",
          "0o7", "1_000", "+1", "1.", ".5"]


def _deep(rng, depth):
    """A flow collection nested `depth` levels (lists or mappings)."""
    inner = rng.choice(VALUES)
    for _ in range(depth):
        inner = rng.choice([f"[{inner}]", f"{{k: {inner}}}"])
    return inner


def _value(rng):
    r = rng.random()
    if r < 0.08:
        return _deep(rng, rng.choice([5, 31, 33, 60, 200]))
    if r < 0.2:
        return "".join(rng.choice(VALUES) for _ in range(rng.randint(2, 4)))
    return rng.choice(VALUES)


def _override(rng):
    """A --params_override string: mostly key=value lists, sometimes a YAML
    or JSON mapping, sometimes raw noise."""
    kind = rng.random()
    if kind < 0.65:
        items = []
        for _ in range(rng.randint(1, 5)):
            key = rng.choice(KEYS) if rng.random() < 0.8 else \
                rng.choice(ODD_KEYS)
            sep = rng.choice(["=", "=", "=", "", "==", " = "])
            items.append(f"{key}{sep}{_value(rng)}")
        return rng.choice([",", ",", ", ", ",,"]).join(items)
    if kind < 0.9:
        key = rng.choice(KEYS)
        parts = key.split(".")
        text = _value(rng)
        for part in reversed(parts):
            text = f"{{{part}: {text}}}"
        return text if rng.random() < 0.7 else text[:rng.randint(0, len(text))]
    return "".join(rng.choice(VALUES + ODD_KEYS + [" "])
                   for _ in range(rng.randint(0, 6)))


def _expect_config_error(call, what):
    """`call()` either succeeds or raises ConfigError; anything else fails
    the test with the input that caused it."""
    try:
        call()
    except C.ConfigError as e:
        assert str(e).strip(), what
    except Exception as e:  # noqa: BLE001 - this is what the test looks for
        pytest.fail(f"{type(e).__name__}: {e}\n  input: {what!r}")


def test_params_override_strings_give_only_config_errors():
    rng = random.Random(1701)
    for _ in range(N):
        text = _override(rng)
        _expect_config_error(lambda: C.load_config(params_override=text),
                             text)


def test_params_override_lists_and_dicts():
    """The Python API's forms: several overrides, and dicts with odd keys
    and values (what a notebook passes)."""
    rng = random.Random(1702)
    odd = [None, 1, 1.5, True, "x", [], [1, "a"], {}, {"steps": 1},
           {1: 2}, {None: 1}, {(1, 2): 3}, float("nan"), b"bytes",
           {"runtime": None}, {"model": {"optimizer": [1]}}]
    for _ in range(N_YAML):
        overrides = [_override(rng) for _ in range(rng.randint(1, 3))]
        key = rng.choice(KEYS)
        tree = node = {}
        parts = key.split(".")
        for part in parts[:-1]:
            node[part] = {}
            node = node[part]
        node[parts[-1]] = rng.choice(odd)
        overrides.insert(rng.randint(0, len(overrides)), tree)
        _expect_config_error(
            lambda: C.load_config(params_override=overrides), overrides)


def _yaml_document(rng, depth=0):
    """A YAML block document: real and unknown keys, wrong types, deep
    nesting, aliases (also self-referring ones)."""
    lines = []
    sections = rng.sample(["runtime", "train", "model", "train_dataset",
                           "evaluation", "bogus", "validation_dataset",
                           "export"], rng.randint(1, 4))
    for section in sections:
        if rng.random() < 0.15:
            lines.append(f"{section}: {_value(rng)}")
            continue
        lines.append(f"{section}:" + (" &anchor" if rng.random() < 0.1
                                      else ""))
        keys = [k.split(".", 1)[1] for k in KEYS
                if k.startswith(section + ".")] or ["x", "y"]
        for key in rng.sample(keys, min(len(keys), rng.randint(1, 4))):
            parts = key.split(".")
            indent = "  "
            for part in parts[:-1]:
                lines.append(f"{indent}{part}:")
                indent += "  "
            value = _value(rng) if rng.random() < 0.9 else "*anchor"
            lines.append(f"{indent}{parts[-1]}: {value}")
    return "\n".join(lines) + "\n"


def test_config_files_give_only_config_errors(tmp_path):
    rng = random.Random(1703)
    path = tmp_path / "fuzz.yaml"
    specials = [b"", b"\xff\xfe\x00bad utf-8", b"- 1\n- 2\n", b"42\n",
                b"train:\n\tsteps: 1\n", b"train:\n  steps: [\n",
                b"a: &x [*x]\n", b"train: &t\n  steps: *t\n",
                b"\x00", "train:\n  steps: ²\n".encode(),
                ("x: " + "[" * 600 + "]" * 600 + "\n").encode(),
                ("a: &a [" + ",".join(["1"] * 20) + "]\nb: &b [" +
                 ",".join(["*a"] * 20) + "]\nc: &c [" +
                 ",".join(["*b"] * 20) + "]\nd: [" +
                 ",".join(["*c"] * 20) + "]\n").encode()]
    for i in range(N_YAML + len(specials)):
        data = specials[i - N_YAML] if i >= N_YAML else \
            _yaml_document(rng).encode()
        if i < N_YAML and rng.random() < 0.1:
            data = data[:rng.randint(0, len(data))]
        path.write_bytes(data)
        _expect_config_error(lambda: C.load_config(config_file=str(path)),
                             data)


def test_deep_or_cyclic_layers_name_the_key():
    deep = {"train": {}}
    node = deep["train"]
    for _ in range(40):
        node["x"] = {}
        node = node["x"]
    with pytest.raises(C.ConfigError) as e:
        C.load_config(params_override=deep)
    assert "params_override dict: train.x.x." in str(e.value)
    assert "more than 32 levels deep" in str(e.value)
    with pytest.raises(C.ConfigError) as e:
        C.load_config(params_override="train.steps={a: &x {b: *x}}")
    assert "train.steps.a.b contains itself (a YAML alias cycle" \
        in str(e.value)
    with pytest.raises(C.ConfigError) as e:
        C.load_config(params_override="runtime.seed=" + "[" * 600)
    assert "--params_override runtime.seed nests mappings or lists too " \
        "deeply to read" in str(e.value)


# -- node lists ---------------------------------------------------------------

HOST_PIECES = ["h", "node1", "gpu01", "127.0.0.1", "10.0.0.2", "::1",
               "[::1]", "[fe80::1%eth0]", "[h]", "[", "]", "a-b", "-a",
               "a.", "x_y", "ü", "é.example", "", " ", ".", "*", "%", "::",
               "1.2.3.4.5", "[::ffff:1.2.3.4]", "localhost"]
PORT_PIECES = ["", ":", ":0", ":1", ":80", ":65535", ":65536", ":-1",
               ":99999999999999999999", ":²", ":٣", ":1a", "::1", ": 1",
               ":+1", ":1_000", ":0x10"]
HOSTLISTS = ["gpu[01-03]", "n[1,3-4]", "n[1-2]x[3-4]", "n[", "n]", "n[[1]]",
             "n[a-b]", "n[1-]", "n[-1]", "n[²]", "n[3-1]", "n[01-2]",
             "n[]", "[1-2]", "n[1-2],m[3]", "n[1-2", "a,b", ",,", "n[٣]",
             "n[0-99999999999]", "n[0-999]x[0-999]"]


def _node_item(rng):
    if rng.random() < 0.15:
        return rng.choice(HOSTLISTS)
    return rng.choice(HOST_PIECES) + rng.choice(PORT_PIECES)


def _node_text(rng):
    return rng.choice([",", " ", "\n", ", ", "\t"]).join(
        _node_item(rng) for _ in range(rng.randint(0, 5)))


def test_node_lists_give_only_node_errors():
    rng = random.Random(1704)
    for _ in range(N):
        text = _node_text(rng)
        default = rng.choice([None, 5000])
        try:
            items = node_list.split_nodes(text, "NODES")
            got = node_list.parse_node_list(items, default, "NODES")
        except node_list.NodeError as e:
            assert "NODES" in str(e), text
            continue
        except Exception as e:  # noqa: BLE001
            pytest.fail(f"{type(e).__name__}: {e}\n  input: {text!r}")
        # Accepted: every node formats back to something that parses to it.
        for n in got:
            again = hostport.parse_hostport(n.address)
            assert again == (n.host, n.port), (text, n)
            assert 0 < n.port < 65536


def test_host_port_items_give_only_host_port_errors():
    rng = random.Random(1705)
    for _ in range(N):
        text = rng.choice(HOST_PIECES) + rng.choice(PORT_PIECES)
        if rng.random() < 0.2:
            text = text + rng.choice(HOST_PIECES) + rng.choice(PORT_PIECES)
        try:
            host, port = hostport.parse_hostport(
                text, rng.choice([None, 7]))
        except hostport.HostPortError as e:
            assert type(e) is hostport.HostPortError and e.reason, text
            continue
        except Exception as e:  # noqa: BLE001
            pytest.fail(f"{type(e).__name__}: {e}\n  input: {text!r}")
        assert isinstance(port, int) and 0 < port < 65536, text


def test_slurm_hostlists_and_hostfiles_give_only_node_errors(tmp_path):
    rng = random.Random(1706)
    hostfile = tmp_path / "hosts"
    for _ in range(N):
        expr = ",".join(rng.choice(HOSTLISTS + HOST_PIECES)
                        for _ in range(rng.randint(1, 3)))
        env = {"SLURM_JOB_NODELIST": expr,
               "SLURM_NODEID": rng.choice(["", "0", "1", "9", "²", "-1"]),
               "SLURM_NTASKS": rng.choice(["", "1", "99", "x", "²"])}
        lines = [_node_item(rng) + rng.choice(["", " slots=2", " # c", "#"])
                 for _ in range(rng.randint(0, 4))]
        hostfile.write_text("\n".join(lines), encoding="utf-8")
        for what, call in (
                ("slurm", lambda: slurm.slurm_nodes(env, 5000)),
                ("hostfile", lambda: node_list.parse_node_list(
                    node_list.read_hostfile(str(hostfile)), 5000,
                    "HOSTFILE"))):
            try:
                call()
            except node_list.NodeError:
                pass
            except Exception as e:  # noqa: BLE001
                pytest.fail(f"{what}: {type(e).__name__}: {e}\n  input: "
                            f"{env if what == 'slurm' else lines!r}")


# -- log lines ----------------------------------------------------------------

NUMBERS = ["0.52", "1", "0", "-1", "1e3", "nan", "inf", "1e400", "x", "",
           "²", "٣", "12.5.3", "9" * 400, "0.00", "-0.0", "1_0"]
PREFIXES = ["", "I1123 13:31:00.123456 140 callbacks.py:12] ",
            "I1345 99:99:99.999999 1 x.py:1] ", "2026-11-23 13:31:00,123 ",
            "2026-02-30 25:61:61.5 ", "13:31:00.5 ", "99:99:99 ",
            "I0229 23:59:59.000000 1 a.py:1] ", "W1231 23:59:59.999999 1 b] "]


def _log_line(rng):
    r = rng.random()
    if r < 0.55:
        seconds, eps, a, b = (rng.choice(NUMBERS) for _ in range(4))
        line = (f"{rng.choice(PREFIXES)}TimeHistory: {seconds} seconds, "
                f"{eps} examples/second between steps {a} and {b}")
        if rng.random() < 0.3:
            cut = rng.randint(0, len(line))
            line = line[:cut] + rng.choice(["", "\r", " \t", "TimeHistory:",
                                            "\x00", "\ufffd"]) + line[cut:]
        return line
    if r < 0.7:
        return rng.choice([throughput.FINISH_MARK, "Traceback (most recent "
                           "call last):", "  File \"x.py\", line 1",
                           "ValueError: bad", "KeyboardInterrupt",
                           throughput.TIMEOUT_MARK + " worker 0 waited",
                           "# official_bench.launch: run 1 failed"])
    return "".join(rng.choice(["TimeHistory", ":", " ", "between steps",
                               "examples/second", "1", "and", "seconds,",
                               "\t", "é"]) for _ in range(rng.randint(0, 8)))


def test_log_lines_never_raise_and_each_mark_is_counted_once():
    rng = random.Random(1707)
    for _ in range(N):
        lines = [_log_line(rng) for _ in range(rng.randint(0, 12))]
        try:
            parsed = logparse.parse_log_lines(lines)
        except Exception as e:  # noqa: BLE001
            pytest.fail(f"{type(e).__name__}: {e}\n  input: {lines!r}")
        marked = sum(logparse.THROUGHPUT_MARKER in line for line in lines)
        assert len(parsed.intervals) + len(parsed.malformed) == marked, lines
        for iv in parsed.intervals:
            assert iv.end_step > iv.start_step >= 0, (iv, lines)
            assert math.isfinite(iv.seconds) and iv.seconds >= 0
            assert math.isfinite(iv.examples_per_second)
            assert iv.examples_per_second >= 0
            # What we accept, formatted back, is a line DLPerf reads too.
            text = throughput.format_line(iv)
            assert throughput.DLPERF_RATE_RE.search(text + " "), text
        for bad in parsed.malformed:
            assert bad.describe().startswith(f"line {bad.line_no}: ")


def test_random_log_directories_give_only_extract_errors(tmp_path):
    """The whole extractor over random logs: a result, or ExtractError."""
    rng = random.Random(1708)
    for i in range(40):
        root = tmp_path / f"logs{i}"
        for _ in range(rng.randint(0, 3)):
            case = rng.choice(["1n1g", "1n8g", "2n1g", "0n1g", "x", "1n1g"])
            name = rng.choice(["rn50_b4_fp32_1.log", "rn50_b4_fp16_2.log",
                               "rn50_b0_fp32_1.log", "other.log",
                               "rn50_b4_fp32_3.log"])
            path = root / case / name
            path.parent.mkdir(parents=True, exist_ok=True)
            text = "\n".join(_log_line(rng) for _ in range(rng.randint(0, 30)))
            path.write_bytes(text.encode("utf-8", "surrogatepass")
                             + rng.choice([b"", b"\xff\xfe", b"\n"]))
        try:
            extract_lib.extract(str(root), warmup_batches=rng.choice([0, 1]),
                                train_batches=rng.choice([1, 2, 100]))
        except ExtractError:
            pass
        except Exception as e:  # noqa: BLE001
            pytest.fail(f"{type(e).__name__}: {e}\n  logs: {root}")
