"""A run's nodes and devices per node in the history (walk_upgrade2 U3):
the log tree's case folder, else the Horovod block's hosts, else
num_workers, for the trainer's row and --import's alike; rows an older
official_bench filed under a node per process (a Horovod 1n2g as "2n1g")
are re-filed by the next write that stores a run, keeping their run_key, so
a re-import of such a run is still stored once."""

import dataclasses
import sqlite3

from official_bench.contracts import exit_status, history_db, log_tree
from official_bench.contracts.history_row import row_from_result, run_key
from official_bench.judge import history
from support import logkit


def _horovod(rates, size=2, local_size=2):
    """A Horovod run's result.json: ``size`` ranks, ``local_size`` a host,
    one CPU replica each, batch 8 a replica (num_workers is hvd.size())."""
    data = logkit.history_result(rates)
    data["environment"].update(
        num_workers=size, num_replicas=size, strategy="horovod",
        horovod={"version": "0.28.1", "size": size,
                 "local_size": local_size})
    data["stats"].update(num_replicas=size, global_batch_size=8 * size)
    return data


def _model_dir(root, case, index=1):
    return log_tree.ModelDir(str(root), 8, case, f"rn50_b8_fp32_{index}",
                             "20261201-000000").path


def _log(root, case, index=1):
    return str(root / "tensorflow" / "resnet50" / "bz8" / case /
               f"rn50_b8_fp32_{index}.log")


def test_the_tree_the_horovod_block_then_num_workers(tmp_path):
    place = history_db.placement
    hvd = {"num_workers": 8, "horovod": {"size": 8, "local_size": 8}}
    # DLPerf's headline Horovod 1n8g, in a tree and outside one
    assert place(_model_dir(tmp_path, "1n8g"), hvd, 8) == (1, 8)
    assert place("/runs/x", hvd, 8) == (1, 8)
    assert place("/runs/x", {"num_workers": 16, "horovod": {
        "size": 16, "local_size": 8}}, 16) == (2, 8)
    # WORKERS_PER_NODE=2: two multi-worker processes on one node
    mwms = {"num_workers": 2, "horovod": None}
    assert place(_model_dir(tmp_path, "1n2g"), mwms, 2) == (1, 2)
    assert place(_log(tmp_path, "1n2g"), mwms, 2) == (1, 2)
    assert place(str(tmp_path / "jax" / "resnet50" / "bz8" / "1n2g" /
                     "node1" / "rn50_b8_fp32_1.log"), mwms, 2) == (1, 2)
    # outside a tree nothing else says: a node per worker, as before
    assert place("/runs/x", mwms, 2) == (2, 1)
    assert place("/runs/1n2g/rn50_b8_fp32_1.log", mwms, 2) == (2, 1)
    assert place("", {}, 4) == (1, 4)
    assert history_db.tree_case(str(tmp_path / "bz8" / "1n2g" /
                                    "notes.txt")) is None


def test_trainer_and_import_file_a_horovod_run_alike_under_its_old_key(
        tmp_path):
    data = _horovod([100.0, 101.0, 99.0])
    trainer = row_from_result(data, "trainer",
                              _model_dir(tmp_path / "m", "1n2g"), 1e9)
    imported = row_from_result(data, "import", _log(tmp_path / "l", "1n2g"),
                               1e9)
    elsewhere = row_from_result(data, "trainer", "/runs/x", 1e9)
    for row in (trainer, imported, elsewhere):
        assert (row.nodes, row.gpus_per_node, row.batch_per_device) == \
            (1, 2, 8)
        assert row.case_label.startswith("1n2g b8 fp32 resnet_cifar8 16px")
    # the key digests the count the rows were filed under before (2n1g)
    old_key = run_key((2, 1, 8, "fp32", "resnet_cifar8", 16),
                      _intervals(data))
    assert trainer.run_key == imported.run_key == elsewhere.run_key == \
        old_key


def _intervals(data):
    from official_bench.contracts.throughput import Interval
    return [Interval(i["start_step"], i["end_step"], i["seconds"],
                     i["examples_per_second"])
            for i in data["stats"]["intervals"]]


def _file_as_before(db, row_id, nodes, gpus):
    """What an older official_bench stored for a run: its nodes and
    devices per node (num_workers and replicas / num_workers)."""
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE runs SET nodes = ?, gpus_per_node = ? "
                     "WHERE id = ?", (nodes, gpus, row_id))
    conn.close()


def _placed(db):
    return [(r.nodes, r.gpus_per_node) for r in history_db.read_rows(db)]


