"""`run --jobs N` and `run --shard I/N`: one module per job.

  shard      Shard: which cases a shard of a run owns (its programs' ids modulo N) and its share of --examples
  processes  the worker processes of `run --jobs`: started, each into its log, stops forwarded, exit statuses combined
  stream     the workers' lines as the parent shows them: one numbering of the cases, one summary, a status line
  stores     what the workers wrote into the one store: their run.json files and case records
  summaries  the workers' summary rows merged into one row per kernel
  same_bug   one bug found by several shards, filed once (failures/same-bug/)

A shard is a search of its own over the cases whose program's id (the case with the values a
compiled program takes as data fixed, harness.core.pool.program_key), read as a number, is I modulo N:
the same draw as the whole run (same profile, same seed), with every case of another shard
filtered out, so shards are disjoint and the same every time. It checks its share of
`--examples` (the total over all shards), its smoke cases among them. Shards of one run
write into one store, each as a run directory of its own; `--jobs N` starts them as worker
processes on this machine and merges their summaries; CI starts them as jobs on several
machines and merges their stores (`harness merge`, .github/workflows/shards.yml).
"""
