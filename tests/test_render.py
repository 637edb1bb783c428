"""`cosine render`: solutions and presets become engine.toml files the real engine loads."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from cost_models.design import hand_entry
from cost_models.phi import load_phi
from measure.engine import TEMPLATE, run, scaled_config, workload_json
from render.config import algorithms, config_device, device_section, engine_sections, threads_from_phi, to_toml
from specs.schema import parse_spec
from specs.vocab import DesignClass
from tests.conftest import TINY_SPEC

runner = CliRunner()


def test_render_solution(solved, tmp_path):
    _, run_dir, sol = solved
    out = tmp_path / "eng"
    res = runner.invoke(app, ["render", str(run_dir / "solution.json"), "--out", str(out)])
    assert res.exit_code == 0, res.stderr
    cfg = tomllib.loads((out / "engine.toml").read_text())
    d = sol["designs"][0]
    assert cfg["design"]["class"] == d["class"]
    assert cfg["layout"]["key_bytes"] == 16 and cfg["layout"]["value_bytes"] == 100
    if d["class"] != "lsh":
        assert cfg["layout"]["size_ratio"] == d["T"] and cfg["layout"]["runs_per_hot_level"] == d["K"]
        assert cfg["layout"]["hot_levels"] == d["L"] - d["Y"]
        assert cfg["layout"]["bloom_bits_per_key"] == pytest.approx(d["bloom_bits_per_level"], abs=1e-3)
    assert (out / "Cargo.toml").is_file() and (out / "README.md").is_file() and not (out / "target").exists()
    assert d["class"] in (out / "README.md").read_text()
    # the engine's device mode emulates the volume the solution chose for this node
    storage = next(st for st in sol["storage"] if st["vm_type"] == d["vm_type"])
    assert cfg["device"]["kind"] == "volume" and cfg["device"]["iops"] == pytest.approx(storage["iops"])
    assert cfg["device"]["read_latency_us"] == 0.0 and cfg["device"]["burst_ios"] >= 1.0
    assert config_device(cfg).iops == pytest.approx(storage["iops"])
    # rendering again over a previous render is fine; over someone's files it is refused
    assert runner.invoke(app, ["render", str(run_dir), "--out", str(out)]).exit_code == 0
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    res = runner.invoke(app, ["render", str(run_dir), "--out", str(other)])
    assert res.exit_code == 2 and (other / "notes.txt").read_text() == "keep me"


@pytest.mark.parametrize("preset", ["rocksdb", "wiredtiger", "faster"])
def test_render_presets(tmp_path, preset):
    res = runner.invoke(app, ["render", "--preset", preset, "--out", str(tmp_path / preset)])
    assert res.exit_code == 0, res.stderr
    cfg = tomllib.loads((tmp_path / preset / "engine.toml").read_text())
    expect = {"rocksdb": "lsm", "wiredtiger": "btree", "faster": "lsh"}[preset]
    assert cfg["design"]["class"] == expect


def test_render_bad_inputs(tmp_path):
    assert runner.invoke(app, ["render", "--preset", "leveldb", "--out", str(tmp_path / "x")]).exit_code == 2
    assert runner.invoke(app, ["render", str(tmp_path / "missing.json"), "--out", str(tmp_path / "y")]).exit_code == 2
    bad = tmp_path / "bad.json"
    bad.write_text('{"designs": []')
    res = runner.invoke(app, ["render", str(bad), "--out", str(tmp_path / "z")])
    assert res.exit_code == 2 and "solution.json" in res.stderr


def test_algorithm3_and_threads():
    assert algorithms("lsm", 4)["compaction"] == "full"
    # a hybrid merges whole levels, as the model prices it (cost_models.layout.CLASS_COMPACTION)
    assert algorithms("hybrid", 5)["compaction"] == "full"
    assert algorithms("btree", 3)["compaction"] == "partial"
    assert algorithms("btree", 3)["file_picking"] == "dense_fp"
    # eta is the first thread count whose speed-up is within 1% of all 16 cores'
    # (e.g. phi = 0.7: g(16) = 2.909, g(15) = 2.885 within 1%, g(14) = 2.857 not -> 15)
    import numpy as np

    from cost_models.cpu import workload_phi
    from cost_models.symbolic import compiled

    g = compiled()["amdahl"]
    for mix in ({"update": 1.0}, {"get": 1.0}, {"get": 0.5, "rmw": 0.5}):
        phi = float(workload_phi(load_phi(), np.array([0]), mix)[0])
        eta = threads_from_phi("lsm", mix, 16)
        assert g(phi, eta) >= 0.99 * g(phi, 16)
        assert eta == 1 or g(phi, eta - 1) < 0.99 * g(phi, 16)
    assert g(0.7, 15) / g(0.7, 16) > 0.99 > g(0.7, 14) / g(0.7, 16)


@pytest.mark.parametrize(
    "cls,design",
    [
        ("lsm", {"T": 6, "K": 1, "Z": 1, "L": 3, "Y": 0, "bloom_bits_per_level": [9.0, 7.0, 5.0]}),
        ("hybrid", {"T": 4, "K": 3, "Z": 1, "L": 4, "Y": 2, "bloom_bits_per_level": [8.0, 6.0, 0.0, 0.0]}),
        ("btree", {"T": 8, "K": 1, "Z": 1, "L": 3, "Y": 1, "bloom_bits_per_level": [0.0]}),
        ("lsh", {"T": 10, "K": 1, "Z": 1, "L": 1, "Y": 0, "lsh": True, "bloom_bits_per_level": [0.0]}),
    ],
)
def test_rendered_configs_run_in_the_engine(engine_binary, cls, design):
    """Each class's rendered engine.toml loads and serves a small workload in the real engine."""
    d = hand_entry(
        design_class=DesignClass(cls), buffer_bytes=64 * 1024, block_bytes=4096, entries_per_node=20_000, **design
    )
    text = to_toml(engine_sections(d, 16, 100, {"get": 0.5, "update": 0.5}, f"test {cls}"))
    spec = parse_spec(TINY_SPEC)
    wl = workload_json(spec, 20_000, 20_000, 1)
    rep = run(TEMPLATE, scaled_config(text, 1.0), wl)
    assert rep["class"] == cls
    assert rep["per_op"]["get"]["count"] + rep["per_op"]["update"]["count"] == 20_000
    assert rep["run"]["throughput_ops"] > 0


