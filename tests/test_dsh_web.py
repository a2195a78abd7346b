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
- the turn's auto-recall shows the strip's "Recalling…" sweep in the runtime's TextShimmer,
  then "Recall complete";
- the strip covers no control (button, link, input, text area, role=button) at 760, 1100 and
  1440 px, with the left sidebar open and shut, on a session page with the session list's
  "Show more" row, and a real pointer click reaches the composer's "+";
- in the dark theme every colour our views name is a token the runtime's stylesheet defines,
  and the strip and the chip change with the theme;
- a refused save marks its field and says the reason once, in the runtime's field styles;
  the card has hints, the worker's thresholds and a restart action that starts a new worker;
- the Recall tab is a door on the right sidebar's start page;
- a browser asking for Chinese gets our words in Chinese;
- a browser half that throws (a test flag in localStorage) leaves the page working.

The screenshots the README shows are taken here (RECALL_SCREENSHOTS=docs/images writes them):
dsh-web-{760,1100,1440}-{light,dark}.png, dsh-web-card.png, dsh-web-session.png.
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
# Records every text the strip's activity part shows, and whether it was the runtime's
# TextShimmer sweep (its root carries data-shimmer while active).
WATCH_ACTIVITY = """
window.__dshRecallActivity = [];
const seen = () => {
  const el = document.querySelector('[data-dsh-recall=strip] [data-part=activity]');
  let t = el ? el.textContent.replace(/^\\s*·\\s*/, '') : '';
  if (t && el.querySelector('[data-shimmer]')) t += ' [shimmer]';
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
        if "the third one" in wire:
            return use("bash", {"description": "print a lot", "command": command}, "toolu_big3")
        if "first" in text:
            return use("bash", {"description": "print a lot", "command": command}, "toolu_big1")
        if "second" in text:
            return use("bash", {"description": "print a lot", "command": command}, "toolu_big2")
        if "quick" in wire:
            return say("done")
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
    procs: list[subprocess.Popen[str]] = []

    def start() -> str:
        proc = subprocess.Popen([str(bundled_runtime_path()), "--profile", "web", "--no-open", "--host", "127.0.0.1",
                                 "--port", "0"], stdout=subprocess.PIPE, stderr=log, text=True, env=env, cwd=repo)
        procs.append(proc)
        line = ""
        deadline = time.monotonic() + 180
        while "token=" not in line and time.monotonic() < deadline and proc.poll() is None:
            line = proc.stdout.readline()
        assert "token=" in line, (line, (tmp / "dsh-web.log").read_text()[-3000:])
        return line.split()[-1]

    def stop(proc: subprocess.Popen[str]) -> None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    driver = None
    try:
        url = start()
        driver = _browser_or_skip(tmp / "chromium-profile")
        driver.set_page_load_timeout(120)
        wire = Wire(driver)
        driver.get(url)
        web = {"driver": driver, "wire": wire, "base": url.split("?")[0], "url": url, "standin": standin, "patch": patch,
               "recall_home": recall_home, "log": tmp / "dsh-web.log", "tmp": tmp, "pid": procs[-1].pid}

        def restart() -> None:
            """A new dsh web process over the same homes (a user restarting dsh)."""
            stop(procs[-1])
            web["url"] = start()
            web["base"] = web["url"].split("?")[0]
            web["pid"] = procs[-1].pid
            driver.get(web["url"])
        web["restart"] = restart
        yield web
    finally:
        if driver is not None:
            driver.quit()
        for proc in procs:
            stop(proc)
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


def _save_switch(web, field: str, on: bool) -> None:
    d = web["driver"]
    card = _card(web)
    switch = card.find_element(_by().CSS_SELECTOR, f"[data-field={field}] [role=switch]")
    if (switch.get_attribute("aria-checked") == "true") != on:
        switch.click()
    _click_text(d, "Save")
    refused = "[data-dsh-recall=card][data-refused]"
    _wait(lambda: not [b for b in d.find_elements(_by().XPATH, "//button[normalize-space()='Save']") if b.is_enabled()]
          or d.find_elements(_by().CSS_SELECTOR, refused), what="the save to settle")
    assert not d.find_elements(_by().CSS_SELECTOR, refused), _body(d)
    want = f"{field}: false" if not on else None
    if want:
        _wait(lambda: want in web["patch"].read_text(), what="the saved row in the profile patch")


def _save_reaper(web, on: bool) -> None:
    _save_switch(web, "reaper", on)


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
    assert {"version", "health", "busy", "recalling", "lastDoneAt", "floors", "objects", "sessions"} <= set(stats)
    assert all(isinstance(v, int) for v in stats["objects"].values())
    # Counts only: no string anywhere but the health state's name.
    strings = [v for v in json.dumps(stats).split('"')[1::2] if not re.fullmatch(r"[A-Za-z_]+|session-[0-9a-f-]+", v)]
    assert not strings, strings
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
    # The turn's auto-recall swept in dsh's own TextShimmer (a React.memo object: D2).
    sweep = "Recalling… [shimmer]"
    assert sweep in activity and activity.index(sweep) < activity.index("Recall complete"), activity
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
    assert "Offloads in this conversation" in tab[0].text and "whole recall home" in tab[0].text


def test_an_offload_alone_shows_no_recall_sweep(web):
    # D6: the route said `recalling` for 3 s after any worker call, so an offload (no
    # recall at all) swept "Recalling…" and then said "Recall complete".
    d = web["driver"]
    _save_switch(web, "autoRecall", False)
    try:
        _session(web, "the third one, please", watch=True)
        shown = next(results(b)["toolu_big3"] for b in web["standin"].requests if "toolu_big3" in results(b))
        assert "[dsh-recall: " in shown  # offloaded
        time.sleep(2)  # more than one poll period after the offload
        activity = d.execute_script("return window.__dshRecallActivity")
        assert activity == [], activity
    finally:
        _save_switch(web, "autoRecall", True)


# The strip's box against every control's visible box (each clipped by its scrolling
# ancestors and the window), and a hit test at each control's centre.
OVERLAP = """
const SEL = 'button, a[href], input, textarea, select, [role=button], [contenteditable=true]';
const clip = (el) => {
  const r = el.getBoundingClientRect();
  let b = {l: r.left, t: r.top, r: r.right, b: r.bottom};
  for (let p = el.parentElement; p; p = p.parentElement) {
    const cs = getComputedStyle(p);
    if (cs.overflowX !== 'visible' || cs.overflowY !== 'visible') {
      const q = p.getBoundingClientRect();
      b = {l: Math.max(b.l, q.left), t: Math.max(b.t, q.top), r: Math.min(b.r, q.right), b: Math.min(b.b, q.bottom)};
    }
  }
  b = {l: Math.max(b.l, 0), t: Math.max(b.t, 0), r: Math.min(b.r, innerWidth), b: Math.min(b.b, innerHeight)};
  return b.r - b.l > 0.5 && b.b - b.t > 0.5 ? b : null;
};
const strip = document.querySelector('[data-dsh-recall=strip]');
if (!strip) return null;
const s = clip(strip);
const name = (el) => (el.getAttribute('aria-label') || el.innerText || el.tagName).trim().slice(0, 40);
const hits = [], under = [], names = [];
let checked = 0;
for (const el of document.querySelectorAll(SEL)) {
  if (strip.contains(el)) continue;
  const cs = getComputedStyle(el);
  if (cs.visibility === 'hidden' || cs.display === 'none' || Number(cs.opacity) === 0) continue;
  const b = clip(el);
  if (!b) continue;
  checked += 1;
  names.push(name(el));
  if (s && Math.min(b.r, s.r) - Math.max(b.l, s.l) > 0.5 && Math.min(b.b, s.b) - Math.max(b.t, s.t) > 0.5) hits.push(name(el));
  const at = document.elementFromPoint((b.l + b.r) / 2, (b.t + b.b) / 2);
  if (at && strip.contains(at)) under.push(name(el));
}
const top = s && strip.contains(document.elementFromPoint((s.l + s.r) / 2, (s.t + s.b) / 2));
return {strip: s, top, wide: strip.dataset.wide, hits, under, checked, names};
"""

# Every var(--x) our views name, resolved where dsh's theme defines its tokens (<body>).
TOKENS = """
const names = new Set();
for (const el of document.querySelectorAll('[data-dsh-recall], [data-dsh-recall] *')) {
  for (const m of (el.getAttribute('style') || '').matchAll(/var\\((--[\\w-]+)/g)) names.add(m[1]);
}
const cs = getComputedStyle(document.body);
const look = (sel, prop) => { const el = document.querySelector(sel); return el ? getComputedStyle(el)[prop] : null; };
return {names: [...names], missing: [...names].filter((n) => !cs.getPropertyValue(n).trim()),
        dark: document.body.hasAttribute('data-ds-dark-theme'),
        strip: look('[data-dsh-recall=strip]', 'color'), stripBg: look('[data-dsh-recall=strip]', 'backgroundColor'),
        chip: look('[data-dsh-recall=chip]', 'borderTopColor'), page: getComputedStyle(document.body).backgroundColor};
"""


def _theme(web, dark: bool) -> None:
    d = web["driver"]
    d.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme",
                                                                   "value": "dark" if dark else "light"}]})
    _wait(lambda: d.execute_script("return document.body.hasAttribute('data-ds-dark-theme')") == dark,
          what=f"the {'dark' if dark else 'light'} theme")


def _sidebar(web, open_: bool) -> None:
    d = web["driver"]
    want, other = ("Collapse sidebar", "Open sidebar") if open_ else ("Open sidebar", "Collapse sidebar")

    def shown(label):
        return [b for b in d.find_elements(_by().CSS_SELECTOR, f"[aria-label='{label}']") if b.is_displayed()]
    _wait(lambda: shown(want) or shown(other), what="the sidebar's toggle")
    if not shown(want):
        # dsh's own dock tabs can lie over its rail toggle at 760 px: a script click.
        d.execute_script("arguments[0].click()", shown(other)[0])
    _wait(lambda: shown(want), what=f"the sidebar {'open' if open_ else 'shut'}")
    _wait(lambda: d.execute_script("return document.querySelector('[data-dsh-recall=strip]')?.dataset.wide")
          == ("true" if open_ else "false"), what="the strip to follow the sidebar")
    time.sleep(0.6)  # the column's slide


def _escape(d) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys
    ActionChains(d).send_keys(Keys.ESCAPE).perform()
    time.sleep(0.3)


def _open_session(web, title: str) -> None:
    d = web["driver"]
    _home(web)
    _click_text(d, title)
    _wait(lambda: [e for e in d.find_elements(_by().CSS_SELECTOR, "[contenteditable=true]") if e.is_displayed()],
          what="the session page")


def test_the_strip_covers_no_control_at_any_window_size(web):
    # D3/D4: the strip lay over the composer's "+" (a 760 px window, or 1100 px with the
    # sidebar shut) and the session list's "Show less"; it caught clicks meant for them.
    d = web["driver"]
    for i in range(3):  # six sessions: the list shows five and a "Show 1 more sessions" row
        _session(web, f"a quick one {i}")
    _open_session(web, "the second one, please")
    # The Recall tab the chip opened would take a 760 px window whole: the conversation,
    # its composer and the left sidebar are what is measured here.
    shut = [b for b in d.find_elements(_by().CSS_SELECTOR, "[aria-label='Collapse right sidebar']") if b.is_displayed()]
    if shut:
        shut[0].click()
        _wait(lambda: not [b for b in d.find_elements(_by().CSS_SELECTOR, "[aria-label='Collapse right sidebar']")
                           if b.is_displayed()], what="the right sidebar shut")

    def whole_list():  # the full list, "Show less" at its end (D4: it could not be clicked)
        more = _wait(lambda: [e for e in d.find_elements(_by().XPATH, "//button[starts-with(normalize-space(), 'Show 1 more')]"
                                                          " | //button[normalize-space()='Show less']") if e.is_displayed()],
                     what="the list's 'Show 1 more sessions'")
        if more[0].text.startswith("Show 1 more"):
            d.execute_script("arguments[0].click()", more[0])
        _wait(lambda: [e for e in d.find_elements(_by().XPATH, "//button[normalize-space()='Show less']") if e.is_displayed()],
              what="'Show less'")
    seen = {}
    try:
        for width in (760, 1100, 1440):
            d.set_window_size(width, 900)
            for open_ in (True, False):
                _sidebar(web, open_)
                if open_:
                    whole_list()
                got = d.execute_script(OVERLAP)
                assert got and got["strip"] and got["top"], (width, open_, got)  # shown, on top of its own box
                assert "Add files or run commands" in got["names"], got["names"]  # the composer's "+" was measured
                assert got["checked"] > 8, got  # the page's controls were looked at
                assert not got["hits"] and not got["under"], (width, open_, got["strip"], got["hits"], got["under"])
                seen[(width, open_)] = got["wide"]
                if open_:  # the whole session list, "Show less" at its end: among the controls checked
                    assert "Show less" in got["names"], got["names"]
                # A real pointer reaches the composer's "+" (a covered element raises
                # ElementClickInterceptedException).
                from selenium.common.exceptions import ElementClickInterceptedException
                plus = d.find_element(_by().CSS_SELECTOR, "[aria-label='Add files or run commands']")
                try:
                    plus.click()
                    _escape(d)  # close its menu
                except ElementClickInterceptedException as e:  # by dsh's own layers, never ours
                    assert "dsh-recall" not in e.msg, e.msg
            # The README's screenshots: this size, sidebar as dsh opens it, light and dark.
            _sidebar(web, width >= 1100)
            for dark in (False, True):
                _theme(web, dark)
                time.sleep(0.5)
                _shot(web, f"dsh-web-{width}-{'dark' if dark else 'light'}.png")
            _theme(web, False)
    finally:
        d.set_window_size(1440, 900)
        _theme(web, False)
    # Wide figures with the sidebar open, the health dot on its rail when shut.
    assert seen == {(w, o): "true" if o else "false" for w in (760, 1100, 1440) for o in (True, False)}, seen


def test_dark_theme_colours_are_the_runtimes_own_tokens(web):
    # D5: the bundle named --dsw-alias-bg-elevated, -border-default, -text-secondary, which
    # dsh's stylesheet does not define: the strip stayed white, the chip lost its border.
    d = web["driver"]
    _open_session(web, "the second one, please")
    _wait(lambda: d.find_elements(_by().CSS_SELECTOR, "[data-dsh-recall=chip]"), what="the chip")
    looks = {}
    try:
        for dark in (False, True):
            _theme(web, dark)
            time.sleep(0.3)
            got = d.execute_script(TOKENS)
            assert got["dark"] is dark and got["names"], got
            assert not got["missing"], got["missing"]
            assert got["chip"] not in ("rgba(0, 0, 0, 0)", "transparent", None), got
            looks[dark] = got
    finally:
        _theme(web, False)
    # The strip's words, its ground and the chip's border follow the theme (on a dark page
    # nothing of ours stays light).
    for k in ("strip", "stripBg", "chip"):
        assert looks[False][k] != looks[True][k], (k, looks)

    def lum(rgb: str) -> float:
        r, g, b = (int(x) for x in re.findall(r"\d+", rgb)[:3])
        return 0.2126 * r + 0.7152 * g + 0.0722 * b
    assert lum(looks[True]["stripBg"]) < 80 and lum(looks[True]["strip"]) > 120, looks[True]


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


def test_a_refused_save_marks_its_field_and_says_the_reason_once(web):
    # D8: the raw schema message ("$.callTimeoutMs expected number >= 50 but got 10") was
    # shown twice, in unstyled text, and no field was marked.
    d = web["driver"]
    card = _card(web)
    before = web["patch"].read_text()
    from selenium.webdriver.common.keys import Keys
    box = card.find_element(_by().CSS_SELECTOR, "#dsh-recall-callTimeoutMs")
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys("10")  # the card's own check lets it by; the Config's minimum is 50
    assert box.get_attribute("value") == "10"
    _click_text(d, "Save")
    _wait(lambda: d.find_elements(_by().CSS_SELECTOR, "[data-dsh-recall=card][data-refused=callTimeoutMs]"), timeout=30,
          what="the refusal")
    assert box.get_attribute("aria-invalid") == "true"
    message = d.find_element(_by().CSS_SELECTOR, "#dsh-recall-callTimeoutMs-message")
    assert message.text == "Must be at least 50.", message.text
    page = _body(d)
    assert page.count("Must be at least 50.") == 1, page
    assert "$.callTimeoutMs" not in page and "expected number" not in page, page
    assert page.count("Not saved: see Worker call deadline (ms).") == 1, page
    # Both in dsh's own styles (its field message and its form footer), none unstyled.
    footer = d.find_element(_by().XPATH, "//*[normalize-space()='Not saved: see Worker call deadline (ms).']")
    for el in (message, footer):
        assert el.get_attribute("class"), el.get_attribute("outerHTML")
    assert d.execute_script("return getComputedStyle(arguments[0]).color", message) != \
        d.execute_script("return getComputedStyle(arguments[0]).color", box)  # the error colour
    _shot(web, "dsh-web-refused.png")
    assert web["patch"].read_text() == before  # nothing written (the next page load drops the draft)
    # Editing the field takes the mark away.
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys("1500")
    _wait(lambda: box.get_attribute("aria-invalid") != "true", what="the mark to go")


def test_the_card_says_what_each_number_does_and_the_thresholds_that_matter(web):
    d = web["driver"]
    card = _card(web)
    for f in ("minChars", "callTimeoutMs", "startTimeoutMs", "hangMs"):
        hint = card.find_element(_by().CSS_SELECTOR, f"#dsh-recall-{f}-message")
        assert re.search(r"default [\d,]+\.$", hint.text) and "–" in hint.text, (f, hint.text)
    # The worker's own floors (the recall config's), not the card's 256: what is offloaded.
    floors = card.find_element(_by().CSS_SELECTOR, "[data-dsh-recall=thresholds]").text
    assert "over 2,500 chars" in floors and "objects.threshold_chars" in floors, floors
    # "Changes apply at once" is a quiet note in the secondary label colour, not a heading.
    probe = "const p = document.createElement('span'); p.style.color = 'var(--dsw-alias-label-secondary)';" \
            "document.body.append(p); const c = getComputedStyle(p).color; p.remove(); return c"
    note = card.find_element(_by().CSS_SELECTOR, "[data-dsh-recall=live]")
    style = d.execute_script("const s = getComputedStyle(arguments[0]); return [s.color, s.fontWeight, s.fontSize]", note)
    assert style == [d.execute_script(probe), "400", "13px"], style


def test_the_card_restarts_the_worker(web):
    # The key field said "used from the next worker start" with no way to start one.
    d = web["driver"]

    def workers():
        out = set()
        for status in Path("/proc").glob("[0-9]*/status"):
            try:
                text = status.read_text()
                cmd = (status.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if re.search(rf"^PPid:\s*{web['pid']}$", text, re.M) and " worker" in cmd:
                out.add(int(status.parent.name))
        return out
    before = workers()
    assert before, "no worker under the dsh web process"
    card = _card(web)
    assert "restart it below" in card.find_element(_by().CSS_SELECTOR, "[data-field=embedderApiKey]").text
    card.find_element(_by().CSS_SELECTOR, "[data-dsh-recall=restart-button]").click()
    _wait(lambda: d.find_element(_by().CSS_SELECTOR, "[data-dsh-recall=restart]").get_attribute("data-state") == "done",
          timeout=30, what="the restart")
    assert "Worker restarted." in card.text
    after = _wait(lambda: (workers() - before) and not (workers() & before) and workers(), timeout=30,
                  what="a new worker in the old one's place")
    assert after and not (after & before)
    _wait(lambda: d.find_element(_by().CSS_SELECTOR, "[data-dsh-recall=strip]").get_attribute("data-health") == "running",
          timeout=30, what="the strip to say running again")


def test_the_recall_tab_is_a_door_on_the_right_sidebars_start_page(web):
    d = web["driver"]
    _open_session(web, "the second one, please")
    opener = [b for b in d.find_elements(_by().CSS_SELECTOR, "[aria-label='Open right sidebar']") if b.is_displayed()]
    if opener:
        d.execute_script("arguments[0].click()", opener[0])
    # The Recall tab the chip opened holds the column: a new tab shows the start page.
    new_tab = _wait(lambda: [b for b in d.find_elements(_by().CSS_SELECTOR, "[aria-label='New tab']") if b.is_displayed()]
                    or d.find_elements(_by().CSS_SELECTOR, "[data-sidebar-right-guide]"), timeout=20, what="the right sidebar")
    if new_tab and new_tab[0].get_attribute("aria-label") == "New tab":
        d.execute_script("arguments[0].click()", new_tab[0])
    door = _wait(lambda: [e for e in d.find_elements(_by().CSS_SELECTOR, "[data-sidebar-right-guide-entry=dshRecall]")
                          if e.is_displayed()], timeout=20, what="our door on the start page")[0]
    assert "Recall" in door.text
    door.click()
    tab = _wait(lambda: d.find_elements(_by().CSS_SELECTOR, "[data-dsh-recall=tab]"), timeout=20, what="the Recall tab")[0]
    # A styled summary (two sections of term / figure rows), not a bare table.
    assert len(tab.find_elements(_by().CSS_SELECTOR, "section dl")) == 2 and not tab.find_elements(_by().TAG_NAME, "table")
    rows = dict(zip([e.text for e in tab.find_elements(_by().TAG_NAME, "dt")], [e.text for e in tab.find_elements(_by().TAG_NAME, "dd")]))
    assert rows.get("Offloads in this conversation") == "1", rows  # this session's figures (the session the tab sits in)
    _shot(web, "dsh-web-tab.png")


def test_a_chinese_browser_gets_chinese_words(web):
    # The runtime picks its locale from the browser's languages; our words follow it.
    profile = web["tmp"] / "chromium-zh"
    zh = headless_chromium(profile, window="1440,900", headless="--headless=new", args=["--lang=zh-CN"],
                           prefs={"intl.accept_languages": "zh-CN,zh"})
    try:
        zh.set_page_load_timeout(120)
        zh.get(web["url"])
        strip = _wait(lambda: zh.find_elements(_by().CSS_SELECTOR, "[data-dsh-recall=strip]"), timeout=90,
                      what="the strip in Chinese")[0]
        _wait(lambda: "次卸载" in strip.text and "运行中" in strip.text, what="Chinese figures")
        assert "offload" not in strip.text
    finally:
        zh.quit()


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


def test_the_chip_of_an_old_conversation_survives_a_restart_of_dsh(web):
    # The chip's figures lived in the dsh process: after a restart an old conversation had
    # none. They come from the worker's ledger now (its usage log), which a new dsh reads.
    d = web["driver"]
    web["restart"]()
    _open_session(web, "the second one, please")
    chip = _wait(lambda: d.find_elements(_by().CSS_SELECTOR, "[data-dsh-recall=chip]"), timeout=30,
                 what="the chip after the restart")[0]
    assert chip.text.startswith("Recall 1 · ") and int(chip.get_attribute("data-offloads")) == 1, chip.text


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
