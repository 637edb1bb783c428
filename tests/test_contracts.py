"""The run directory's typed contract (solver/rundir.py, specs/io.py): solution.json and the
solver log are dataclasses, written and read only through specs.io, and docs/solution.schema.json
is generated from them.

Regenerate the schema after a deliberate change of the contract (and bump SOLUTION_VERSION):
``COSINE_UPDATE_SCHEMA=1 pytest tests/test_contracts.py``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import jsonschema
import pytest

from solver.rundir import SOLUTION, Solution, load_run, read_solution, sealed
from specs.errors import InputError
from specs.io import from_record, json_schema, omit_none, to_record
from specs.vocab import Provider

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "docs" / "solution.schema.json"
GOLDEN = Path(__file__).resolve().parent / "golden" / "solve_ycsb_a.json"


def test_the_shipped_schema_is_the_types() -> None:
    """docs/solution.schema.json is exactly what the Solution dataclass generates."""
    want = json.dumps(json_schema(Solution), indent=1, sort_keys=True) + "\n"
    if os.environ.get("COSINE_UPDATE_SCHEMA"):
        SCHEMA.write_text(want)
    assert SCHEMA.read_text() == want, "the contract changed: regenerate docs/solution.schema.json (module docstring)"


def test_the_golden_answer_validates_against_the_schema() -> None:
    """The pinned `cosine solve specs/ycsb_a.yaml --json` output (timings removed) is a valid Solution,
    by the JSON Schema and by the reader, and writing it back gives the same document."""
    doc = json.loads(GOLDEN.read_text())
    doc["certificate"]["wall_s"] = None
    doc["search"]["timings_s"] = {}
    need = (doc.get("cheapest_meeting_need") or {}).get("configuration")
    if need is not None:  # the second answer is a configuration too: its timing was removed as well
        need["certificate"]["wall_s"] = None
    jsonschema.validate(doc, json.loads(SCHEMA.read_text()))
    sol = from_record(Solution, doc, "golden")
    assert isinstance(sol.provider, Provider)
    assert to_record(sol) == doc


def test_a_solved_run_reads_back_as_the_types(solved) -> None:
    _, solved_run, _ = solved
    run = load_run(solved_run, baselines=True)
    assert run.solution.designs and run.solution.designs[0].count >= 1
    assert {r.provider for r in run.log} >= {run.solution.provider}
    jsonschema.validate(json.loads((solved_run / SOLUTION).read_text()), json.loads(SCHEMA.read_text()))


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda d: d.update(provider="ibm"), r"provider: 'ibm' is not one of aws, gcp, azure"),
        (lambda d: d["designs"][0].update(T="8"), r"designs\[0\]\.T: '8' is not an integer"),
        (lambda d: d["designs"][0].update(K=0), r"designs\[0\]: K 0 outside 1..T-1"),
        (lambda d: d["monthly_cost"].pop("total"), r"monthly_cost\.total: missing"),
        (lambda d: d.update(surprise=1), r"unknown field 'surprise'"),
        (lambda d: d["predicted"]["io_per_op"].update(fly=1.0), r"'fly' is not one of get"),
        (lambda d: d["certificate"].update(backend="gurobi"), r"backend 'gurobi' is not a cosine back end"),
        (lambda d: d["designs"][0].update(bloom_allocation="random"), r"bloom_allocation: 'random'"),
        (lambda d: d["designs"][0].update(codec_hot="bogus"), r"codec_hot 'bogus' is not a codec"),
        (lambda d: d.update(vms=[]), r"vms and designs list different VM types or counts"),
        (lambda d: d["vms"][0].update(count=d["vms"][0]["count"] + 1), r"vms and designs list different"),
    ],
)
def test_a_bad_solution_is_one_input_error_naming_the_field(solved, tmp_path: Path, edit, match) -> None:
    _, solved_run, _ = solved
    doc = json.loads((solved_run / SOLUTION).read_text())
    edit(doc)
    path = tmp_path / SOLUTION
    path.write_text(json.dumps(sealed(doc)))  # resealed: the checks behind the seal see the edit
    with pytest.raises(InputError, match=match):
        read_solution(path)


@dataclass
class _Inner:
    x: float
    name: str | None = field(default=None, metadata=omit_none())


@dataclass
class _Outer:
    items: list[_Inner]
    by: dict[Provider, int]


def test_records_round_trip_and_omit_what_is_absent() -> None:
    o = _Outer([_Inner(1.5), _Inner(2.0, "b")], {Provider.AWS: 3})
    rec = to_record(o)
    assert rec == {"items": [{"x": 1.5}, {"x": 2.0, "name": "b"}], "by": {"aws": 3}}
    assert from_record(_Outer, rec, "doc") == o
    with pytest.raises(InputError, match=r"doc\.items\[1\]\.x: nan is not a finite number"):
        from_record(_Outer, {"items": [{"x": 1.0}, {"x": float("nan")}], "by": {}}, "doc")
    with pytest.raises(InputError, match=r"doc\.by key 'ibm': 'ibm' is not one of"):
        from_record(_Outer, {"items": [], "by": {"ibm": 1}}, "doc")
    with pytest.raises(InputError, match=r"doc\.items\[0\]\.x: True is not a finite number"):
        from_record(_Outer, {"items": [{"x": True}], "by": {}}, "doc")


def test_a_solution_edited_after_the_solve_is_refused(solved, tmp_path: Path) -> None:
    """solution.json is sealed by the SHA-256 of its content: a value changed by hand (the spec it
    answers, a VM count) is refused by every reader, in its run directory or alone; the same
    document resealed is read (the seal is what changed), and reformatting it changes nothing."""
    _, solved_run, _ = solved
    doc = json.loads((solved_run / SOLUTION).read_text())
    path = tmp_path / SOLUTION
    path.write_text(json.dumps(doc, indent=4, sort_keys=True))  # reformatted, not changed
    assert read_solution(path).sha256 == doc["sha256"]
    doc["spec_raw"]["workload"]["entries"] = 1000
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match="content hash does not match"):
        read_solution(path)
    del doc["sha256"]
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match="no content hash"):
        read_solution(path)


@pytest.mark.parametrize(
    ("text", "match"),
    [("[" * 100_000, "nested too deep"), ('{"version": 1' + "0" * 5000 + "}", "an integer of more than 4,300 digits")],
)
def test_a_json_input_python_cannot_build_is_one_input_error(tmp_path: Path, text: str, match: str) -> None:
    """JSON that parses but that Python cannot build (nesting past the recursion limit, an integer past
    int()'s digits) is the same one-line "not valid JSON" error as any other bad JSON."""
    path = tmp_path / SOLUTION
    path.write_text(text)
    with pytest.raises(InputError, match=rf"not valid JSON \(a cosine solution\.json; {match}\)"):
        read_solution(path)
