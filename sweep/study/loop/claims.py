"""Who is evaluating what right now, across workers: leases in the study's own database.

Two workers asking at the same moment may be handed the same configuration, and both would see
"not measured yet". Before launching, a worker therefore claims the candidate's key (or the
baseline's) in a table next to Optuna's, with a primary key on (study, key): one INSERT wins,
the others wait for its result. A claim is a lease: its holder extends it every heartbeat and
deletes it when the trial has been told to Optuna, so a worker that died leaves a claim that
expires after the grace period (at once when it ran on this host and its pid is gone), and
another worker takes it over with a compare-and-swap UPDATE. No coordinator process: the
database's unique constraint decides.
"""

from __future__ import annotations

import logging
import socket
import threading
import time

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

from harness.server.procs import pid_alive

log = logging.getLogger(__name__)
_metadata = sa.MetaData()
claims_table = sa.Table(
    "specsweep_claims",
    _metadata,
    sa.Column("study", sa.String(512), primary_key=True),
    sa.Column("key", sa.String(256), primary_key=True),
    sa.Column("owner", sa.String(256), nullable=False),
    sa.Column("trial", sa.Integer, nullable=True),
    sa.Column("expires_at", sa.Float, nullable=False),
)


class Claims:
    def __init__(self, url: str, study: str, owner: str, lease_s: float):
        self.engine = sa.create_engine(url, pool_pre_ping=True)
        self.study = study
        self.owner = owner
        self.lease_s = lease_s
        self._held: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        for attempt in range(5):  # workers starting together race to create the table
            try:
                _metadata.create_all(self.engine, checkfirst=True)
                break
            except (IntegrityError, OperationalError, ProgrammingError):
                if attempt == 4:
                    raise
                time.sleep(0.2 * (attempt + 1))

    # -- the lease ---------------------------------------------------------------------------
    def _where(self, key: str):
        t = claims_table.c
        return sa.and_(t.study == self.study, t.key == key)

    def try_claim(self, key: str, trial: int | None = None) -> bool:
        """True when this worker now holds `key` (new, or taken over from an expired lease)."""
        now = time.time()
        row = {"owner": self.owner, "trial": trial, "expires_at": now + self.lease_s}
        try:
            with self.engine.begin() as conn:
                conn.execute(claims_table.insert().values(study=self.study, key=key, **row))
        except IntegrityError:
            holder = self.holder(key) or {}
            # A holder on this host whose process is gone (a SIGKILLed sweep) is dead now, not
            # only once its lease runs out.
            dead = _dead_local(str(holder.get("owner", "")))
            with self.engine.begin() as conn:
                stale = claims_table.c.expires_at < now
                if dead:
                    stale = sa.or_(stale, claims_table.c.owner == holder["owner"])
                taken = conn.execute(
                    claims_table.update().where(self._where(key), stale).values(**row)
                ).rowcount
            if taken != 1:
                return False
            log.warning("took over the expired claim on %s (its worker stopped)", key)
        with self._lock:
            self._held.add(key)
        return True

    def holder(self, key: str) -> dict | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(claims_table).where(self._where(key))).mappings().first()
        return dict(row) if row else None

    def release(self, key: str) -> None:
        with self._lock:
            self._held.discard(key)
        with self.engine.begin() as conn:
            conn.execute(
                claims_table.delete().where(self._where(key), claims_table.c.owner == self.owner)
            )

    def refresh(self) -> None:
        """Extend every lease this worker holds."""
        with self._lock:
            keys = list(self._held)
        if not keys:
            return
        t = claims_table.c
        with self.engine.begin() as conn:
            conn.execute(
                claims_table.update()
                .where(t.study == self.study, t.owner == self.owner, t.key.in_(keys))
                .values(expires_at=time.time() + self.lease_s)
            )

    # -- keeping leases alive ----------------------------------------------------------------
    def start(self, interval_s: float) -> None:
        def beat() -> None:
            while not self._stop.wait(interval_s):
                try:
                    self.refresh()
                except Exception as exc:  # a blip must not end the thread; the next beat retries
                    log.warning("could not extend claims: %s", exc)

        self._thread = threading.Thread(target=beat, name="specsweep-claims", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with self._lock:
            keys = list(self._held)
        for key in keys:
            self.release(key)
        self.engine.dispose()


def _dead_local(owner: str) -> bool:
    host, _, pid = owner.rpartition(":")
    return host == socket.gethostname() and pid.isdigit() and not pid_alive(int(pid))
