"""`cosine report`: the what-if page, driven in a real headless browser.

Debian's chromium and chromium-driver (installed by `make setup`) through
selenium: the page must load offline, draw the frontier, and the budget slider
must show what `cosine whatif --budget --saved` (the saved bands) answers at the budget it displays. A
missing browser fails the test (it is part of the project's setup).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli.main import app
from tests.conftest import TINY_SPEC

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1280,2200",
)


@pytest.fixture(scope="module")
def robust_run(tmp_path_factory: pytest.TempPathFactory, runner: Any) -> Path:
    """The tiny spec solved with the paper's 10% noise (so the page has a robust-vs-nominal comparison)."""
    d = tmp_path_factory.mktemp("robust")
    spec = d / "tiny_robust.yaml"
    spec.write_text(TINY_SPEC.replace("name: tiny", "name: tiny_robust") + "robustness: {noise: 0.10}\n")
    res = runner.invoke(app, ["solve", str(spec), "--out", str(d / "run"), "--bands", "8"])
    assert res.exit_code == 0, res.output
    return d / "run"


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        pytest.fail(
            "chromium and chromium-driver are required for the what-if page test: "
            "run `make setup` as root, or apt-get install chromium chromium-driver"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for f in CHROMIUM_FLAGS:
        opts.add_argument(f)
    opts.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    drv = webdriver.Chrome(service=Service(executable_path=driver), options=opts)
    try:
        yield drv
    finally:
        drv.quit()


def _write(runner: Any, run_dir: Path, out: Path) -> str:
    res = runner.invoke(app, ["report", str(run_dir), "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out.read_text()


def test_report_is_one_offline_file(runner: Any, solved: tuple[Path, Path, dict], tmp_path: Path) -> None:
    _, run_dir, sol = solved
    html = _write(runner, run_dir, tmp_path / "page.html")
    assert not re.search(r"<script[^>]+src=", html), "the page loads an external script"
    assert not re.search(r"<link[^>]+href=", html), "the page loads an external stylesheet"
    assert "Plotly" in html and len(html) > 1_000_000, "plotly.js is not embedded"
    data = re.search(r'<script type="application/json" id="cosine-data">(.*?)</script>', html, re.S)
    assert data is not None
    page = json.loads(data.group(1))
    assert page["spec"] == sol["spec"]
    assert {s["answer"]["provider"] for s in page["steps"]} <= set(page["providers"])


def test_report_rejects_bad_input(runner: Any, solved: tuple[Path, Path, dict], tmp_path: Path) -> None:
    _, run_dir, _ = solved
    res = runner.invoke(app, ["report", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "not a run directory" in res.stderr
    res = runner.invoke(app, ["report", str(run_dir), "--out", str(tmp_path / "missing" / "r.html")])
    assert res.exit_code == 2 and "does not exist" in res.stderr
    assert not (tmp_path / "missing").exists()


def _shown(drv: Any) -> dict[str, Any]:
    from selenium.webdriver.common.by import By

    def data(i: str) -> str:
        return str(drv.find_element(By.ID, i).get_attribute(f"data-{'budget' if i == 'budget-value' else 'value'}"))

    if drv.find_element(By.ID, "chosen").get_attribute("hidden") is not None:
        return {"budget": float(data("budget-value")), "answer": None}
    vms = [
        {"type": li.get_attribute("data-type"), "count": int(li.get_attribute("data-count"))}
        for li in drv.find_elements(By.CSS_SELECTOR, "#chosen-vms li")
    ]
    band = drv.find_element(By.ID, "chosen-band").text
    return {
        "budget": float(data("budget-value")),
        "answer": {
            "provider": drv.find_element(By.ID, "chosen-provider").text,
            "vms": vms,
            "monthly_cost": float(data("chosen-cost")),
            "throughput_ops": float(data("chosen-throughput")),
            "band": int(band.split()[0]),
            "class": drv.find_element(By.ID, "chosen-class").text,
        },
        "per_provider": {
            tr.find_elements(By.TAG_NAME, "td")[0].text
            for tr in drv.find_elements(By.CSS_SELECTOR, "#per-provider tbody tr")
        },
        "bill_rows": len(drv.find_elements(By.CSS_SELECTOR, "#chosen-bill tbody tr")),
        "design_rows": len(drv.find_elements(By.CSS_SELECTOR, "#chosen-design tbody tr")),
    }


def _check_against_whatif(runner: Any, run_dir: Path, shown: dict[str, Any]) -> None:
    res = runner.invoke(app, ["whatif", str(run_dir), "--budget", repr(shown["budget"]), "--saved", "--json"])
    if res.exit_code == 3:  # below the cheapest saved point
        assert shown["answer"] is None, f"the page shows a configuration at ${shown['budget']:.2f}, whatif none"
        return
    assert res.exit_code == 0, res.output
    want = json.loads(res.stdout)
    a, got = want["answer"], shown["answer"]
    assert got is not None, f"the page shows nothing at ${shown['budget']:.2f}; whatif: {a}"
    assert got["provider"] == a["provider"]
    assert got["band"] == a["band"]
    assert got["class"] == a["class"]
    assert got["vms"] == a["configuration"]["vms"]
    assert got["monthly_cost"] == pytest.approx(a["monthly_cost"], rel=1e-12)
    assert got["throughput_ops"] == pytest.approx(a["throughput_ops"], rel=1e-12)
    assert shown["per_provider"] == set(want["per_provider"])
    assert shown["bill_rows"] == 4 and shown["design_rows"] == len(a["configuration"]["designs"])


def test_slider_shows_whatif_answer(runner: Any, robust_run: Path, browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    page = tmp_path / "report.html"
    _write(runner, robust_run, page)
    browser.get(page.as_uri())
    WebDriverWait(browser, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#frontier-plot .main-svg"))
    assert browser.execute_script("return typeof Plotly") == "object"
    # one trace per provider with a feasible band, one per preset with points, the chosen marker
    traces = browser.execute_script("return document.getElementById('frontier-plot').data.map(t => t.name)")
    assert any(t.endswith("(preset)") for t in traces) and "chosen" in traces

    slider = browser.find_element(By.ID, "budget-slider")
    seen = []
    shown = _shown(browser)  # the spec's budget, where the page opens
    _check_against_whatif(runner, robust_run, shown)
    seen.append(shown)
    slider.send_keys(Keys.HOME)  # the lowest budget of the frontier
    for moves in (0, 150, 150, 200, 250, 250):
        slider.send_keys(Keys.ARROW_RIGHT * moves)
        shown = _shown(browser)
        _check_against_whatif(runner, robust_run, shown)
        seen.append(shown)
    budgets = [s["budget"] for s in seen[1:]]
    assert budgets == sorted(budgets) and len(set(budgets)) == len(budgets), "the slider did not move the budget"
    answers = {json.dumps(s["answer"], sort_keys=True) for s in seen}
    assert len(answers) >= 3, "moving the slider across the frontier never changed the configuration"

    robust = browser.find_element(By.ID, "robustness-table").text
    assert "nominal choice" in robust and "perturbed workload" in robust
    assert browser.find_element(By.ID, "binding").text  # a binding resource, or the note that there is none

    shot = tmp_path / "report.png"
    assert browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000
