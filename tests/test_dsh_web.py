"""The browser half of the dsh plugin in the real runtime's web profile, in headless Chromium.

One dsh web server (deepseek-harness-runtime-bin 0.2.1rc2, `--profile web`, offline on
127.0.0.1, its packaging bug worked around with frontends/dsh/web_resolve_fix.cjs) mounts
the patch `integrate dsh patch --profile web` writes, against the loopback stand-in model
(tests/dsh_standin.py); Debian's chromium + chromium-driver drive its UI through Selenium:

- the page boots with our browser half (no plugin failure caused by us) and the strip says
  the worker is running; the stats route answers counts only, and nobody without the
  runtime's browser cookie;
- the settings card shows the volatile fields; turning the reaper off and saving reaches
  the host half live (the next big `bash` result reaches the model whole) and that
  conversation shows no chip; turned back on, the next one is offloaded, and the chip and
  the strip show figures equal to MCP `status`; the chip opens the Recall tab;
- the card says the secret (set in the patch) is set, and its value is in no HTTP or
  WebSocket response and no page text; a save the runtime refuses (a value under the
  schema's minimum) shows the runtime's reason and writes nothing;
- a key the Config does not declare still reaches the worker's plugin-status.json as a
  warning (the runtime's schema keeps unknown keys, so the host half still sees them);
- a worker call shows the strip's "Recalling…" sweep, then "Recall complete";
- a browser half that throws (a test flag in localStorage) leaves the page working.

The screenshots the README shows are taken here (RECALL_SCREENSHOTS=docs/images writes them).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from browser import headless_chromium
from dsh_recall.frontends.dsh import WEB_FIX_PATH
from dsh_standin import StandIn, last_is_tool_result, last_user_text, recall_exe, results, runtime_available, say, use

pytestmark = pytest.mark.slow

_why = runtime_available()
if _why:
    pytest.skip(_why, allow_module_level=True)

SECRET = "sk-dshr-secret-7f3a9c41e2"
BIG_LINES = 2000
UNKNOWN = "colour"
# Records every text the strip's activity part shows (the sweep lasts about one poll).
WATCH_ACTIVITY = """
window.__dshRecallActivity = [];
const seen = () => {
  const el = document.querySelector('[data-dsh-recall=strip] [data-part=activity]');
  const t = el ? el.textContent.replace(/^\\s*·\\s*/, '') : '';
  const log = window.__dshRecallActivity;
  if (t && log[log.length - 1] !== t) log.push(t);
};
new MutationObserver(seen).observe(document.body, {subtree: true, childList: true, characterData: true});
seen();
"""


def _browser_or_skip(profile_dir: Path):
    return headless_chromium(profile_dir, window="1440,900", headless="--headless=new",
                             capabilities={"goog:loggingPrefs": {"performance": "ALL", "browser": "ALL"}})


class Wire:
    """Every HTTP response body and WebSocket frame the page received (Chrome's CDP log)."""

    def __init__(self, driver) -> None:
        self.driver = driver
        self.seen: list[str] = []

    def drain(self) -> None:
        for entry in self.driver.get_log("performance"):
            msg = json.loads(entry["message"])["message"]
            method, params = msg.get("method"), msg.get("params", {})
            if method in ("Network.webSocketFrameReceived", "Network.webSocketFrameSent"):
                self.seen.append(params.get("response", {}).get("payloadData", ""))
            elif method == "Network.loadingFinished":
                try:
                    body = self.driver.execute_cdp_cmd("Network.getResponseBody", {"requestId": params["requestId"]})
                    self.seen.append(body.get("body", ""))
                except Exception:  # noqa: BLE001 - a body the browser no longer keeps (redirects, preflight)
                    pass
            elif method == "Network.responseReceived":
                self.seen.append(json.dumps(params.get("response", {}).get("headers", {})))


def _wait(predicate, timeout: float = 60, every: float = 0.3, what: str = "condition"):
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
        except Exception as e:  # noqa: BLE001 - a DOM node replaced while we read it
            last = e
        if last and not isinstance(last, Exception):
            return last
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def _big_script(tmp: Path) -> str:
    script = tmp / "big.py"
    script.write_text(f"for i in range({BIG_LINES}):\n"
                      "    print(f'line {i:05d} ' + 'abcdefghij' * 4 + f' {i * 37 % 1000:03d}')\n")
    return f"{sys.executable} {script}"


@pytest.fixture(scope="module")
def web(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dsh-web")
    repo = tmp / "repo"
    repo.mkdir()
    dsh_home = tmp / "dsh-home"
    recall_home = tmp / "recall-home"
    command = _big_script(tmp)

    def brain(body: dict[str, Any]) -> dict[str, Any]:
        got = results(body)
        # The web UI's user message carries more blocks than the sdk's: the newest ask wins.
        wire = json.dumps(body.get("messages"))
        text = "first" if wire.rfind("the first one") > wire.rfind("the second one") else \
            "second" if "the second one" in wire else last_user_text(body)
        if last_is_tool_result(body):
            m = re.search(r"to object ([0-9a-f]{8})", got.get("toolu_big2", ""))
            if m and "toolu_recall" not in got:  # the model recalls a middle line: a hit
                return use("mcp__recall__object_recall", {"id": m.group(1), "query": "line 01000"}, "toolu_recall")
            return say("done")
        if "first" in text:
            return use("bash", {"description": "print a lot", "command": command}, "toolu_big1")
        if "second" in text:
            return use("bash", {"description": "print a lot", "command": command}, "toolu_big2")
        return say("Hello from the stand-in model.")

    standin = StandIn(brain)
    threading.Thread(target=standin.serve_forever, daemon=True).start()
    env = {**os.environ, "DSH_HOME": str(dsh_home), "HOME": str(repo), "DSH_TELEMETRY_MODE": "DISABLED",
           "DSH_PERMISSION_MODE": "danger-full-access", "DEEPSEEK_BASE_URL": standin.url,
           "DEEPSEEK_API_KEY": "sk-mock", "NODE_OPTIONS": f"--require={WEB_FIX_PATH}"}
    # The patch as a user writes it, then the secret added by hand (the card writes it too)
    # and a key the plugin does not know (a typo a user makes).
    wrote = subprocess.run([recall_exe(), "integrate", "dsh", "patch", "--profile", "web", "--tools", "full",
                            "--command", recall_exe(), "--env", f"DSH_RECALL_HOME={recall_home}",
                            "--env", "DSH_RECALL_EMBEDDER__NAME=fake"],
                           capture_output=True, text=True, env=env, timeout=60)
    assert wrote.returncode == 0, wrote.stderr
    patch = dsh_home / "profiles" / "web" / "cordis.patch.yml"
    text = patch.read_text()
    assert "file://" in text and "NODE_OPTIONS=--require=" in wrote.stdout
    native = text.index("- id: recall-native")
    at = text.index("        serverName: recall\n", native) + len("        serverName: recall\n")
    patch.write_text(text[:at] + f"        embedderApiKey: {json.dumps(SECRET)}\n        {UNKNOWN}: blue\n" + text[at:])

    from deepseek_harness_runtime import bundled_runtime_path
    log = open(tmp / "dsh-web.log", "w")  # noqa: SIM115 - closed in the finalizer
    proc = subprocess.Popen([str(bundled_runtime_path()), "--profile", "web", "--no-open", "--host", "127.0.0.1",
                             "--port", "0"], stdout=subprocess.PIPE, stderr=log, text=True, env=env, cwd=repo)
    driver = None
    try:
        line = ""
        deadline = time.monotonic() + 180
        while "token=" not in line and time.monotonic() < deadline and proc.poll() is None:
            line = proc.stdout.readline()
        assert "token=" in line, (line, (tmp / "dsh-web.log").read_text()[-3000:])
        url = line.split()[-1]
        driver = _browser_or_skip(tmp / "chromium-profile")
        driver.set_page_load_timeout(120)
        wire = Wire(driver)
        driver.get(url)
        base = url.split("?")[0]
        yield {"driver": driver, "wire": wire, "base": base, "standin": standin, "patch": patch,
               "recall_home": recall_home, "log": tmp / "dsh-web.log", "tmp": tmp}
    finally:
        if driver is not None:
            driver.quit()
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        standin.shutdown()
        standin.server_close()


def _by():
    from selenium.webdriver.common.by import By
    return By


def _body(driver) -> str:
    return driver.find_element(_by().TAG_NAME, "body").text


def _click_text(driver, text: str, first: bool = False) -> None:
    el = _wait(lambda: [e for e in driver.find_elements(_by().XPATH, f"//*[normalize-space()='{text}']")
                        if e.is_displayed()], what=f"'{text}'")
    target = el[0] if first else el[-1]
    try:
        target.click()
    except Exception:  # noqa: BLE001 - covered by a transition or an overlay: click it as a user's pointer would
        driver.execute_script("arguments[0].click()", target)


def _home(web, strip: bool = True) -> None:
    d = web["driver"]
    d.get(web["base"])
    _wait(lambda: "Failed to load plugins" in _body(d) or (
        d.find_elements(_by().CSS_SELECTOR, "[data-dsh-recall=strip]") if strip else "New Session" in _body(d)),
        timeout=90, what="the page (and the strip)")
    # The preview notice (once per browser profile) covers the page until it is dismissed.
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        shown = [b for b in d.find_elements(_by().XPATH, "//button[normalize-space()='Continue']") if b.is_displayed()]
        if shown:
            shown[0].click()
            break
        time.sleep(0.3)


def _card(web):
    d = web["driver"]
    _home(web)
    _click_text(d, "Plugins")
    _click_text(d, "Recall", first=True)  # our row; a Recall tab title comes later in the page
    return _wait(lambda: d.find_elements(_by().CSS_SELECTOR, "[data-dsh-recall=card]"), what="the card")[0]


def _save_reaper(web, on: bool) -> None:
    d = web["driver"]
    card = _card(web)
    switch = card.find_element(_by().CSS_SELECTOR, "[data-field=reaper] [role=switch]")
    if (switch.get_attribute("aria-checked") == "true") != on:
        switch.click()
    _click_text(d, "Save")
    _wait(lambda: not [b for b in d.find_elements(_by().XPATH, "//button[normalize-space()='Save']") if b.is_enabled()]
          or d.find_elements(_by().CSS_SELECTOR, "[data-dsh-recall=refusal]"), what="the save to settle")
    assert not d.find_elements(_by().CSS_SELECTOR, "[data-dsh-recall=refusal]"), _body(d)
    want = "reaper: false" if not on else None
    if want:
        _wait(lambda: want in web["patch"].read_text(), what="the saved row in the profile patch")


def _session(web, message: str, watch: bool = False) -> str:
    from selenium.webdriver.common.keys import Keys
    d = web["driver"]
    _home(web)
    if watch:
        d.execute_script(WATCH_ACTIVITY)
    _click_text(d, "New Session")
    time.sleep(1)
    if [e for e in d.find_elements(_by().XPATH, "//*[normalize-space()='Choose workspace']") if e.is_displayed()]:
        _click_text(d, "Choose workspace")  # the first session: the browse picker opens at $HOME
        _click_text(d, "Open")
    editor = _wait(lambda: [e for e in d.find_elements(_by().CSS_SELECTOR, "[contenteditable=true]") if e.is_displayed()],
                   what="the composer")[0]
    editor.click()
    editor.send_keys(message)
    editor.send_keys(Keys.ENTER)
    try:
        _wait(lambda: "done" in _body(d).splitlines(), timeout=120, what="the turn to finish")
    except AssertionError as e:
        _shot(web, "failed-session.png")
        raise AssertionError(f"{e}; page: {_body(d)[-1500:]}") from None
    return _body(d)


def _mcp_status(recall_home: Path) -> dict[str, Any]:
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    async def run() -> dict[str, Any]:
        params = StdioServerParameters(command=recall_exe(), args=["mcp", "--tools", "full"],
                                       env={"DSH_RECALL_HOME": str(recall_home), "DSH_RECALL_EMBEDDER__NAME": "fake",
                                            "PATH": os.environ.get("PATH", "")})
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            res = await s.call_tool("status", {})
            return res.structured_content["sources"]["objects"]
    return anyio.run(run)


def _shot(web, name: str) -> None:
    out = Path(os.environ.get("RECALL_SCREENSHOTS") or web["tmp"])
    out.mkdir(parents=True, exist_ok=True)
    web["driver"].save_screenshot(str(out / name))


# -- the tests (one server for the module, in this order) ----------------------------------

def test_the_page_boots_with_our_browser_half_and_the_route_gives_counts_only(web):
    d = web["driver"]
    _home(web)
    assert "Failed to load plugins" not in _body(d)
    strip = d.find_element(_by().CSS_SELECTOR, "[data-dsh-recall=strip]")
    assert strip.get_attribute("data-health") == "running" and "running" in strip.text
    assert re.search(r"0 offloads · 0 tokens kept out · 0 hits · [\d.]+ [KM]?B on disk", strip.text), strip.text
    # The runtime's own log names no failure of ours: the one entry that does not activate is
    # office-to-pdf (it wants a libreoffice download).
    log = web["log"].read_text()
    assert not [x for x in log.splitlines() if re.search(r"fail|did not activate|error", x, re.I)
                and re.search(r"recall", x, re.I)], log[-3000:]
    assert "did not activate" not in log or "1 entry did not activate" in log
    stats = d.execute_async_script(
        "const done = arguments[0]; fetch('api/dsh-recall/stats').then(r => r.json()).then(done, e => done(String(e)))")
    assert set(stats) == {"version", "health", "busy", "recalling", "lastDoneAt", "objects", "sessions"}
    assert all(isinstance(v, int) for v in stats["objects"].values())
    # Without the runtime's browser cookie: refused.
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(web["base"] + "api/dsh-recall/stats", timeout=30)
    assert e.value.code in (401, 403)


def test_a_saved_setting_reaches_the_host_live_and_no_offload_means_no_chip(web):
    d = web["driver"]
    card = _card(web)
    for field in ("reaper", "reads", "autoRecall", "reclaim", "minChars", "callTimeoutMs", "embedderApiKey"):
        assert card.find_elements(_by().CSS_SELECTOR, f"[data-field={field}]"), field
    assert card.find_element(_by().CSS_SELECTOR, "#dsh-recall-minChars").get_attribute("value") == "256"
    _shot(web, "dsh-web-card.png")
    _save_reaper(web, on=False)
    _session(web, "the first one, please")
    # The host half read the saved value at once: dsh's own output reached the model.
    shown = next(results(b)["toolu_big1"] for b in web["standin"].requests if "toolu_big1" in results(b))
    assert "[dsh-recall: " not in shown and len(shown) > 40_000
    time.sleep(2)  # a few polls of the stats route
    assert not d.find_elements(_by().CSS_SELECTOR, "[data-dsh-recall=chip]")
    _save_reaper(web, on=True)


def test_an_offloaded_result_shows_chip_and_strip_equal_to_mcp_status(web):
    d = web["driver"]
    _session(web, "the second one, please", watch=True)
    # The offload's sweep, then one "Recall complete" (polled, so held one poll at least).
    _wait(lambda: "Recall complete" in d.execute_script("return window.__dshRecallActivity"), timeout=20,
          what="Recall complete after the sweep")
    activity = d.execute_script("return window.__dshRecallActivity")
    assert "Recalling…" in activity and activity.index("Recalling…") < activity.index("Recall complete"), activity
    shown = next(results(b)["toolu_big2"] for b in web["standin"].requests if "toolu_big2" in results(b))
    assert "[dsh-recall: " in shown and len(shown) < 20_000
    status = _mcp_status(web["recall_home"])
    assert status["offloaded"] == 1 and status["recalls"] >= 1 and status["tokens_kept_out"] > 0
    chip = _wait(lambda: d.find_elements(_by().CSS_SELECTOR, "[data-dsh-recall=chip]"), what="the chip")[0]
    assert chip.text.startswith("Recall 1 · ") and chip.text.endswith(" kept out"), chip.text
    assert int(chip.get_attribute("data-offloads")) == status["offloaded"]

    def strip_matches():
        s = d.find_element(_by().CSS_SELECTOR, "[data-dsh-recall=strip]")
        got = {k: int(s.get_attribute(f"data-{a}")) for k, a in (("offloaded", "offloads"),
               ("tokens_kept_out", "tokens-kept-out"), ("recalls", "recalls"), ("disk_bytes", "disk-bytes"))}
        return s if got == {k: status[k] for k in got} else None
    strip = _wait(strip_matches, what="strip figures equal to MCP status")
    def n(k, one, many):
        return f"{status[k]:,} {one if status[k] == 1 else many}"
    assert f"{n('offloaded', 'offload', 'offloads')} · {n('tokens_kept_out', 'token', 'tokens')} kept out · {n('recalls', 'hit', 'hits')}" \
        in strip.text, strip.text
    _shot(web, "dsh-web-session.png")
    chip.click()
    tab = _wait(lambda: d.find_elements(_by().CSS_SELECTOR, "[data-dsh-recall=tab]"), timeout=20, what="the Recall tab")
    assert "Offloads in this conversation" in tab[0].text and "estimate" in tab[0].text


def test_the_secret_is_shown_set_but_never_reaches_the_page(web):
    d = web["driver"]
    card = _card(web)
    field = _wait(lambda: [f for f in card.find_elements(_by().CSS_SELECTOR, "[data-field=embedderApiKey]")
                           if f.get_attribute("data-secret-set") == "true"], timeout=20, what="the secret shown set")[0]
    assert "Set" in field.text.splitlines() and "Not set" not in field.text, field.text
    time.sleep(1)
    web["wire"].drain()
    assert len(web["wire"].seen) > 20  # the log did capture the page's traffic
    assert not [s for s in web["wire"].seen if SECRET in s]
    assert SECRET not in _body(d) and SECRET not in d.page_source
    assert SECRET in web["patch"].read_text()  # it is set: just never sent


def test_a_refused_save_shows_the_runtimes_reason(web):
    d = web["driver"]
    card = _card(web)
    before = web["patch"].read_text()
    from selenium.webdriver.common.keys import Keys
    box = card.find_element(_by().CSS_SELECTOR, "#dsh-recall-callTimeoutMs")
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys("10")  # the card's own check lets it by; the Config's minimum is 50
    assert box.get_attribute("value") == "10"
    _click_text(d, "Save")
    refusal = _wait(lambda: d.find_elements(_by().CSS_SELECTOR, "[data-dsh-recall=refusal]"), timeout=30,
                    what="the refusal")[0]
    assert "callTimeoutMs" in refusal.text and ">= 50" in refusal.text, refusal.text
    assert web["patch"].read_text() == before  # nothing written (the next page load drops the draft)


def test_an_unknown_config_key_still_reaches_a_warning(web):
    # The runtime validates the config with the exported Config, whose object keeps keys it
    # does not declare: the host half still sees the typo and says so where users look.
    status = json.loads((web["recall_home"] / "dsh" / "plugin-status.json").read_text())
    assert any(f"unknown config keys ignored: {UNKNOWN}" in w["message"] for w in status["warnings"]), status
    assert f"unknown config keys ignored: {UNKNOWN}" in web["log"].read_text()


@pytest.mark.parametrize("where", ["apply", "render", "late"])
def test_a_throwing_browser_half_leaves_the_page_working(web, where):
    d = web["driver"]
    d.execute_script(f"localStorage.setItem('dsh-recall.test.throw', '{where}')")
    try:
        _home(web, strip=False)
        _click_text(d, "Plugins")
        _wait(lambda: "Agent loop" in _body(d), what="the Plugins page")
        assert "Failed to load plugins" not in _body(d)
        if where == "render":
            assert not d.find_elements(_by().CSS_SELECTOR, "[data-dsh-recall=strip]")
    finally:
        d.execute_script("localStorage.removeItem('dsh-recall.test.throw')")


def test_remove_after_saves_in_the_ui_keeps_every_row_the_runtime_wrote(web):
    # D13: the runtime's config editor appended its own rows (the preview notice dismissed
    # in _home) inside our markers while the card saved; remove takes out ours alone.
    import re as _re

    from dsh_recall.frontends.cli.dsh_patch_file import OUR_IDS
    text = web["patch"].read_text()
    theirs = [m.group(0) for m in _re.finditer(r"^- id: (\S+)\n(?:[ \t].*\n|\n(?=[ \t]))*", text, _re.M)
              if m.group(1).strip("'\"") not in OUR_IDS]
    assert theirs and text.index(theirs[0]) < text.index("# <<< dsh-recall"), text  # inside our markers
    dsh_home = web["patch"].parents[2]
    out = subprocess.run([recall_exe(), "integrate", "dsh", "remove", "--profile", "web", "--dsh-home", str(dsh_home)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "updated" in out.stdout, out
    left = web["patch"].read_text()
    assert all(row in left for row in theirs), (theirs, left)
    assert "recall-native" not in left and "mcp-recall" not in left and "dsh-recall" not in left, left
