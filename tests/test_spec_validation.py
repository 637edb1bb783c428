"""Bad input: every case exits 2 with one line naming the field, and no traceback."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from specs.schema import SpecError, load_spec, parse_spec

REPO = Path(__file__).resolve().parent.parent
GOOD = (REPO / "specs" / "ycsb_a.yaml").read_text()
runner = CliRunner()


def _edit(old: str, new: str) -> str:
    assert old in GOOD, old
    return GOOD.replace(old, new, 1)


BAD = [
    # (id, yaml text, words the message must contain)
    ("empty", "", ["empty"]),
    ("only-comments", "# nothing\n", ["empty"]),
    ("not-yaml", "name: [unclosed\n", ["not valid YAML", "line"]),
    ("not-a-mapping", "- a\n- b\n", ["mapping", "list"]),
    ("missing-name", _edit("name: ycsb_a\n", ""), ["name", "missing"]),
    ("missing-workload-entries", _edit("  entries: 100000000\n", ""), ["workload.entries", "missing"]),
    ("unknown-top-field", _edit("name: ycsb_a\n", "name: ycsb_a\nworkloads: {}\n"), ["workloads", "workload"]),
    ("unknown-nested-field", _edit("  key_bytes: 128\n", "  key_byte: 128\n"), ["key_byte", "key_bytes"]),
    ("wrong-type", _edit("  entries: 100000000\n", "  entries: lots\n"), ["workload.entries", "number"]),
    ("nan", _edit("  value_bytes: 896\n", "  value_bytes: .nan\n"), ["value_bytes", "NaN"]),
    (
        "inf",
        _edit("  operations_per_month: 2.6e11\n", "  operations_per_month: .inf\n"),
        ["operations_per_month", "finite"],
    ),
    ("negative-budget", _edit("monthly_usd: 20000", "monthly_usd: -5"), ["budget.monthly_usd", "greater than 0"]),
    ("zero-entries", _edit("  entries: 100000000\n", "  entries: 0\n"), ["workload.entries", "at least 1"]),
    ("fractions-not-one", _edit("    update: 0.5\n", "    update: 0.4\n"), ["workload.operations", "sum to 0.9"]),
    ("fraction-over-one", _edit("    get: 0.5\n", "    get: 1.5\n"), ["operations.get", "at most 1"]),
    (
        "unknown-distribution",
        _edit("get: {kind: zipfian, theta: 0.99}", "get: {kind: zipf, theta: 0.99}"),
        ["distribution.get.kind", "zipfian"],
    ),
    ("unknown-provider", _edit("providers: [aws, gcp, azure]", "providers: [aws, ibm]"), ["providers[1]", "ibm"]),
    ("unknown-sla", _edit("slas: [backup, availability]", "slas: [backup, uptime]"), ["slas[1]", "uptime"]),
    (
        "empty-size-ratio-range",
        _edit("size_ratio: [2, 64]", "size_ratio: [50, 10]"),
        ["design.size_ratio", "empty range"],
    ),
    ("absurd-entries", _edit("  entries: 100000000\n", "  entries: 1e16\n"), ["workload.entries", "absurd"]),
    ("duplicate-key", _edit("  key_bytes: 128\n", "  key_bytes: 128\n  key_bytes: 64\n"), ["duplicate key"]),
    ("bool-as-number", _edit("  key_bytes: 128\n", "  key_bytes: true\n"), ["key_bytes", "boolean"]),
    ("bad-theta", _edit("get: {kind: zipfian, theta: 0.99}", "get: {kind: zipfian, theta: -1}"), ["theta"]),
    (
        "skew-missing-param",
        _edit("get: {kind: zipfian, theta: 0.99}", "get: {kind: skew, hot_fraction: 0.1}"),
        ["hot_probability", "missing"],
    ),
    ("bad-pricing", _edit("name: ycsb_a\n", "name: ycsb_a\npricing: cheapest\n"), ["pricing", "cheapest"]),
    ("bad-name", _edit("name: ycsb_a\n", "name: ../etc\n"), ["name"]),
    # past a float (OverflowError in float()), and past Python's int() (ValueError while parsing)
    ("int-past-float", _edit("  entries: 100000000\n", f"  entries: 1{'0' * 400}\n"), ["workload.entries", "finite"]),
    ("budget-past-float", _edit("monthly_usd: 20000", f"monthly_usd: 1{'0' * 400}"), ["budget.monthly_usd", "finite"]),
    ("int-past-int", _edit("  key_bytes: 128\n", f"  key_bytes: 1{'0' * 5000}\n"), ["not valid YAML", "line 7"]),
    ("impossible-date", _edit("  key_bytes: 128\n", "  key_bytes: 2023-02-30\n"), ["line 7", "out of range"]),
    (
        "consistency-list",
        _edit("robustness:", "replication: {consistency: [one]}\nrobustness:"),
        ["replication.consistency", "a list", "one, quorum"],
    ),
    (
        "consistency-mapping",
        _edit("robustness:", "replication: {consistency: {one: 1}}\nrobustness:"),
        ["replication.consistency", "a mapping", "one, quorum"],
    ),
    (
        "normal-stddev-below-resolution",
        _edit("get: {kind: zipfian, theta: 0.99}", "get: {kind: normal, mean: 0, stddev: 1e-300}"),
        ["distribution.get.stddev", "at least 1e-12"],
    ),
]

ALIAS_BOMB = """
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


