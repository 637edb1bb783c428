"""`cosine deploy`'s plan and its input checks (no processes started): nodes and
memory scaled to this machine, one engine.toml per node, nutcracker's config,
and bad flags or directories refused with exit 2 before anything starts."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest

from cli.main import app
from deploy.plan import allocate, plan_cluster
from deploy.raft import default_replicas
from deploy.twemproxy import check_config, config_yaml
from solver.rundir import SOLUTION, read_solution
from specs.vocab import WalSync


def test_nodes_keep_the_vm_types_shares() -> None:
    assert allocate([30], 2) == [2]
    assert allocate([3, 1], 2) == [1, 1]  # every type at least once while n allows
    assert allocate([6, 2], 4) == [3, 1]
    assert allocate([1, 1, 1], 2) in ([1, 1, 0], [1, 0, 1], [0, 1, 1])
    assert sum(allocate([7, 5, 3], 9)) == 9


def test_plan_renders_each_node_scaled(solved: tuple[Path, Path, dict[str, Any]]) -> None:
    _, run_dir, sol = solved
    plan = plan_cluster(run_dir, nodes=2, scale=0.25, wal_sync=WalSync.EVERY_WRITE)
    # the answer's VMs are RF copies of its shards; a deployment's default RF is the answer's
    factor = sol["replication"]["factor"]
    assert factor >= 2, "the tiny spec's availability SLA asks for copies in two zones"
    assert len(plan.nodes) == 2 and plan.recommended_nodes == sum(v["count"] for v in sol["vms"]) // factor
    assert default_replicas(read_solution(run_dir / SOLUTION))[0] == factor
    for n in plan.nodes:
        d = next(x for x in sol["designs"] if x["vm_type"] == n.vm_type)  # each node renders its own VM type's
        toml = tomllib.loads(n.engine_toml)
        assert toml["durability"]["wal_sync"] == "every_write"
        assert toml["design"]["class"] == d["class"]
        assert toml["layout"]["buffer_bytes"] == max(
            64 * (toml["layout"]["key_bytes"] + toml["layout"]["value_bytes"]), int(d["buffer_bytes"] * 0.25)
        )
    assert plan.predicted_scaled_ops == pytest.approx(sol["predicted"]["throughput_ops"] * 2 / plan.recommended_nodes)
    default = plan_cluster(run_dir)
    assert 0 < default.scale <= 1 and default.scale_reason


def test_nutcracker_accepts_the_generated_config(tmp_path: Path) -> None:
    if shutil.which("nutcracker") is None:
        pytest.fail("nutcracker is not installed: apt-get install nutcracker (`make setup` installs it as root)")
    text = config_yaml(22121, [("node-0", 7001), ("node-1", 7002)])
    assert "distribution: ketama" in text and "auto_eject_hosts: true" in text
    p = tmp_path / "nutcracker.yml"
    p.write_text(text)
    check_config(p)
    p.write_text(text.replace("ketama", "no-such-ring"))
    with pytest.raises(RuntimeError, match="rejects"):
        check_config(p)


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "exactly one of"),
        (["--local", "--down"], "exactly one of"),
        (["--local", "--nodes", "0"], "--nodes"),
        (["--local", "--nodes", "1000"], "--nodes"),
        (["--local", "--scale", "0"], "--scale"),
        (["--local", "--scale", "1.5"], "--scale"),
        (["--local", "--scale", "nan"], "--scale"),
        (["--local", "--port", "80"], "--port"),
        (["--status"], "state.json"),
        (["--down"], "state.json"),
    ],
)
def test_bad_input_is_refused_before_starting(
    solved: tuple[Path, Path, dict[str, Any]], runner: Any, tmp_path: Path, args: list[str], message: str
) -> None:
    _, run_dir, _ = solved
    res = runner.invoke(app, ["deploy", str(run_dir), *args, "--out", str(tmp_path / "d")])
    assert res.exit_code == 2, res.output
    assert message in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "d").exists(), "a refused deploy wrote its directory"


def test_refuses_a_directory_that_is_not_a_deployment(
    solved: tuple[Path, Path, dict[str, Any]], runner: Any, tmp_path: Path
) -> None:
    _, run_dir, _ = solved
    (tmp_path / "mine.txt").write_text("not yours")
    res = runner.invoke(app, ["deploy", str(run_dir), "--local", "--nodes", "1", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "not a cosine deployment" in res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt"]
    res = runner.invoke(app, ["deploy", str(tmp_path / "nope"), "--local"])
    assert res.exit_code == 2 and "solution.json" in res.stderr


def test_a_deployments_ports_are_distinct(monkeypatch: pytest.MonkeyPatch) -> None:
    """A port chosen for a shard is released until the shard binds it, and the kernel may hand it out
    again: the proxy's stats port once came back equal to a shard's and nutcracker exited ("Address
    already in use"). `free_port` skips the ports the deployment has already chosen."""
    from deploy import cluster

    handed_out = iter([5001, 5002, 5001, 5002, 5003])

    class Sock:
        def __enter__(self) -> Sock:
            return self

        def __exit__(self, *_: object) -> None:
            pass

        def bind(self, _addr: object) -> None:
            pass

        def getsockname(self) -> tuple[str, int]:
            return (cluster.HOST, next(handed_out))

    monkeypatch.setattr(cluster.socket, "socket", Sock)
    ports = [cluster.free_port(), cluster.free_port()]
    assert ports == [5001, 5002]
    assert cluster.free_port(ports) == 5003
