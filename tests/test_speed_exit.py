"""A search whose vector layer missed the deadline must not keep the process alive: the
answer is already printed, so waiting for the dropped worker thread only costs the user."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from procs import env_for

# A registered "slow" embedder that writes `marker` only if it ever runs to its end.
SLOW = textwrap.dedent('''
    import json, sys, time
    from pathlib import Path
    from dsh_recall.embedders import registry
    from dsh_recall.embedders.fake import FakeEmbedder

    marker = Path(sys.argv[MARKER_ARG])

    class Slow(FakeEmbedder):
        name = "slow"

        def _embed_batch(self, texts, *, query):
            time.sleep(20)
            marker.write_text("the dropped worker ran to its end")
            return super()._embed_batch(texts, query=query)

    registry.register("slow", lambda cfg: Slow())
''')

SCRIPT = SLOW.replace("MARKER_ARG", "2") + textwrap.dedent('''
    from dsh_recall.core.config import load_config
    from dsh_recall.services.code import CodeService

    ws = Path(sys.argv[1])
    cfg = load_config(workspace=ws, overrides={"embedder": {"name": "slow"},
                                               "search_deadline_s": 0.3, "embed_budget_s": 0})
    out = CodeService(ws, cfg).search("hash_password")
    print(json.dumps({"layers": out["layers"], "notes": out["notes"]}))
''')


def test_process_exits_without_waiting_for_a_dropped_vector_worker(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "auth.py").write_text("def hash_password(p):\n    return p\n")
    marker = tmp_path / "finished"
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(ws), str(marker)],
                          env=env_for(tmp_path / "home"), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["layers"] == ["lexical"]
    assert any("deadline" in n for n in out["notes"])
    # The worker sleeps 20 s before writing the marker; a process that waited for it at
    # exit would have let it finish.
    assert not marker.exists()


CLI_SCRIPT = SLOW.replace("MARKER_ARG", "1") + textwrap.dedent('''
    import atexit
    atexit.register(lambda: marker.with_name("finalized").write_text("interpreter finalized"))
    from dsh_recall.frontends.cli import main
    sys.argv = ["dsh-recall"] + sys.argv[2:]
    main()
''')


def test_the_cli_leaves_without_finalizing_under_a_dropped_vector_worker(tmp_path):
    """A dropped worker may be inside native code (onnxruntime): finalizing the interpreter
    under it aborted the process after the answer was printed. The CLI prints its answer,
    flushes, and leaves with the command's status instead."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "auth.py").write_text("def hash_password(p):\n    return p\n")
    marker = tmp_path / "finished"
    env = {**env_for(tmp_path / "home"), "DSH_RECALL_EMBEDDER__NAME": "slow",
           "DSH_RECALL_SEARCH_DEADLINE_S": "0.3", "DSH_RECALL_EMBED_BUDGET_S": "0"}
    proc = subprocess.run([sys.executable, "-c", CLI_SCRIPT, str(marker), "search", "--json",
                           "--workspace", str(ws), "hash_password"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["layers"] == ["lexical"] and out["results"][0]["path"] == "auth.py"
    assert not marker.exists()
    assert not (tmp_path / "finalized").exists()  # left at once, without finalizing
