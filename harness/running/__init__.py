"""Running implementations on cases: one execution, the runner, the worker, the search, failure files."""
