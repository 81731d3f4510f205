"""Which cases a shard of a run owns, and its share of the run's cases (harness.running.jobs)."""

from __future__ import annotations

import dataclasses

from harness.core import pool
from harness.core.case import Case


@dataclasses.dataclass(frozen=True)
class Shard:
    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """ "I/N" with 0 <= I < N; a ValueError that says so otherwise."""
        index, sep, count = text.partition("/")
        try:
            shard = cls(int(index), int(count))
        except ValueError:
            raise ValueError(f"--shard={text!r} must be I/N, e.g. 0/4 (shard 0 of 4)") from None
        if not sep or shard.count < 1 or not 0 <= shard.index < shard.count:
            raise ValueError(f"--shard={text!r} must be I/N with 0 <= I < N, e.g. 0/4")
        return shard

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def owns(self, case: Case) -> bool:
        """Whether `case` is this shard's: its program's case id (harness.core.pool.program_key)
        modulo the number of shards, so that each compiled program is compiled by one shard only."""
        return self.count == 1 or int(pool.program_key(case).case_id, 16) % self.count == self.index

    def examples(self, total: int) -> int:
        """This shard's share of `total` cases (the first total % N shards take one more); at least 1."""
        return max(total // self.count + (self.index < total % self.count), 1)