def test_render_writes_nothing_outside_out(solved, tmp_path):
    """Names read from a solution never leave --out; symbolic links in the output tree are refused."""
    from render.workspace import safe_file_name
    from specs.errors import InputError

    for bad in ("../../../x", "a/b", ".hidden", "..", "x\0y", ""):
        with pytest.raises(InputError):
            safe_file_name(bad, ".toml")
    assert safe_file_name("E8 v3", ".toml") == "E8_v3.toml"

    _, run_dir, _ = solved
    out = tmp_path / "eng"
    assert runner.invoke(app, ["render", str(run_dir), "--out", str(out)]).exit_code == 0
    victim = tmp_path / "victim.toml"
    victim.write_text("keep me")
    (out / "Cargo.toml").unlink()
    (out / "Cargo.toml").symlink_to(victim)
    res = runner.invoke(app, ["render", str(run_dir), "--out", str(out)])
    assert res.exit_code == 2 and "symbolic link" in res.stderr, res.stderr
    assert victim.read_text() == "keep me"
    (out / "Cargo.toml").unlink()
    (out / "crates").rename(tmp_path / "crates-elsewhere")
    (out / "crates").symlink_to(tmp_path / "crates-elsewhere")
    res = runner.invoke(app, ["render", "--preset", "rocksdb", "--out", str(out)])
    assert res.exit_code == 2 and "symbolic link" in res.stderr, res.stderr
    (tmp_path / "elsewhere").mkdir()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    res = runner.invoke(app, ["render", "--preset", "rocksdb", "--out", str(link)])
    assert res.exit_code == 2 and "symbolic link" in res.stderr, res.stderr
    assert not any((tmp_path / "elsewhere").iterdir())
    res = runner.invoke(app, ["render", "--preset", "rocksdb", "--out", str(TEMPLATE / "sub")])
    assert res.exit_code == 2 and "overlaps the engine template" in res.stderr
    assert not (TEMPLATE / "sub").exists()


def test_render_is_atomic_and_complete(solved, tmp_path):
    _, run_dir, _ = solved
    out = tmp_path / "eng"
    assert runner.invoke(app, ["render", str(run_dir), "--out", str(out)]).exit_code == 0
    assert not [p for p in out.rglob("*.tmp")]
    want = {p.relative_to(TEMPLATE) for p in TEMPLATE.rglob("*") if p.is_file() and "target" not in p.parts}
    want = {Path("TEMPLATE.md") if p == Path("README.md") else p for p in want}
    got = {p.relative_to(out) for p in out.rglob("*") if p.is_file()}
    assert want <= got


def test_device_section_round_trip():
    from cost_models.cpu import LOCAL_DEVICE, DeviceModel

    dev = DeviceModel(iops=3000.0, bytes_per_s=125 * 2**20, read_latency_s=250e-6)
    sec = device_section(dev)
    assert sec["kind"] == "volume" and sec["throughput_mib_s"] == 125.0 and sec["read_latency_us"] == pytest.approx(250)
    assert config_device({"device": sec}) == dev
    assert device_section(LOCAL_DEVICE) == {"kind": "local"}
    assert config_device({}) == LOCAL_DEVICE


def test_buffer_put_limit_is_the_models():
    """engine.toml carries the buffer's put limit the model prices its flushes with
    (io_model.flush_window), and the engine's default for a config without one is the same."""
    import re

    from cost_models.design import model_constants
    from render.config import BUFFER_PUT_LIMIT

    want = model_constants()["buffer_put_limit"]
    assert BUFFER_PUT_LIMIT == want
    src = (Path(__file__).resolve().parent.parent / "engine-template/crates/cosine-config/src/lib.rs").read_text()
    m = re.search(r"pub const DEFAULT_BUFFER_PUT_LIMIT: f64 = ([0-9.]+);", src)
    assert m is not None and float(m.group(1)) == want
