"""The local Postgres's logins: trust for everyone, and one role that must give a password.

Why trust is the default: the stack is a development database listening on 127.0.0.1 only (and a
socket in its state dir), torn down and re-made at will; a password there would protect nothing from
the only user who can reach it, and every test and demo would have to carry one. What trust cannot
test is a refused login, so the stack also keeps one secured role:
- `toolkit_secure` (LOGIN REPLICATION, owns nothing), whose password is random, drawn once and kept in
  `<state>/postgres-secure.password` (owner-only, mode 0600);
- pg_hba rules before the trust rules make it log in with `scram-sha-256` — over TCP and over the
  socket, for databases and for replication — so a wrong or missing password is refused;
- `PG_SECURE_DSN` in `<state>/env` is its DSN (the password in it: never print it unmasked).

`ensure` puts the rules and the role in place through the trusted superuser login whenever the
secured login fails (a fresh stack, or one made before the role existed), so `devstack up` on a
running stack adds them without a restart; it is idempotent and resets the role's password to the
state's. Assumptions: this process may write the server's `hba_file` (it is the server's owner, or
root), and the superuser DSN is trusted.
"""

from __future__ import annotations

import logging
import secrets
import time
from pathlib import Path

import psycopg
from psycopg import sql

from devstack import probes

log = logging.getLogger(__name__)

ROLE = "toolkit_secure"
SECURE_DSN_ENV = "PG_SECURE_DSN"
MARKER = f"# devstack: {ROLE} logs in with a password"
HBA_RULES = (
    MARKER + " (scram-sha-256); every other login is trusted (127.0.0.1 and the socket only)",
    f"local   all             {ROLE}                                  scram-sha-256",
    f"host    all             {ROLE}  127.0.0.1/32            scram-sha-256",
    f"host    all             {ROLE}  ::1/128                 scram-sha-256",
    f"local   replication     {ROLE}                                  scram-sha-256",
    f"host    replication     {ROLE}  127.0.0.1/32            scram-sha-256",
    f"host    replication     {ROLE}  ::1/128                 scram-sha-256",
)


def password_file(state: Path) -> Path:
    return state / "postgres-secure.password"


def password(state: Path) -> str:
    """The secured role's password, drawn (and written, owner-only) the first time it is asked for."""
    path = password_file(state)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)  # created owner-only before the secret is in it
        path.write_text(secrets.token_urlsafe(18))  # URL-safe: goes into the DSN unescaped
    return path.read_text().strip()


def secure_dsn(port: int, state: Path) -> str:
    return f"postgresql://{ROLE}:{password(state)}@127.0.0.1:{port}/postgres"


def with_rules(hba: str) -> str:
    """`hba` (a pg_hba.conf) with the secured role's rules before its first rule (pure); unchanged when
    they are there. Postgres takes the first rule that matches, so before the trust rules they win."""
    if MARKER in hba:
        return hba
    lines = hba.splitlines()
    first = next(
        (i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#")),
        len(lines),
    )
    return "\n".join([*lines[:first], *HBA_RULES, "", *lines[first:]]) + "\n"


def ensure(superuser_dsn: str, state: Path) -> None:
    """The rules in the server's pg_hba.conf (then reloaded) and the role with the state's password,
    through the trusted superuser login."""
    with psycopg.connect(superuser_dsn, autocommit=True, connect_timeout=5) as conn:
        hba_file = Path(str(conn.execute("show hba_file").fetchone()[0]))  # type: ignore[index]
        current = hba_file.read_text()
        if with_rules(current) != current:
            hba_file.write_text(with_rules(current))  # in place: the owner (postgres) stays
            conn.execute("select pg_reload_conf()")
        exists = conn.execute("select 1 from pg_roles where rolname = %s", (ROLE,)).fetchone()
        verb = "ALTER" if exists else "CREATE"
        conn.execute("SET password_encryption = 'scram-sha-256'")  # the verifier pg_hba asks for
        conn.execute(
            sql.SQL("{} ROLE {} LOGIN REPLICATION PASSWORD {}").format(
                sql.SQL(verb), sql.Identifier(ROLE), sql.Literal(password(state))
            )
        )
    log.info("Postgres role %r set (password login, scram-sha-256)", ROLE)


def ready(superuser_dsn: str, port: int, state: Path, settle_s: float = 5.0) -> bool:
    """The secured role logs in with the state's password. A refused login has the rules and the role
    put in place and is tried again while the reload settles (it is asynchronous), so one probe of a
    server that predates the role answers True (a False would have `up` restart a healthy server)."""
    dsn = secure_dsn(port, state)
    if probes.postgres(dsn):
        return True
    try:
        ensure(superuser_dsn, state)
    except psycopg.Error as exc:  # the server still booting: the next probe tries again
        log.debug("setting the Postgres role %s failed (%s); trying again", ROLE, exc)
        return False
    deadline = time.monotonic() + settle_s
    while not probes.postgres(dsn):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True
