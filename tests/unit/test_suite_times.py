"""devkit.suite_times: seconds per module from pytest's JUnit XML, one run or two side by side."""

from __future__ import annotations

from devkit.suite_times import main, module_seconds

XML = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.e2e.test_hard_kills" name="test_a" time="{a}"/>
<testcase classname="tests.unit.test_x" name="test_b" time="1.5"/>
<testcase classname="tests.unit.test_x" name="test_c" time="2.0"/>
</testsuite></testsuites>"""


def test_seconds_are_summed_per_module_and_two_runs_compared(tmp_path, capsys):
    before, after = tmp_path / "before.xml", tmp_path / "after.xml"
    before.write_text(XML.format(a="100.0"))
    after.write_text(XML.format(a="75.0"))
    assert module_seconds(before) == {"tests/e2e/test_hard_kills.py": 100.0, "tests/unit/test_x.py": 3.5}
    assert main([str(before), str(after)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["100.0", "75.0", "0.75", "tests/e2e/test_hard_kills.py"]
    assert lines[-1].split()[:3] == ["103.5", "78.5", "0.76"]


def test_a_module_gone_from_the_second_run_is_shown_as_such(tmp_path, capsys):
    before, after = tmp_path / "before.xml", tmp_path / "after.xml"
    before.write_text(XML.format(a="100.0"))
    after.write_text(XML.format(a="75.0").replace("test_hard_kills", "test_renamed"))
    assert main([str(before), str(after)]) == 0
    assert capsys.readouterr().out.splitlines()[0].split() == ["100.0", "-", "-", "tests/e2e/test_hard_kills.py"]
