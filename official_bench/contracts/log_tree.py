"""The log tree's layout and every file name in it, in one place.

The launcher writes this tree and the extractor reads it back (so do
DLPerf's scripts, for the trainer's logs), so each name is declared once,
as a template, and both its builder and its parser come from that one
declaration: a name cannot be written one way and read another.

    {LOG_DIR}/tensorflow/resnet50/bz{B}/           batch_root (jax/ for
                                                   runtime.backend jax)
      {N}n{G}g/                                    case_name, case_dir
        rn50_b{B}_{dtype}_{i}.log                  TRAINER_STEM + ".log"
        rn50_b{B}_{dtype}_{i}.json                 result JSON (json_path)
        rn50_b{B}_{dtype}_{i}.log.status.json      status_path
        rn50_b{B}_{dtype}_{i}.log.local{l}         local worker l > 0
        allreduce_{dtype}_{i}.log / .json          BENCH=allreduce
        node{k}/...                                node k > 0's copies
    {MODEL_DIR}/tensorflow/resnet50/bz{B}/{N}n{G}g/
        {stem}.{stamp}[.node{k}][.local{l}][-{n}]/ ModelDir
          result.json | result_{tag}.json          result_file_name
          allreduce.json | allreduce_{tag}.json    allreduce_file_name

TensorFlow-free: the launcher and the extractor import it.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import time
from typing import Dict, Optional, Pattern, Tuple, Union

from official_bench.contracts import dtypes

MODEL = "rn50"
FRAMEWORK_DIRS: Tuple[str, ...] = ("tensorflow", "resnet50")
# runtime.backend -> the tree's first directory: the JAX backend's runs go
# under jax/, so one LOG_DIR holds both backends' sweeps side by side.
BACKEND_DIRS: Dict[str, str] = {"tensorflow": "tensorflow", "jax": "jax"}
# time.strftime format of a launch session's stamp in model_dir names.
STAMP_FORMAT = "%Y%m%d-%H%M%S"

# What each template field may hold when a name is parsed back; fields
# made of digits come back as int.
_FIELDS: Dict[str, str] = {
    "nodes": r"\d+", "gpus": r"\d+", "batch": r"\d+", "index": r"\d+",
    "node": r"\d+", "local": r"\d+", "attempt": r"\d+",
    "dtype": "|".join(dtypes.SHORT_NAMES),
    "stamp": r"\d{8}-\d{6}",
    "stem": r"[^/]+?",  # a file name without its extension
    "path": r".+?",
    "tag": r"[^/]+",  # a process: worker1, rank3, chief0, ...
}
_INT_FIELDS = frozenset({"nodes", "gpus", "batch", "index", "node", "local",
                         "attempt"})


@dataclasses.dataclass(frozen=True)
class Name:
    """One file or directory name: `build` fills the template, `parse`
    reads a name back with a regex made from the same template."""
    template: str

    @functools.cached_property
    def regex(self) -> Pattern[str]:
        parts = re.split(r"\{(\w+)\}", self.template)
        pattern = "".join(
            re.escape(p) if k % 2 == 0 else f"(?P<{p}>{_FIELDS[p]})"
            for k, p in enumerate(parts))
        return re.compile(f"^{pattern}$")

    def build(self, **fields: Union[int, str]) -> str:
        return self.template.format(**fields)

    def parse(self, name: str) -> Optional[Dict[str, Union[int, str]]]:
        """The fields of `name`, or None when it is not this name."""
        m = self.regex.match(name)
        if not m:
            return None
        return {k: int(v) if k in _INT_FIELDS else v
                for k, v in m.groupdict().items()}


LOG_SUFFIX = ".log"
JSON_SUFFIX = ".json"
STATUS_SUFFIX = ".status.json"
CASE = Name("{nodes}n{gpus}g")
BATCH_DIR = Name("bz{batch}")
NODE_DIR = Name("node{node}")
TRAINER_STEM = Name(MODEL + "_b{batch}_{dtype}_{index}")
ALLREDUCE_STEM = Name("allreduce_{dtype}_{index}")
TRAINER_LOG = Name(TRAINER_STEM.template + LOG_SUFFIX)
ALLREDUCE_LOG = Name(ALLREDUCE_STEM.template + LOG_SUFFIX)
ALLREDUCE_JSON = Name(ALLREDUCE_STEM.template + JSON_SUFFIX)
LOCAL = Name("{path}.local{local}")
MODEL_DIR_TAG = Name("{stem}.{stamp}")
NODE_TAG = ".node{node}"
LOCAL_TAG = ".local{local}"
ATTEMPT_TAG = "-{attempt}"
RESULT_FILE = Name("result_{tag}.json")
CHIEF_RESULT_FILE = "result.json"
ALLREDUCE_FILE = Name("allreduce_{tag}.json")
CHIEF_ALLREDUCE_FILE = "allreduce.json"
# What the allreduce bench's names use in place of the trainer's.
ALLREDUCE_PREFIX = "allreduce"


# -- directories --------------------------------------------------------------


def case_name(num_nodes: int, gpus_per_node: int) -> str:
    """Case key for N nodes with G devices each: "{N}n{G}g"."""
    return CASE.build(nodes=num_nodes, gpus=gpus_per_node)


def parse_case_name(name: str) -> Optional[Tuple[int, int]]:
    """"10n8g" -> (10, 8); None if not a case key. Zero counts are
    rejected: a case with no devices cannot have run."""
    fields = CASE.parse(name)
    if fields is None or fields["nodes"] < 1 or fields["gpus"] < 1:
        return None
    return fields["nodes"], fields["gpus"]


def batch_root(root: str, batch: int, backend: str = "tensorflow") -> str:
    """{root}/tensorflow/resnet50/bz{B} ({root}/jax/... for the JAX
    backend): the extractor's --log_dir, and the same shape under
    MODEL_DIR."""
    return os.path.join(root, BACKEND_DIRS[backend], *FRAMEWORK_DIRS[1:],
                        BATCH_DIR.build(batch=batch))


def case_dir(root: str, batch: int, case: str, node: int = 0,
             backend: str = "tensorflow") -> str:
    """Where a node writes a case's logs: node 0 in the case directory
    (the extractor reads only those), node k > 0 in node{k}/ under it."""
    folder = os.path.join(batch_root(root, batch, backend), case)
    return os.path.join(folder, NODE_DIR.build(node=node)) if node else folder


def parse_node_dir(name: str) -> Optional[int]:
    """"node3" -> 3; None otherwise."""
    fields = NODE_DIR.parse(name)
    return None if fields is None else fields["node"]


# -- run files ----------------------------------------------------------------


def run_stem(batch: int, dtype: str, index: int, bench: str = "") -> str:
    """A run's file stem: rn50_b{B}_{dtype}_{i} for the trainer,
    allreduce_{dtype}_{i} for BENCH=allreduce."""
    if bench == ALLREDUCE_PREFIX:
        return ALLREDUCE_STEM.build(dtype=dtype, index=index)
    if bench:
        raise ValueError(f"bench {bench!r} has no log names; valid: '' "
                         f"(the trainer), {ALLREDUCE_PREFIX!r}")
    return TRAINER_STEM.build(batch=batch, dtype=dtype, index=index)


def log_name(batch: int, dtype: str, index: int, bench: str = "") -> str:
    return run_stem(batch, dtype, index, bench) + LOG_SUFFIX


def parse_log_name(filename: str) -> Optional[Tuple[int, str, int]]:
    """"rn50_b128_fp16_3.log" -> (128, "fp16", 3); None otherwise (also a
    batch of 0)."""
    fields = TRAINER_LOG.parse(filename)
    if fields is None or fields["batch"] < 1:
        return None
    return fields["batch"], fields["dtype"], fields["index"]


def is_run_log(filename: str, batch: int, dtype: str, bench: str = "") -> bool:
    """Whether filename is the log of some run of this batch, dtype and
    bench (all-reduce log names carry no batch: their bz{B} directory
    does)."""
    if bench == ALLREDUCE_PREFIX:
        fields = ALLREDUCE_LOG.parse(filename)
        return fields is not None and fields["dtype"] == dtype
    parsed = parse_log_name(filename)
    return parsed is not None and parsed[:2] == (batch, dtype)


def parse_allreduce_json_name(filename: str) -> Optional[Tuple[str, int]]:
    """"allreduce_fp32_2.json" -> ("fp32", 2); None otherwise."""
    fields = ALLREDUCE_JSON.parse(filename)
    return None if fields is None else (fields["dtype"], fields["index"])


def json_path(log_path: str) -> str:
    """The result JSON beside a log: rn50_...log -> rn50_...json."""
    return os.path.splitext(log_path)[0] + JSON_SUFFIX


def status_path(log_path: str) -> str:
    """The launcher's status record beside a log."""
    return log_path + STATUS_SUFFIX