def test_rows_filed_by_the_old_count_are_refiled_once_and_kept_once(
        tmp_path):
    db = str(tmp_path / "h.sqlite")
    model_dir = _model_dir(tmp_path / "m", "1n2g")
    old = _horovod([100.0, 101.0, 99.0])
    assert history_db.append(db, [row_from_result(old, "trainer", model_dir,
                                                  1e9)]) == 1
    _file_as_before(db, 1, 2, 1)
    assert _placed(db) == [(2, 1)]
    before = open(db, "rb").read()
    said = []
    # the same run imported again: stored already, nothing written
    again = row_from_result(old, "import", _log(tmp_path / "l", "1n2g"), 2e9)
    assert history_db.append(db, [again], on_migrate=said.append) == 0
    assert open(db, "rb").read() == before and said == []
    # a new run of the case: stored, the old row re-filed beside it, said
    new = row_from_result(_horovod([98.0] * 3), "trainer",
                          _model_dir(tmp_path / "m", "1n2g", 2), 3e9)
    assert history_db.append(db, [new], on_migrate=said.append) == 1
    assert said == [
        f"run history {db}: 1 run(s) filed by an older official_bench under "
        "a node per process (Horovod, or several workers per node) re-filed "
        "under their nodes: 2n1g -> 1n2g (1); their run keys are kept, so "
        "each is still stored once"]
    rows = history_db.read_rows(db)
    assert _placed(db) == [(1, 2), (1, 2)]
    assert len({r.case_label for r in rows}) == 1
    # the corrected run and the new one imported again: stored once each
    assert history_db.append(db, [again, new], on_migrate=said.append) == 0
    assert history_db.count(db) == 2
    # idempotent: the next run re-files nothing and says nothing more
    third = row_from_result(_horovod([97.0] * 3), "trainer",
                            _model_dir(tmp_path / "m", "1n2g", 3), 4e9)
    assert history_db.append(db, [third], on_migrate=said.append) == 1
    assert len(said) == 1 and _placed(db) == [(1, 2)] * 3


def test_only_rows_filed_by_the_old_count_are_refiled(tmp_path):
    db = str(tmp_path / "h.sqlite")
    two_nodes = logkit.history_result([100.0] * 3)
    two_nodes["environment"].update(num_workers=2, num_replicas=2)
    two_nodes["stats"].update(num_replicas=2, global_batch_size=16)
    rows = [
        # a real 2n1g (a worker per node) stays 2n1g
        row_from_result(two_nodes, "trainer",
                        _model_dir(tmp_path / "m", "2n1g"), 1e9),
        # Horovod 2n8g, outside a tree, filed as 16n1g before
        row_from_result(_horovod([100.0] * 3, 16, 8), "trainer", "/runs/x",
                        2e9),
        # a log read alone: no environment, its tree's case
        dataclasses.replace(
            row_from_result(logkit.history_result([90.0] * 3), "import",
                            "/runs/y.log", 3e9),
            run_key="log-only", environment="{}", nodes=2, gpus_per_node=1),
    ]
    assert history_db.append(db, rows) == 3
    assert _placed(db) == [(2, 1), (2, 8), (2, 1)]
    _file_as_before(db, 2, 16, 1)
    said = []
    new = row_from_result(_horovod([99.0] * 3, 16, 8), "trainer", "/runs/x",
                          4e9)
    assert history_db.append(db, [new], on_migrate=said.append) == 1
    assert _placed(db) == [(2, 1), (2, 8), (2, 1), (2, 8)]
    assert len(said) == 1 and "16n1g -> 2n8g (1)" in said[0]


def test_import_of_a_horovod_tree_files_it_as_the_tree_says(tmp_path,
                                                           capsys):
    """official-bench-history --import of a 1n2g Horovod tree (log and
    result.json copy): the case 1n2g, as the extractor and compare say."""
    logs = tmp_path / "logs"
    for index in (1, 2):
        log = logkit.write_run(str(logs / "tensorflow" / "resnet50" / "bz8"),
                               "1n2g", [5.0, 100.0, 101.0, 99.0], batch=8,
                               index=index, log_steps=10)
        logkit.write_json(log_tree.json_path(log),
                          _horovod([100.0 + index, 101.0, 99.0]))
    db = str(tmp_path / "h.sqlite")
    assert history.main(["--db", db, "--import", str(logs), "--window",
                         "auto"]) == exit_status.OK
    assert capsys.readouterr().out.startswith("imported 2 new run(s)")
    assert history.main(["--db", db, "--case",
                         "1n2g b8 fp32 resnet_cifar8 16px"]) == exit_status.OK
    assert _placed(db) == [(1, 2), (1, 2)]
