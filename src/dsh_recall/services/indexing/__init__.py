"""Keeping the indexes filled: the one file sync the chunk-store indexes share, the watcher
that runs it as files change, and the background jobs that fill what an answer still owes.

filesync.py (a source's walk in, its store brought to match: unchanged files unread, changed
ones re-chunked, vanished ones forgotten), watch.py (`dsh-recall watch`, `mcp --watch`: OS
file events grouped, each affected index brought up to date), background.py (`Background`:
the jobs that fill an answer's `backlog`, one thread per job and workspace, behind the user's
work; `say`: a front end's words for what it is filling).
"""
