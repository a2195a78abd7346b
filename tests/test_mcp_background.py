"""Background work driven by an answer's `backlog` (services/indexing/background.py), and the MCP
server's use of it: the named job starts once per workspace, and the note that told a
person which command to run says instead that this server is doing it."""

from __future__ import annotations

import threading

import pytest

from dsh_recall.core.config import load_config
from dsh_recall.services.base import backlog_item
from dsh_recall.services.indexing import background
from dsh_recall.services.indexing.background import Background, Job, say

HINT = "`dsh-recall index` embeds them"


@pytest.fixture
def cfg():
    return load_config(overrides={"embedder": {"name": "fake"}})


def _gate_job(name: str, monkeypatch, **kw) -> tuple[list[str], threading.Event]:
    """Register a job `name` that records each run and waits for `release`."""
    runs: list[str] = []
    release = threading.Event()

    def run(ctx: background.Context) -> dict:
        runs.append(str(ctx.workspace))
        release.wait(10)
        return {"embedded": 3}

    monkeypatch.setitem(background.JOBS, name, Job(name, run, **kw))
    return runs, release


def test_say_puts_the_front_ends_words_in_place_of_the_hint_only():
    item = backlog_item("code", "vectors", 60, "dsh-recall index", "code.embed", hint=HINT)
    answer = {"notes": [f"60 chunks wait for vectors (found by words only meanwhile); {HINT}",
                        "weak match inside src; `--focus .` searches the whole workspace"],
              "layer_status": {"semantic": f"gated: 0/300 blocks embedded; {HINT}", "literal": "ok"}}
    say(answer, [item], {"code.embed": "this server is indexing them"})
    assert answer["notes"] == [
        "60 chunks wait for vectors (found by words only meanwhile); this server is indexing them",
        "weak match inside src; `--focus .` searches the whole workspace"]
    assert answer["layer_status"] == {"semantic": "gated: 0/300 blocks embedded; this server is "
                                                  "indexing them", "literal": "ok"}
    # No hint (no note told anyone to run anything), or a job it has no words for: unchanged.
    bare = backlog_item("history", "vectors", 1, "dsh-recall history import --embed", "history.embed")
    quiet = {"layer_status": {"semantic": "ok"}}
    say(quiet, [bare], {"history.embed": "this server is embedding the rest"})
    assert quiet == {"layer_status": {"semantic": "ok"}}


def test_a_job_runs_once_per_key_and_stop_ends_new_runs(tmp_path, cfg, monkeypatch):
    runs, release = _gate_job("notes.embed", monkeypatch)
    jobs = Background(log=lambda m: None)
    a, b = tmp_path / "a", tmp_path / "b"
    assert jobs.start("notes.embed", cfg=cfg, workspace=a)
    assert not jobs.start("notes.embed", cfg=cfg, workspace=a)  # already running there
    assert jobs.start("notes.embed", cfg=cfg, workspace=b)  # another workspace: its own
    assert jobs.snapshot("notes.embed", a)["state"] == "running"
    release.set()
    jobs.wait("notes.embed", a, 10)
    jobs.wait("notes.embed", b, 10)
    assert sorted(runs) == [str(a), str(b)]
    assert jobs.snapshot("notes.embed", a)["state"] == "done" and jobs.embedded("notes.embed", a) == 3
    assert set(jobs.status()) == {f"notes.embed {a}", f"notes.embed {b}"}
    jobs.stop()
    assert not jobs.start("notes.embed", cfg=cfg, workspace=a)  # the process is ending
    with pytest.raises(KeyError, match="jobs: "):
        jobs.start("nope.embed", cfg=cfg)


def test_fill_takes_the_backlog_it_runs_and_respects_a_failed_or_recent_run(tmp_path, cfg,
                                                                          monkeypatch):
    runs, release = _gate_job("code.embed", monkeypatch, pause_s=300.0, retry_failed=False)
    release.set()
    jobs = Background(log=lambda m: None)
    item = backlog_item("code", "vectors", 60, "dsh-recall index", "code.embed", hint=HINT)
    other = backlog_item("code", "vectors", 1, "x", "unknown.job")
    # Files another process is indexing: that process fills them, no job starts here.
    files = backlog_item("code", "files", 3, "dsh-recall index", "code.embed")
    assert jobs.fill([files], cfg=cfg, workspace=tmp_path) == [] and runs == []
    assert jobs.fill([item, other], cfg=cfg, workspace=tmp_path) == [item]
    jobs.wait("code.embed", tmp_path, 10)
    assert runs == [str(tmp_path)]
    # Done a moment ago: a backlog does not start it again (an explicit start does).
    assert jobs.fill([item], cfg=cfg, workspace=tmp_path) == []
    # Failed: a backlog leaves it alone.
    jobs._slot("code.embed", tmp_path).info = {"state": "failed", "finished": 0, "error": "gone"}
    assert jobs.fill([item], cfg=cfg, workspace=tmp_path) == [] and runs == [str(tmp_path)]
    assert jobs.start("code.embed", cfg=cfg, workspace=tmp_path, behind=False)
    jobs.wait("code.embed", tmp_path, 10)
    assert len(runs) == 2
    jobs.stop()


def test_a_failing_job_is_reported_not_raised(tmp_path, cfg, monkeypatch):
    def run(ctx):
        raise RuntimeError("the embedder went away")

    monkeypatch.setitem(background.JOBS, "history.embed", Job("history.embed", run, per_workspace=False))
    said: list[str] = []
    jobs = Background(log=said.append)
    assert jobs.start("history.embed", cfg=cfg, workspace=tmp_path)
    jobs.wait("history.embed", seconds=10)  # one job for every workspace
    snap = jobs.snapshot("history.embed", tmp_path / "elsewhere")
    assert snap["state"] == "failed" and snap["error"] == "the embedder went away"
    assert said == ["history.embed failed: the embedder went away"]


def test_the_mcp_server_fills_what_an_answer_names_and_says_so(tmp_path, cfg, monkeypatch):
    """A fake code answer carrying a backlog: the server starts the named job (not a
    substring of the note), and the hint becomes its own words."""
    from dsh_recall.frontends.mcp.handlers import RecallApp

    runs, release = _gate_job("code.embed", monkeypatch)
    item = backlog_item("code", "vectors", 60, "dsh-recall index", "code.embed", hint=HINT)

    class FakeCode:
        def search(self, query, **kw):
            return {"query": query, "results": [], "pending": 60, "layers": ["lexical"],
                    "returned_chars": 0, "source_chars": 0, "scope": ".", "elapsed_ms": 1.0,
                    "rerank": "off", "backlog": [item],
                    "notes": [f"60 chunks wait for vectors (found by words only meanwhile); {HINT}"]}

        def close(self):
            pass

    app = RecallApp(tmp_path, cfg)
    try:
        monkeypatch.setattr(app.default, "code", lambda: FakeCode())
        out, text = app.call("code_search", {"query": "retry"})
        assert out["notes"] == ["60 chunks wait for vectors (found by words only meanwhile); "
                                "this server is indexing them in the background (code_index "
                                "shows how far)"]
        assert "dsh-recall index" not in text
        release.set()
        app.background.wait("code.embed", tmp_path.resolve(), 10)
        assert runs == [str(tmp_path.resolve())]
        # code_index reports the same job.
        out, _ = app.call("code_index", {})
        assert out["job"]["state"] in ("running", "done")
    finally:
        release.set()
        app.close()