def local_path(path: str, local: int) -> str:
    """Local worker l > 0's copy of a run file (log, JSON): path.local{l},
    which the extractor's *.log glob does not match; worker 0's is path."""
    return LOCAL.build(path=path, local=local) if local else path


def parse_local_path(path: str) -> Tuple[str, int]:
    """(worker 0's path, l) of path.local{l}; (path, 0) otherwise."""
    fields = LOCAL.parse(path)
    return (path, 0) if fields is None else (fields["path"], fields["local"])


# -- model_dir ----------------------------------------------------------------


def result_file_name(tag: str, is_chief: bool) -> str:
    """The file a trainer process writes in model_dir: result.json on the
    chief (or Horovod rank 0), else result_{tag}.json (tag "worker1",
    "rank3", ...)."""
    return CHIEF_RESULT_FILE if is_chief else RESULT_FILE.build(tag=tag)


def allreduce_file_name(tag: str, is_chief: bool) -> str:
    """The all-reduce benchmark's file in model_dir, named as the trainer's
    (allreduce.json on the chief) so the launcher sees every process end."""
    return CHIEF_ALLREDUCE_FILE if is_chief else ALLREDUCE_FILE.build(tag=tag)


def process_file_name(tag: str, is_chief: bool, bench: str = "") -> str:
    """The result file a process of this bench writes in model_dir."""
    if bench == ALLREDUCE_PREFIX:
        return allreduce_file_name(tag, is_chief)
    if bench:
        raise ValueError(f"bench {bench!r} writes no result file; valid: '' "
                         f"(the trainer), {ALLREDUCE_PREFIX!r}")
    return result_file_name(tag, is_chief)


