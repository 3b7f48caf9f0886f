"""The order test files are handed to `make test`'s workers
(tests/support/file_order.py): longest first, a file's tests together."""

import json

from support import file_order


class Item:
    def __init__(self, nodeid, *marks):
        self.nodeid, self.marks = nodeid, marks

    def get_closest_marker(self, name):
        return name if name in self.marks else None


def test_files_longest_first_and_each_files_tests_in_their_order():
    items = [Item("a.py::t1"), Item("b.py::t1"), Item("a.py::t2"),
             Item("c.py::t1"), Item("b.py::t2")]
    file_order.longest_first(items, {"a.py": 1.0, "b.py": 20.0,
                                     "c.py": 5.0})
    assert [i.nodeid for i in items] == [
        "b.py::t1", "b.py::t2", "c.py::t1", "a.py::t1", "a.py::t2"]


def test_an_unlisted_file_is_guessed_from_its_markers_ties_kept():
    items = [Item("quick.py::t%d" % n) for n in range(9)] + [
        Item("new.py::t1", "slow"), Item("mw.py::t1", "multiworker"),
        Item("same.py::t1", "multiworker")]
    file_order.longest_first(items, {"quick.py": 2.0})
    assert [i.nodeid.split("::")[0] for i in items][:3] == [
        "new.py", "mw.py", "same.py"]  # 30 s, then 10 and 10 as collected
    assert items[-1].nodeid == "quick.py::t8"


def test_the_table_from_durations_lines(tmp_path):
    lines = ["=== slowest durations ===",
             "84.70s call     tests/system/test_a.py::test_x[1]",
             "0.30s setup    tests/system/test_a.py::test_x[1]",
             "2.00s teardown tests/unit/test_b.py::Case::test_y",
             "(12 durations < 0.005s hidden.)"]
    assert file_order.from_durations(lines) == {
        "tests/system/test_a.py": 85.0, "tests/unit/test_b.py": 2.0}


def test_the_committed_table_lists_test_files_with_seconds():
    table = file_order.load()
    assert len(table) > 100
    assert all(name.startswith("tests/") and name.endswith(".py")
               and seconds >= 0 for name, seconds in table.items())
    assert file_order.load(file_order.TABLE + ".missing") == {}


def test_refresh_writes_the_table_from_a_run_log(tmp_path, monkeypatch):
    log = tmp_path / "run.log"
    log.write_text("1.50s call     tests/unit/test_b.py::test_y\n")
    monkeypatch.setattr(file_order, "TABLE", str(tmp_path / "t.json"))
    assert file_order.main(["file_order.py", str(log)]) == 0
    assert json.loads((tmp_path / "t.json").read_text()) == {
        "tests/unit/test_b.py": 1.5}
    empty = tmp_path / "empty.log"
    empty.write_text("no durations here\n")
    assert file_order.main(["file_order.py", str(empty)]) == 1
