"""Spawn `dsh-recall mcp` as a subprocess, talk to it with the official MCP client, call every
tool on real data and validate each answer against the tool's declared output schema."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
from mcp import ClientSession, StdioServerParameters, stdio_client

from fixtures import DSH_SESSIONS

EXE = shutil.which("dsh-recall", path=str(Path(sys.executable).parent)) or "dsh-recall"


BILLING = '''"""Invoices."""


def compute_invoice_total(lines, tax_rate):
    """Sum line amounts and add tax."""
    subtotal = sum(l.amount for l in lines)
    return round(subtotal * (1 + tax_rate), 2)
'''


def make_world(tmp: Path, sources: bool = True, many_files: int = 0) -> dict[str, Any]:
    """A small repo, a recall home, and (with sources) history, an object and notes."""
    repo = tmp / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pyproject.toml").write_text("[project]\nname='demo'\n")
    (repo / "pkg" / "billing.py").write_text(BILLING)
    (repo / "pkg" / "server.py").write_text(
        "def handle_request(req):\n    return route(req.path)\n")
    for i in range(many_files):
        body = "\n".join(f"    step_{j} = handler_{i}(request, {j})" for j in range(30))
        (repo / "pkg" / f"mod{i}.py").write_text(f"def request_handler_{i}(request):\n{body}\n")
    _commit_all(repo)
    home = tmp / "home"
    env = {"DSH_RECALL_HOME": str(home), "DSH_RECALL_EMBEDDER__NAME": "fake",
           "PATH": os.environ.get("PATH", "")}
    world: dict[str, Any] = {"tmp": tmp, "repo": repo, "home": home, "env": env,
                             "check": lambda answers: None}
    if sources:
        _add_sources(world)
    return world


FIXTURE = DSH_SESSIONS / "sess-005-compaction.session.v4.jsonl"


def _commit_all(repo: Path) -> None:
    """The repo as a git repository of one commit (code_why answers from it)."""
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    for args in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@example.com",
                                                 "commit", "-q", "-m", "Invoices with tax"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def _add_sources(world: dict[str, Any]) -> None:
    """History (the dsh fixture session), an offloaded object and a notes folder."""
    notes = world["tmp"] / "notes"
    notes.mkdir()
    (notes / "deploy.md").write_text(
        "# Deploying\n\n## Staging\n\nWe deploy staging with `make ship-staging`; the "
        "canary waits 15 minutes before promotion.\n")
    (notes / "public.md").write_text("# Team\n\nCode review needs two approvals.\n")
    world["env"]["DSH_RECALL_NOTES__ROOTS"] = json.dumps([str(notes)])
    saved = {k: os.environ.get(k) for k in world["env"]}
    os.environ.update(world["env"])
    try:
        from dsh_recall.core.config import load_config
        from dsh_recall.services import history
        from dsh_recall.services.objects import ObjectService

        cfg = load_config(workspace=world["repo"])
        history.import_paths([str(FIXTURE)], cfg=cfg)
        world["session"] = history.search("compaction", all_sessions=True, detail=True,
                                          cfg=cfg)["hits"][0]["session"]
        log = "\n".join(f"2024-05-01 12:00:{i % 60:02d} INFO step {i} ok" for i in range(3000))
        log += "\n2024-05-01 12:59:59 FATAL disk quota exceeded on /var/cache\n"
        svc = ObjectService(cfg.objects)
        try:
            put = svc.put(log, session="s-objects", seq=1, tool="bash")
        finally:
            svc.close()
        assert put.offloaded
        world["object_id"] = put.id
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def check(answers: dict[str, Any]) -> None:
        if "history_search" in answers:
            hits = [h for _, r in answers["history_search"] for h in r.structured_content["hits"]]
            assert hits, "the imported fixture session must be found"
        if "history_detail" in answers:
            evs = answers["history_detail"][0][1].structured_content["events"]
            assert evs and all(e["text"] is not None for e in evs)
        if "object_recall" in answers:
            by_query = [r.structured_content for a, r in answers["object_recall"] if "query" in a]
            assert any("FATAL" in m["text"] for d in by_query for m in d["matches"])
            ranged = [r.structured_content for a, r in answers["object_recall"] if "query" not in a]
            assert ranged[0]["text"].startswith("2024-05-01 12:00:00 INFO step 0")
            assert ranged[0]["next_start"] == len(ranged[0]["text"])
        if "code_why" in answers:
            why = answers["code_why"][0][1].structured_content
            assert why["commit"]["summary"] == "Invoices with tax"
        if "notes_search" in answers:
            res = answers["notes_search"][0][1].structured_content["results"]
            assert res and res[0]["path"].endswith("deploy.md")
    world["check"] = check


def call_plan(world: dict[str, Any], tools: set[str]) -> list[tuple[str, dict[str, Any]]]:
    """(tool, arguments) pairs covering every listed tool on the world's data."""
    plan: list[tuple[str, dict[str, Any]]] = [
        ("code_search", {"query": "invoice total tax"}),
        ("code_search", {"query": "handle request", "limit": 1, "files": True}),
        ("code_index", {"wait_s": 30}),
        ("status", {}),
        ("configure", {}),
    ]
    if world.get("session"):
        sid = world["session"]
        plan += [
            ("history_search", {"query": "compaction summary", "scope": "all"}),
            ("configure", {"session": sid}),
            ("history_search", {"query": "read the file"}),
            ("history_search", {"query": "bash", "detail": True, "limit": 3}),
            ("history_detail", {"session": sid, "around": 5, "window": 2}),
            ("history_detail", {"page": 1}),
        ]
    if world.get("object_id"):
        plan += [
            ("object_recall", {"id": world["object_id"], "query": "FATAL disk"}),
            ("object_recall", {"id": world["object_id"]}),
            ("object_recall", {"id": world["object_id"], "start": 100, "count": 500}),
        ]
    plan += [("code_why", {"path": "pkg/billing.py", "line": 4}),
             ("notes_search", {"query": "how do we deploy staging"}),
             ("search_all", {"query": "deploy staging invoice total"}),
             ("configure", {"session": "s-1"})]
    return [(n, a) for n, a in plan if n in tools] + world.get("extra_plan", [])