def session_stamp(when: Optional[float] = None) -> str:
    """A launch session's stamp (node 0's is used by every node)."""
    return time.strftime(STAMP_FORMAT, time.localtime(when))


@dataclasses.dataclass(frozen=True)
class ModelDir:
    """Where one trainer process of one run keeps its checkpoints and
    result file. Decided here only; the launcher passes this value along
    (node 0's stamp, a fresh attempt) instead of editing path strings."""
    root: str  # MODEL_DIR, absolute
    batch: int
    case: str
    stem: str  # run_stem(...)
    stamp: str  # session_stamp()
    node: Optional[int] = None  # node index on tf multi-node runs
    local: int = 0  # local worker (WORKERS_PER_NODE > 1)
    attempt: int = 1  # 2, 3, ... when the directory already existed
    backend: str = "tensorflow"  # runtime.backend: the tree's first dir

    @property
    def tag(self) -> str:
        """The directory's own name."""
        text = MODEL_DIR_TAG.build(stem=self.stem, stamp=self.stamp)
        if self.node is not None:
            text += NODE_TAG.format(node=self.node)
        if self.local:
            text += LOCAL_TAG.format(local=self.local)
        if self.attempt > 1:
            text += ATTEMPT_TAG.format(attempt=self.attempt)
        return text

    @property
    def path(self) -> str:
        return os.path.join(batch_root(self.root, self.batch, self.backend),
                            self.case, self.tag)

    def restamped(self, stamp: str) -> "ModelDir":
        return dataclasses.replace(self, stamp=stamp)

    def for_local(self, local: int) -> "ModelDir":
        return dataclasses.replace(self, local=local)

    def next_attempt(self) -> "ModelDir":
        return dataclasses.replace(self, attempt=self.attempt + 1)


def _model_dir_tag_regex() -> Pattern[str]:
    """The tag regex, from the same pieces ModelDir.tag joins."""
    def optional(piece: str) -> str:
        return "(?:" + Name(piece).regex.pattern[1:-1] + ")?"
    return re.compile("^" + MODEL_DIR_TAG.regex.pattern[1:-1]
                      + optional(NODE_TAG) + optional(LOCAL_TAG)
                      + optional(ATTEMPT_TAG) + "$")


_MODEL_DIR_TAG_RE = _model_dir_tag_regex()


def parse_model_dir(path: str) -> Optional[ModelDir]:
    """A model_dir path back into its ModelDir; None when it is not one."""
    path = os.path.normpath(path)
    m = _MODEL_DIR_TAG_RE.match(os.path.basename(path))
    case = os.path.dirname(path)
    bz = os.path.dirname(case)
    batch = BATCH_DIR.parse(os.path.basename(bz))
    top = os.path.dirname(bz)
    root = top
    for part in reversed(FRAMEWORK_DIRS[1:]):
        if os.path.basename(root) != part:
            return None
        root = os.path.dirname(root)
    backend = {d: b for b, d in BACKEND_DIRS.items()}.get(
        os.path.basename(root))
    if backend is None:
        return None
    root = os.path.dirname(root)
    if not m or batch is None or CASE.parse(os.path.basename(case)) is None:
        return None
    g = m.groupdict()
    return ModelDir(root, batch["batch"], os.path.basename(case), g["stem"],
                    g["stamp"], int(g["node"]) if g["node"] else None,
                    int(g["local"] or 0), int(g["attempt"] or 1), backend)
