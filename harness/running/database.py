"""Where a run's Hypothesis example database lives: `run --database URL` (or $ATTN_HARNESS_DATABASE).

    DIR                       a directory (default: the store's .hypothesis)
    redis://HOST:PORT/N       a Redis server the runners of a fleet share (the `fleet` extra: redis)
    github://OWNER/REPO[/A]   the examples CI uploaded as artifact A (default hypothesis-example-db), read-only

Each is Hypothesis's own backend. A shared one is always paired with the local directory: every example is
saved there too, and examples are read from both. A Redis server that cannot be reached (at the start or
mid-run) costs one warning line; the run goes on with the directory alone and loses nothing it found.
Keys are Hypothesis's digest of the search's test function and the kernel's name (harness.running.search):
the same on every runner, never a path or a host name.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TextIO

from hypothesis.database import (
    DirectoryBasedExampleDatabase,
    ExampleDatabase,
    GitHubArtifactDatabase,
    MultiplexedDatabase,
    ReadOnlyDatabase,
)

DATABASE_ENV = "ATTN_HARNESS_DATABASE"
FORMS = "a directory, redis://HOST:PORT/N or github://OWNER/REPO[/ARTIFACT]"
REDIS_PORT = 6379
# GitHubArtifactDatabase's own default: the artifact Hypothesis's CI recipe uploads.
GITHUB_ARTIFACT = "hypothesis-example-db"
# A server that hangs fails a call after this long (then the run degrades to the directory).
REDIS_TIMEOUT_S = 5.0


@dataclasses.dataclass(frozen=True, kw_only=True)
class Redis:
    """A Redis server's database N, shared by a fleet's runners."""

    host: str
    port: int = REDIS_PORT
    db: int = 0

    def __str__(self) -> str:
        return f"redis://{self.host}:{self.port}/{self.db}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class GitHub:
    """A GitHub Actions artifact of examples, read-only (GITHUB_TOKEN, if set, lifts the rate limit)."""

    owner: str
    repo: str
    artifact: str = GITHUB_ARTIFACT

    def __str__(self) -> str:
        return f"github://{self.owner}/{self.repo}/{self.artifact}"


Shared = Redis | GitHub


def parse(text: str) -> Path | Shared:
    """A --database value: a directory's Path, or a shared database. ValueError names the fix."""
    scheme, sep, rest = text.partition("://")
    if not sep:
        if not text:
            raise ValueError(f"--database is empty; give {FORMS}")
        return Path(text)
    if scheme == "redis":
        return _redis(text, rest)
    if scheme == "github":
        return _github(text, rest)
    raise ValueError(f"--database={text!r}: unknown scheme {scheme!r}; give {FORMS}")


def _redis(text: str, rest: str) -> Redis:
    address, _, db = rest.partition("/")
    host, colon, port = address.rpartition(":")
    if not colon:
        host, port = address, str(REDIS_PORT)
    if not host or not port.isdigit() or not (db or "0").isdigit():
        raise ValueError(f"--database={text!r} must read redis://HOST:PORT/N (PORT and N numbers)")
    try:
        import redis  # noqa: F401
    except ImportError:
        raise ValueError(
            f"--database={text!r} needs the redis package: pip install 'attention-harness[fleet]'"
        ) from None
    return Redis(host=host, port=int(port), db=int(db or 0))


def _github(text: str, rest: str) -> GitHub:
    parts = rest.split("/")
    if len(parts) not in (2, 3) or not all(parts):
        raise ValueError(f"--database={text!r} must read github://OWNER/REPO or github://OWNER/REPO/ARTIFACT")
    return GitHub(owner=parts[0], repo=parts[1], artifact=parts[2] if len(parts) == 3 else GITHUB_ARTIFACT)


def problem(text: str | None) -> str | None:
    """What is wrong with a --database value, said as the fix; None when it is fine (or not given)."""
    if text is None:
        return None
    try:
        parse(text)
    except ValueError as e:
        return str(e)
    return None


@functools.cache
def open_database(local: Path, shared: Shared | None = None) -> ExampleDatabase:
    """The example database of `local` (a directory) and `shared`: one per process, so a server that went
    away warns once for the whole run."""
    directory = DirectoryBasedExampleDatabase(str(local))
    if isinstance(shared, GitHub):
        artifact = GitHubArtifactDatabase(shared.owner, shared.repo, artifact_name=shared.artifact)
        return MultiplexedDatabase(directory, ReadOnlyDatabase(artifact))
    if isinstance(shared, Redis):
        import redis
        from hypothesis.extra.redis import RedisExampleDatabase

        client = redis.Redis(
            host=shared.host,
            port=shared.port,
            db=shared.db,
            socket_timeout=REDIS_TIMEOUT_S,
            socket_connect_timeout=REDIS_TIMEOUT_S,
        )
        errors = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError)
        return Degrading(RedisExampleDatabase(client), directory, names=(str(shared), str(local)), errors=errors)
    return directory


class Degrading(ExampleDatabase):
    """A shared database paired with a local one, that drops the shared one at its first error.

    Every example is saved locally first, so nothing is lost when the shared one goes; examples are read
    from the shared one (a fleet's failures) and then the local one. On the first of `errors`, one warning
    line goes to `warn`, and from then on the local database alone is used.
    """

    def __init__(
        self,
        shared: ExampleDatabase,
        local: ExampleDatabase,
        *,
        names: tuple[str, str],  # the shared database's and the local one's, as the warning names them
        errors: tuple[type[BaseException], ...] = (OSError,),
        warn: Callable[[], TextIO] = lambda: sys.stderr,
    ) -> None:
        super().__init__()
        self.shared: ExampleDatabase | None = shared
        self.local = local
        self.names = names
        self.errors = errors
        self.warn = warn

    def _on_shared(self, call: Callable[[ExampleDatabase], object]) -> object:
        """`call` on the shared database, if it is still there; None after an error (warned, once)."""
        if self.shared is None:
            return None
        try:
            return call(self.shared)
        except self.errors as e:
            self.shared = None
            message = str(e).splitlines()[0] if str(e) else type(e).__name__
            shared, local = self.names
            print(
                f"warning: example database {shared} unreachable ({message}); "
                f"examples are saved in {local} alone from now on",
                file=self.warn(),
                flush=True,
            )
            return None

    def fetch(self, key: bytes) -> Iterable[bytes]:
        seen = set()
        for value in self._on_shared(lambda db: list(db.fetch(key))) or ():
            seen.add(value)
            yield value
        for value in self.local.fetch(key):
            if value not in seen:
                yield value

    def save(self, key: bytes, value: bytes) -> None:
        self.local.save(key, value)
        self._on_shared(lambda db: db.save(key, value))

    def delete(self, key: bytes, value: bytes) -> None:
        self.local.delete(key, value)
        self._on_shared(lambda db: db.delete(key, value))

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self.local.move(src, dest, value)
        self._on_shared(lambda db: db.move(src, dest, value))

    def __repr__(self) -> str:
        return f"Degrading({self.shared!r}, {self.local!r}, names={self.names!r})"