def _walk_schema(schema: Any, path: str = "$") -> list[str]:
    """Problems with a schema against our rules: no $ref, closed result objects."""
    bad: list[str] = []
    if isinstance(schema, dict):
        if "$ref" in schema or "$defs" in schema:
            bad.append(f"{path}: uses $ref/$defs")
        if schema.get("type") == "object" and "properties" in schema \
                and schema.get("additionalProperties") is not False:
            bad.append(f"{path}: object without additionalProperties false")
        for k, v in schema.items():
            bad += _walk_schema(v, f"{path}.{k}")
    elif isinstance(schema, list):
        for i, v in enumerate(schema):
            bad += _walk_schema(v, f"{path}[{i}]")
    return bad


async def _session_run(world: dict[str, Any], body) -> Any:
    params = StdioServerParameters(command=EXE, args=["mcp"], env=world["env"],
                                   cwd=str(world["repo"]))
    with open(world["tmp"] / "server.stderr", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await body(session)


def test_every_tool_answers_within_its_schema(tmp_path: Path) -> None:
    world = make_world(tmp_path)

    async def body(session: ClientSession) -> dict[str, Any]:
        listed = (await session.list_tools()).tools
        by_name = {t.name: t for t in listed}
        answers: dict[str, Any] = {}
        for name, args in call_plan(world, set(by_name)):
            res = await session.call_tool(name, args)
            assert not res.is_error, (name, res.content)
            answers.setdefault(name, []).append((args, res))
        return {"tools": by_name, "answers": answers}

    out = asyncio.run(_session_run(world, body))
    tools, answers = out["tools"], out["answers"]
    assert {"code_search", "code_index", "status", "configure", "history_search",
            "history_detail", "object_recall", "notes_search"} <= set(tools)
    assert set(answers) == set(tools), "every listed tool must be exercised"
    budget = 6000
    for name, tool in tools.items():
        assert tool.description and len(tool.description) > 60
        assert tool.input_schema["type"] == "object"
        assert _walk_schema(tool.output_schema) == [], name
        assert "$ref" not in json.dumps(tool.input_schema)
        for _args, res in answers[name]:
            jsonschema.validate(res.structured_content, tool.output_schema)
            text = res.content[0].text
            assert text.strip()
            # Both forms together stay under the default token budget.
            from dsh_recall.core.text import estimate_tokens
            size = estimate_tokens(text) + estimate_tokens(json.dumps(res.structured_content,
                                                                       ensure_ascii=False))
            assert size < budget, (name, size)
    # The search found the function that lives in the small repo.
    hit = answers["code_search"][0][1].structured_content
    assert hit["results"] and hit["results"][0]["path"] == "pkg/billing.py"
    assert "compute_invoice_total" in hit["results"][0]["excerpt"]
    job = answers["code_index"][0][1].structured_content["job"]
    assert job["state"] == "done" and job["report"]["files"] >= 3
    world["check"](answers)


def test_tool_errors_come_back_as_results(tmp_path: Path) -> None:
    world = make_world(tmp_path, sources=False)

    async def body(session: ClientSession):
        empty = await session.call_tool("code_search", {"query": "   "})
        bad_cursor = await session.call_tool("code_search", {"query": "invoice", "cursor": "zz"})
        ok = await session.call_tool("status", {})
        return empty, bad_cursor, ok

    empty, bad_cursor, ok = asyncio.run(_session_run(world, body))
    assert empty.is_error and "query is empty" in empty.content[0].text
    assert bad_cursor.is_error and "cursor" in bad_cursor.content[0].text
    assert not ok.is_error  # the server survived both


def test_code_search_paginates_under_a_small_budget(tmp_path: Path) -> None:
    world = make_world(tmp_path, sources=False, many_files=40)

    async def body(session: ClientSession):
        await session.call_tool("configure", {"token_budget": 600})
        pages, cursor = [], None
        for _ in range(20):
            args = {"query": "handler request", "limit": 12}
            if cursor:
                args["cursor"] = cursor
            res = await session.call_tool("code_search", args)
            assert not res.is_error, res.content
            pages.append(res.structured_content)
            cursor = res.structured_content.get("next_cursor")
            if not cursor:
                break
        return pages

    pages = asyncio.run(_session_run(world, body))
    assert len(pages) > 1, "a 600-token budget cannot hold 12 excerpts in one answer"
    seen = [(r["path"], r["start_line"]) for p in pages for r in p["results"]]
    assert len(seen) == len(set(seen)), "pages must not repeat results"
    assert len(seen) >= 12


def _recalls(world: dict[str, Any]) -> int:
    """The object store's recall counter, read in this process with the world's home."""
    from dsh_recall.core.config import ObjectsConfig
    from dsh_recall.services.objects import ObjectService

    svc = ObjectService(ObjectsConfig(), path=world["home"] / "objects.sqlite")
    try:
        return svc.stats()["recalls"]
    finally:
        svc.close()


def test_object_recall_counts_one_recall_per_call(tmp_path: Path) -> None:
    world = make_world(tmp_path, sources=False)
    from dsh_recall.core.config import ObjectsConfig
    from dsh_recall.services.objects import ObjectService

    log = "\n".join(f"line {i} INFO ok" for i in range(4000)) + "\nFATAL disk quota\n"
    svc = ObjectService(ObjectsConfig(), path=world["home"] / "objects.sqlite")
    try:
        obj_id = svc.put(log, session="s", seq=1, tool="bash").id
    finally:
        svc.close()
    assert obj_id and _recalls(world) == 0

    async def body(session: ClientSession):
        found = await session.call_tool("object_recall", {"id": obj_id, "query": "FATAL"})
        after_search = _recalls(world)
        ranged = await session.call_tool("object_recall", {"id": obj_id, "start": 0,
                                                           "count": 100})
        return found, after_search, ranged, _recalls(world)

    found, after_search, ranged, after_range = asyncio.run(_session_run(world, body))
    assert not found.is_error and found.structured_content["total"] == len(log)
    assert after_search == 1, "a search must count one recall, not one more for its size"
    assert not ranged.is_error and after_range == 2
