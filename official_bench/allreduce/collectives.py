"""How many collectives one training step issues, read from the traced step.

The scaling model (extract/scaling.py) charges a step the gradient's
all-reduce, which the all-reduce benchmark times at the model's size; but a
multi-worker Keras step issues more collectives than that, each a round trip
between the workers that nothing hides (BENCHMARKS.md, "Scaling model
against tbf-limited links"). Under multi_worker_mirrored with tf_keras 2.21
they are chained one after the other by their ordering token: the
gradient (one concatenated pack), then two per metric result (each
Mean-like metric's total and count are sync-on-read variables, all-reduced
when Keras reads the result inside the replica context). fit's
``distribute_reduction_method`` adds one per log value unless it is "first",
which the trainer sets (as TF 2.3's Keras, under Model Garden r2.3, did).

The count depends on the model, its metrics and tf_keras, so rather than
assume one, the benchmark compiles the configured model exactly as the
trainer does (trainer's own set-up), traces one call of Keras' train
function and counts the collective ops in its graph: the large ones are the
gradient's packs (timed as the model-size all-reduce), the small ones (at
most SMALL_ELEMENTS elements) cost a round trip each, which the benchmark
times as a latency.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List

SMALL_ELEMENTS = 1024  # a collective this small is latency, not bandwidth
COLLECTIVE_OPS = ("CollectiveReduce", "CollectiveReduceV2",
                  "CollectiveReduceV3", "CollectiveGather",
                  "CollectiveGatherV2", "CollectiveBcastSend",
                  "CollectiveBcastRecv", "CollectiveBcastSendV2",
                  "CollectiveBcastRecvV2", "CollectiveAllToAllV2",
                  "CollectiveAllToAllV3", "NcclAllReduce")


@dataclasses.dataclass
class StepCollectives:
    """Collective ops in one step's graph: small ones (latency) and large
    ones (the gradient's packs), with their op types."""
    small: int
    large: int
    by_type: Dict[str, int]

    def as_dict(self):
        return dataclasses.asdict(self)


def _elements(op) -> int:
    """Elements of the collective's input (-1 when not static)."""
    if not op.inputs:
        return -1
    n = op.inputs[0].shape.num_elements()
    return -1 if n is None else int(n)


def _function_names(op) -> List[str]:
    """Names of the functions an op calls (While bodies, partitioned calls,
    If branches), so nested step graphs are counted too."""
    names = []
    for attr in op.node_def.attr.values():
        if attr.HasField("func"):
            names.append(attr.func.name)
        names += [f.name for f in attr.list.func]
    return names


def count_ops(graph) -> StepCollectives:
    """Counts collective ops in `graph` and every function it calls (each
    function once: a While body runs once per step of the loop)."""
    result = StepCollectives(0, 0, {})
    seen = set()

    def walk(g):
        for op in g.get_operations():
            if op.type in COLLECTIVE_OPS:
                result.by_type[op.type] = result.by_type.get(op.type, 0) + 1
                n = _elements(op)
                if 0 <= n <= SMALL_ELEMENTS:
                    result.small += 1
                else:
                    result.large += 1
            for name in _function_names(op):
                if name in seen:
                    continue
                seen.add(name)
                fn = g._get_function(name)  # pylint: disable=protected-access
                sub = getattr(fn, "graph", None) if fn is not None else None
                if sub is not None:
                    walk(sub)

    walk(graph)
    return result


def of_train_step(model, dist, cfg, global_batch: int) -> StepCollectives:
    """Traces one call of the compiled model's Keras train function on the
    configured input's shapes (synthetic data: the trace needs only the
    element spec) and counts its collectives. Nothing is executed."""
    from tf_keras.src.engine import data_adapter

    from official_bench.data.fit_input import fit_input
    synthetic = dataclasses.replace(cfg.train_dataset, builder="synthetic")
    data = fit_input(dist, synthetic, global_batch, True, 0).data
    handler = data_adapter.get_data_handler(x=data, model=model,
                                            steps_per_epoch=1, epochs=1)
    _, iterator = next(iter(handler.enumerate_epochs()))
    train_function = model.make_train_function(force=True)
    return count_ops(train_function.get_concrete_function(iterator).graph)
