"""`dsh-recall notes index | search | eval` through the click runner, JSON output."""

import json

from click.testing import CliRunner

from dsh_recall.frontends.cli import cli


def _env(tmp_path, **extra):
    env = {"DSH_RECALL_EMBEDDER__NAME": "fake"}
    env.update(extra)
    return env


def _notes(tmp_path):
    root = tmp_path / "mem"
    root.mkdir()
    (root / "public.md").write_text("# Team\n\n- standup is at 9:30\n")
    (root / "personal.md").write_text("# Me\n\n- standup excuse: dentist\n")
    return root


def run(args, env):
    r = CliRunner().invoke(cli, args, env=env, catch_exceptions=False)
    return r


def test_index_then_search_json(tmp_path):
    root = _notes(tmp_path)
    env = _env(tmp_path)
    r = run(["notes", "index", str(root), "--wait", "--json"], env)
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    assert rep["files"] == 2 and rep["indexed"] == 2
    r = run(["notes", "search", "standup", "--root", str(root), "--limit", "5", "--json"], env)
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert set(data) >= {"results", "layers"}
    assert {x["path"] for x in data["results"]} == {"public.md", "personal.md"}
    for x in data["results"]:
        assert set(x) >= {"path", "start_line", "end_line", "heading", "level", "score", "text"}


def test_search_with_session_map_filters(tmp_path):
    root = _notes(tmp_path)
    smap = tmp_path / "sessions.json"
    smap.write_text(json.dumps({"dm:boss": "u1", "dm:visitor": "u9"}))
    env = _env(tmp_path, DSH_RECALL_NOTES__SESSION_MAP=str(smap),
               DSH_RECALL_NOTES__OWNER_IDS='["u1"]')
    assert run(["notes", "index", str(root), "--wait", "--json"], env).exit_code == 0
    def paths(session):
        args = ["notes", "search", "standup", "--root", str(root), "--json"]
        if session is not None:
            args += ["--session", session]
        return {x["path"] for x in json.loads(run(args, env).output)["results"]}
    assert paths("dm:boss") == {"public.md", "personal.md"}
    assert paths("dm:visitor") == {"public.md"}
    assert paths("group:all") == {"public.md"}
    assert paths(None) == set()
    assert paths("who-knows") == set()


def test_eval_command(tmp_path):
    root = _notes(tmp_path)
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps([{"query": "dentist", "expected_file": "personal.md"},
                                 {"query": "standup time", "expected_file": "public.md"}]))
    env = _env(tmp_path)
    r = run(["notes", "eval", str(cases), "--root", str(root), "--layers", "lexical", "--json"], env)
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["cases"] == 2 and out["hit@5"] == 1.0


def test_bad_cases_file_is_a_clear_error(tmp_path):
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps([{"nothing": 1}]))
    r = CliRunner().invoke(cli, ["notes", "eval", str(cases), "--root", str(tmp_path)],
                           env=_env(tmp_path))
    assert r.exit_code == 1 and "needs a query" in r.output
