"""The results store: typed records, their JSON, reading and writing them, and what is derived from them.

  schema   the schema version every record carries, checked on load; record kinds; run statuses
  records  one frozen class per record kind with its JSON round trip (the fields are listed there)
  failures the failure files' classes (kind "failure", "compile_failure"), strict on load
  files    writing: atomic files, one run's directory (RunStore), merging stores
  read     reading: a store's records grouped by kind (Records), run selectors, comparison keys
  derive   labels, one-line failure reasons, repro and compile-replay commands

Layout: STORE/records/<run_id>/<name>.json, one record per file, plus run.json (kind "run")
for the run's metadata, and STORE/failures/<id>.json, replayable failure files
(harness.running.failures; typed in harness.store.failures: FailureRecord, CompileFailureRecord).
Record files by kind:

  case     <case_id>--<impl>.json                            CaseRecord
  bench    bench--<impl>--<shape>--<pass>.json               BenchRecord (harness.tpu.bench)
  compile  compile--<impl>--<topology>--<shape>--<pass>.json CompileRecord (harness.tpu.compile)
  leak     leak--<impl>--<variant>.json                      LeakRecord (harness.running.leak)

The versions and machine of a record are those of its run.json. Timings with backend
"tpu_interpret" are never compared with "tpu" ones.
"""

from harness.store.records import BenchRecord, CaseRecord, CompileRecord, LeakRecord, Record, RunRecord
from harness.store.schema import RECORD_SCHEMA, Kind, RecordError, RunStatus

__all__ = [
    "RECORD_SCHEMA",
    "BenchRecord",
    "CaseRecord",
    "CompileRecord",
    "Kind",
    "LeakRecord",
    "Record",
    "RecordError",
    "RunRecord",
    "RunStatus",
]
