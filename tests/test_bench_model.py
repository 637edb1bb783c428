"""`cosine bench` shows the model beside the measurement; the engine's device mode pays a
volume's IOPS, which the model's device bound predicts."""

from __future__ import annotations

import io
import math
from pathlib import Path

import pytest
from rich.console import Console

from cost_models.cpu import DeviceModel
from cost_models.engine_model import engine_throughput
from cost_models.phi import load_phi
from measure.engine import run_scratch, workload_json
from measure.grid import designs, mix_spec
from measure.validate import check_device, model_prediction
from render.config import device_section, to_toml
from specs.errors import InputError


def test_bench_prints_the_models_prediction(engine_binary, monkeypatch) -> None:
    secs = designs(5000, quick=True, optima=False)["rocksdb"]
    text = to_toml(secs)
    wl = workload_json(mix_spec({"get": 0.5, "update": 0.5}), 5000, 5000, 1)
    rep = run_scratch(text, wl, "bench-model")
    pred = model_prediction(text, wl, rep)
    assert pred["throughput_ops"] > 0 and pred["blocks_per_op"] > 0
    assert 0.0 <= pred["throughput_accuracy"] <= 1.0 and 0.0 <= pred["blocks_accuracy"] <= 1.0
    from report import measure as report_measure

    buf = io.StringIO()
    monkeypatch.setattr(report_measure, "Console", lambda: Console(file=buf, width=200))
    report_measure.print_bench(rep, [], pred)
    out = buf.getvalue()
    assert "the model for the same scaled configuration" in out and f"{pred['throughput_ops']:,.0f}" in out
    # what the throughput is made of, model and engine: CPU per operation and the buffer's share
    assert pred["fg_cpu_us"] > 0 and pred["measured_fg_cpu_us"] > 0 and pred["bg_cpu_us"] >= 0
    assert 0.0 <= pred["buffered_share"] <= 1.0 and 0.0 <= pred["measured_buffered_share"] <= 1.0
    assert f"{pred['measured_fg_cpu_us']:.3f}" in out and "lookups the buffer answered" in out


def test_device_mode_pays_the_volumes_iops(engine_binary) -> None:
    """Uniform gets on an emulated 2,000-IOPS volume: the engine runs at the device bound the
    model predicts (IOPS / blocks per get), whatever the CPU does."""
    secs = designs(20_000, quick=True, optima=False)["rocksdb"]
    dev = DeviceModel(iops=2000.0, bytes_per_s=math.inf, read_latency_s=0.0)
    secs = {**secs, "device": device_section(dev)}
    wl = workload_json(mix_spec({"get": 1.0}), 20_000, 2000, 1)
    rep = run_scratch(to_toml(secs), wl, "device-iops")
    blocks = rep["per_op"]["get"]["blocks_read"] / rep["per_op"]["get"]["count"]
    assert rep["device"]["ios"] == rep["per_op"]["get"]["blocks_read"]
    measured = rep["run"]["throughput_ops"]
    assert measured == pytest.approx(2000.0 / blocks, rel=0.15)
    predicted, _ = engine_throughput(secs, wl, 2, dev, rep["load"]["shape"], rep.get("stats"))
    assert predicted == pytest.approx(measured, rel=0.15)


@pytest.mark.parametrize(
    "iops, latency, words",
    [(0.0, 0.0, "--iops"), (float("nan"), 0.0, "--iops"), (None, 100.0, "needs --iops"), (1000.0, -1.0, "latency")],
)
def test_device_flags_are_checked(iops, latency, words) -> None:
    with pytest.raises(InputError, match=words):
        check_device(iops, latency)


def test_the_volumes_bytes_count_index_blocks_at_their_own_size(engine_binary) -> None:
    """The B-tree preset's 32 KiB data blocks and one small index block per file, on a volume
    whose MiB/s binds: the volume's bytes per I/O and the run's rate are the model's, which
    counts each index block at its own size (a file's fences), not at a data block's."""
    from cost_models.cpu import demands
    from cost_models.engine_model import engine_shape, index_block_bytes, predict

    secs = designs(20_000, quick=True, optima=False)["wiredtiger"]
    dev = DeviceModel(iops=1e6, bytes_per_s=16 * 2**20, read_latency_s=0.0)
    secs = {**secs, "device": device_section(dev)}
    block = secs["layout"]["block_entries"] * (secs["layout"]["key_bytes"] + secs["layout"]["value_bytes"])
    assert index_block_bytes(secs, block, 20_000) < block / 4, "this preset's index blocks are small"
    wl = workload_json(mix_spec({"get": 1.0}), 20_000, 600, 1)
    rep = run_scratch(to_toml(secs), wl, "device-bytes")
    shape, end = rep["load"]["shape"], rep.get("stats")
    d = demands(
        load_phi(), predict(secs, wl, shape=shape, end_shape=end), engine_shape(secs, 20_000), {"get": 1.0}, 1.0
    )
    measured_bytes = rep["device"]["bytes"] / rep["device"]["ios"]
    assert float(d.io_bytes[0] / d.io[0]) == pytest.approx(measured_bytes, rel=0.1)
    predicted, _ = engine_throughput(secs, wl, 2, dev, shape, end)
    assert predicted == pytest.approx(rep["run"]["throughput_ops"], rel=0.15)