@pytest.mark.parametrize("case", BAD, ids=[b[0] for b in BAD])
def test_bad_spec_cli(tmp_path, case):
    _, text, words = case
    p = tmp_path / "spec.yaml"
    p.write_text(text)
    res = runner.invoke(app, ["evaluate", str(p)])
    assert res.exit_code == 2, res.output
    err = res.stderr.strip()
    assert err.count("\n") == 0, f"not one line: {err!r}"
    assert err.startswith("error:"), err
    assert "Traceback" not in res.output + res.stderr
    for w in words:
        assert w in err, f"{w!r} not in {err!r}"


def test_alias_bomb_is_rejected_quickly(tmp_path):
    p = tmp_path / "bomb.yaml"
    p.write_text(ALIAS_BOMB)
    t0 = time.perf_counter()
    res = runner.invoke(app, ["evaluate", str(p)])
    assert time.perf_counter() - t0 < 2.0
    assert res.exit_code == 2 and "alias" in res.stderr


@pytest.mark.parametrize("what", ["missing", "directory", "binary"])
def test_not_a_spec_file(tmp_path, what):
    if what == "missing":
        p = tmp_path / "nope.yaml"
    elif what == "directory":
        p = tmp_path
    else:
        p = tmp_path / "bin.yaml"
        p.write_bytes(b"\xff\xfe\x00\x81garbage")
    res = runner.invoke(app, ["evaluate", str(p)])
    assert res.exit_code == 2 and res.stderr.startswith("error:") and res.stderr.count("\n") == 1


def test_shipped_specs_validate():
    for f in sorted((REPO / "specs").glob("*.yaml")):
        s = load_spec(f)
        assert s.name == f.stem


def test_defaults_and_scan_length():
    s = parse_spec(
        "name: x\nworkload: {entries: 1000, key_bytes: 8, value_bytes: 8, operations: {range: 1}}\n"
        "budget: {monthly_usd: 10}\n"
    )
    # no range length given: YCSB E's mean (schema.DEFAULT_SCAN_LENGTH), flagged as a default
    assert s.workload.scan_length == 50.5 and not s.workload.scan_length_given
    assert s.providers == ("aws", "gcp", "azure")
    assert s.budget_range == (1.0, 500000.0)
    # today's on-demand prices, a derived cluster cap, the robust rule's default tolerance
    assert s.pricing == "ondemand" and s.design.max_cluster_size is None and s.tolerance == 0.1
    given = parse_spec(
        "name: x\nworkload: {entries: 1000, key_bytes: 8, value_bytes: 8, operations: {range: 1}, scan_length: 7}\n"
        "budget: {monthly_usd: 10}\nrobustness: {noise: 0.1, tolerance: 0.25}\n"
    )
    assert given.workload.scan_length == 7 and given.workload.scan_length_given and given.tolerance == 0.25
    with pytest.raises(SpecError, match="not both"):
        parse_spec(
            "name: x\nworkload: {entries: 1000, key_bytes: 8, value_bytes: 8, operations: {range: 1},"
            " scan_length: 5, range_selectivity: 0.1}\nbudget: {monthly_usd: 10}\n"
        )


def test_budget_outside_range_widens_it():
    # Paper Sec. 5: a budget outside the range widens it to 1..(b + 500,000).
    s = parse_spec(
        "name: x\nworkload: {entries: 10, key_bytes: 8, value_bytes: 8, operations: {get: 1}}\n"
        "budget: {monthly_usd: 900000, range: [1, 500000]}\n"
    )
    assert s.budget_range == (1.0, 1_400_000.0)


def test_a_providers_flag_reads_as_a_spec_s_providers() -> None:
    """`--providers` (solve, whatif) is one parser: case-insensitive as a spec's `providers: [AWS]`,
    each provider once, no empty item, only the allowed ones."""
    import pytest

    from specs.errors import InputError
    from specs.schema import parse_providers_flag
    from specs.vocab import Provider

    allowed = ("aws", "gcp")
    assert parse_providers_flag(" AWS, gcp", allowed, "the spec's providers") == (Provider.AWS, Provider.GCP)
    for text, match in (
        ("aws,AWS", "named twice"),
        ("aws,", "comma-separated list"),
        ("azure", "azure not in the spec's providers"),
    ):
        with pytest.raises(InputError, match=match):
            parse_providers_flag(text, allowed, "the spec's providers")
