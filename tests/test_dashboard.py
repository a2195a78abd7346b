"""The local dashboard: loopback only, Host / Origin checks, read-only JSON over the report
and the all-sources search, and end to end in headless Chromium (Debian's `chromium` and
`chromium-driver`, driven by Selenium): the page loads, shows the seeded home's figures,
and a search returns hits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from browser import headless_chromium
from dsh_recall.core.config import load_config
from dsh_recall.frontends.web.app import check_request
from dsh_recall.services.code import CodeService
from dsh_recall.services.notes import NotesService
from dsh_recall.services.report import usage

WORD = "zebrafrost"


def test_requests_are_checked_before_anything_is_served():
    ok = {"host": "127.0.0.1:8770"}
    assert check_request("GET", ok, 8770) is None
    assert check_request("HEAD", {"host": "localhost:8770"}, 8770) is None
    assert check_request("GET", {"host": "[::1]:8770"}, 8770) is None
    # DNS rebinding: the browser sends the attacker's name as Host.
    assert check_request("GET", {"host": "evil.example:8770"}, 8770)[0] == 421
    assert check_request("GET", {"host": "127.0.0.1:9999"}, 8770)[0] == 421
    assert check_request("GET", {}, 8770)[0] == 421
    assert check_request("GET", {**ok, "origin": "http://evil.example"}, 8770)[0] == 403
    assert check_request("GET", {**ok, "origin": "http://127.0.0.1:8770"}, 8770) is None
    assert check_request("GET", {**ok, "origin": "https://127.0.0.1:8770"}, 8770)[0] == 403
    assert check_request("GET", {**ok, "origin": "null"}, 8770)[0] == 403
    assert check_request("GET", {**ok, "sec-fetch-site": "cross-site"}, 8770)[0] == 403
    assert check_request("POST", ok, 8770)[0] == 405


def seed(tmp_path: Path) -> dict:
    """A recall home with a code index, a notes index and known usage records."""
    home = Path(os.environ["DSH_RECALL_HOME"])
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "deploy.py").write_text(f"def {WORD}_deploy(target):\n    return target\n")
    (repo / "other.py").write_text("def unrelated():\n    return 1\n")
    memory = tmp_path / "memory"
    memory.mkdir()
    (memory / "deploy.md").write_text(f"# Deploy\n\nThe {WORD} deploy runs on Fridays.\n\n"
                                      f"<img src=x onerror=\"document.title='owned'\"> {WORD}\n")
    cfg_file = tmp_path / "config.toml"
    cfg_file.write_text(f'[embedder]\nname = "fake"\n[notes]\nroots = ["{memory}"]\n')
    cfg = load_config(workspace=repo, config_file=str(cfg_file))
    CodeService(repo, cfg).index()
    NotesService(cfg).index()
    (repo / "other.py").write_text("def unrelated():\n    return 2\n")  # one stale file
    records = [("code", "search", 1200, 30000, str(repo)), ("notes", "search", 300, 2500, None),
               ("objects", "offload", 400, 90000, None), ("history", "search", 2000, 50000, None)]
    for src, op, ret, rep, ws in records:
        usage.record(src, op, ret, rep, workspace=ws, obj="abcd0001" if op == "offload" else None,
                     home=home)
    return {"home": home, "repo": repo.resolve(), "config": cfg_file,
            "calls": len(records), "kept": sum(rep - ret for _, _, ret, rep, _ in records)}


@pytest.fixture
def server(tmp_path):
    world = seed(tmp_path)
    env = {**os.environ, "DSH_RECALL_HOME": str(world["home"]), "DSH_HOME": str(tmp_path / "dsh")}
    proc = subprocess.Popen([sys.executable, "-m", "dsh_recall", "--config", str(world["config"]),
                             "serve", "--port", "0", "--workspace", str(world["repo"])],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        assert line.startswith("dsh-recall dashboard: http://127.0.0.1:"), (
            line, proc.stderr.read() if proc.poll() is not None else "")
        world["link"] = line.split()[-1]  # carries this run's token (frontends/web/credential.py)
        world["url"], _, world["token"] = world["link"].partition("?k=")
        yield world
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def get(url: str, headers: dict | None = None, method: str = "GET"):
    req = urllib.request.Request(url, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=60) as res:
            return res.status, dict(res.headers), res.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def test_http_api_answers_the_user_and_refuses_everyone_else(server):
    url = server["url"]
    auth = {"Authorization": f"Bearer {server['token']}"}
    assert get(url)[0] == 401 and get(url + "api/report")[0] == 401  # no credential
    status, headers, body = get(url, auth)
    assert status == 200 and b'<script src="/app.js"' in body
    assert "default-src 'none'" in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff"
    for asset in ("app.js", "app.css"):
        assert get(url + asset, auth)[0] == 200
    assert b"http://" not in body and b"https://" not in body  # no external assets
    assert b"http" not in get(url + "app.css", auth)[2]

    status, _, body = get(url + "api/report?days=30", auth)
    r = json.loads(body)
    assert status == 200
    assert r["totals"]["calls"] == server["calls"]
    assert r["totals"]["kept_out_chars"] == server["kept"]
    (code,) = r["indexes"]["code"]
    assert code["workspace"] == str(server["repo"]) and code["stale_files"] == 1

    status, _, body = get(url + f"api/search?q={WORD}+deploy&sources=code,notes", auth)
    d = json.loads(body)
    assert status == 200 and {h["source"] for h in d["results"]} == {"code", "notes"}
    assert get(url + f"api/search?q={WORD}&sources=galaxy", auth)[0] == 400
    assert get(url + f"api/search?q={WORD}&workspace=/etc", auth)[0] == 400
    assert get(url + "api/search?q=a%00b", auth)[0] == 400

    port = url.rstrip("/").rsplit(":", 1)[1]
    assert get(url + "api/report", auth | {"Host": f"evil.example:{port}"})[0] == 421
    assert get(url + "api/report", auth | {"Origin": "http://evil.example"})[0] == 403
    assert get(url + "api/report", auth, method="POST")[0] == 405
    assert get(url + "nope", auth)[0] == 404


def _browser(tmp_path: Path):
    return headless_chromium(tmp_path / "chromium-profile", window="1280,1600")


def test_browser_shows_the_seeded_figures_and_searches_every_source(server, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver = _browser(tmp_path)
    try:
        driver.set_page_load_timeout(60)
        driver.get(server["link"])  # sets the cookie, then redirects to /
        wait = WebDriverWait(driver, 60)
        wait.until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-report")
                   in ("ready", "error"))
        assert driver.find_element(By.TAG_NAME, "body").get_attribute("data-report") == "ready", \
            driver.find_element(By.ID, "status").text
        assert driver.find_element(By.ID, "calls").text == f"{server['calls']:,}"
        assert driver.find_element(By.ID, "kept-chars").text == f"{server['kept']:,}"
        assert driver.find_element(By.ID, "hit-ratio").text == "0%"  # 1 offloaded, 0 recalled
        rows = driver.find_elements(By.CSS_SELECTOR, "#workspaces-table tbody tr")
        (repo_row,) = [r for r in rows if r.find_elements(By.TAG_NAME, "td")[0].text
                       == str(server["repo"])]
        cells = [c.text for c in repo_row.find_elements(By.TAG_NAME, "td")]
        assert cells[3] == "2" and cells[4] == "1"  # files, stale
        assert len(driver.find_elements(By.CSS_SELECTOR, "#days-chart svg rect")) >= 4
        sources = [r.find_elements(By.TAG_NAME, "td")[0].text
                   for r in driver.find_elements(By.CSS_SELECTOR, "#sources-table tbody tr")]
        assert sources == ["code", "history", "notes", "objects"]

        box = driver.find_element(By.ID, "q")
        box.send_keys(f"{WORD} deploy")
        driver.find_element(By.ID, "go").click()
        wait.until(lambda d: d.find_element(By.ID, "results").get_attribute("data-state")
                   in ("done", "error"))
        assert driver.find_element(By.ID, "results").get_attribute("data-state") == "done", \
            driver.find_element(By.ID, "search-status").text
        hits = driver.find_elements(By.CSS_SELECTOR, "#results li")
        labels = {h.get_attribute("data-source") for h in hits}
        assert {"code", "notes"} <= labels
        first_code = next(h for h in hits if h.get_attribute("data-source") == "code")
        assert "deploy.py" in first_code.text and f"{WORD}_deploy" in first_code.text
        # A note's markup is shown as text, never run.
        assert "<img src=x" in driver.find_element(By.ID, "results").text
        assert not driver.find_elements(By.CSS_SELECTOR, "#results img")
        # An answer that is not strong says so above its hits, as the API's sentence has it.
        box.clear()
        box.send_keys("flurbozite_handler")
        driver.find_element(By.ID, "go").click()
        wait.until(lambda d: d.find_element(By.ID, "results").get_attribute("data-state")
                   in ("done", "error"))
        api = json.loads(get(server["url"] + "api/search?q=flurbozite_handler&limit=12",
                             {"Authorization": f"Bearer {server['token']}"})[2])
        shown = driver.find_element(By.ID, "search-match")
        assert (shown.text if shown.is_displayed() else "") == api["match_note"]
        assert driver.title == "dsh-recall"
        # Everything the page loaded came from the dashboard itself.
        origins = driver.execute_script(
            "return performance.getEntriesByType('resource').map(e => new URL(e.name).origin)")
        assert set(origins) <= {server["url"].rstrip("/")}
    finally:
        driver.quit()