_TEMPLATE_TOML = (Path(__file__).resolve().parent.parent / "engine-template" / "engine.toml").read_text()


def _with(line: str, field: str) -> str:
    assert any(ln.startswith(field + " ") for ln in _TEMPLATE_TOML.splitlines()), field
    return "\n".join(line if ln.startswith(field + " ") else ln for ln in _TEMPLATE_TOML.splitlines())


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "design.class: required field is missing"),
        (_TEMPLATE_TOML.replace("[layout]\n", "[layout_]\n"), "layout.key_bytes: required field is missing"),
        ("layout = 5\n", "layout must be a [layout] table"),
        (_with('key_bytes = "x"', "key_bytes"), "layout.key_bytes must be a whole number"),
        (_with("key_bytes = 16.0", "key_bytes"), "layout.key_bytes must be a TOML integer"),
        (_with('buffer_bytes = "big"', "buffer_bytes"), "layout.buffer_bytes must be a whole number"),
        (_with("buffer_bytes = 10", "buffer_bytes"), "layout.buffer_bytes must hold an entry of 116 bytes"),
        (_with('class = ["lsm"]', "class"), "design.class: ['lsm'] is not one of"),
        (_with('compaction = "some"', "compaction"), "algorithms.compaction: 'some' is not one of"),
        (_with("bloom_bits_per_key = [10.0, 65.0]", "bloom_bits_per_key"), "bloom_bits_per_key[1] must be"),
        (_with("merge_threshold = 0.0", "merge_threshold"), "algorithms.merge_threshold must be"),
        (_with("file_entries = 2", "file_entries"), "file_entries must be at least layout.block_entries"),
        (_TEMPLATE_TOML + '\n[device]\nkind = "volume"\n', "device.iops: required field is missing"),
    ],
)
def test_bench_refuses_an_engine_toml_the_model_cannot_read_before_the_build(
    tmp_path, runner, monkeypatch, text, words
) -> None:
    """`cosine bench --engine DIR`: a malformed DIR/engine.toml is exit 2 naming the file and the field,
    before cargo builds the workspace (an empty one built for a minute, ran, then died with KeyError)."""
    import measure.bench as mb
    from cli.main import app

    def no_build(*_a: object, **_k: object) -> None:
        raise AssertionError("built before the engine.toml was checked")

    monkeypatch.setattr(mb, "build", no_build)
    (tmp_path / "engine.toml").write_text(text)
    spec = Path(__file__).resolve().parent.parent / "specs" / "ycsb_a.yaml"
    res = runner.invoke(app, ["bench", str(spec), "--engine", str(tmp_path), "--records", "1000", "--ops", "1000"])
    assert res.exit_code == 2, res.output + res.stderr
    err = res.stderr
    assert err.count("\n") == 1 and err.startswith(f"error: {tmp_path / 'engine.toml'}: ") and words in err, err
    assert [p.name for p in tmp_path.iterdir()] == ["engine.toml"] and res.stdout == ""


def test_the_shipped_engine_tomls_pass_the_check() -> None:
    import tomllib

    from measure.engine import TEMPLATE, check_config

    files = [TEMPLATE / "engine.toml", *sorted((TEMPLATE / "presets").glob("*.toml"))]
    for f in files:
        check_config(tomllib.loads(f.read_text()), f)
    assert len(files) > 1


def test_a_users_engine_that_does_not_build_is_bad_input(tmp_path, runner) -> None:
    """A failed build of the --engine workspace is exit 2 naming it and cargo's first error (it was a
    RuntimeError, exit 1, whose line was the caret under cargo's source excerpt)."""

    from cli.main import app
    from measure.engine import cargo_error

    stderr = "error: key with no value, expected `=`\n --> Cargo.toml:1:9\n  |\n1 | garbage [[[\n  |         ^\n"
    assert cargo_error(stderr) == "error: key with no value, expected `=` --> Cargo.toml:1:9"
    (tmp_path / "engine.toml").write_text(_TEMPLATE_TOML)
    (tmp_path / "Cargo.toml").write_text("garbage [[[\n")
    spec = Path(__file__).resolve().parent.parent / "specs" / "ycsb_a.yaml"
    res = runner.invoke(app, ["bench", str(spec), "--engine", str(tmp_path), "--records", "1000", "--ops", "1000"])
    assert res.exit_code == 2, res.output + res.stderr
    assert res.stderr.count("\n") == 1 and f"--engine {tmp_path}: cargo build failed: error: " in res.stderr
    assert "Cargo.toml:1:" in res.stderr
