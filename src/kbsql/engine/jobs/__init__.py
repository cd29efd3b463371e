"""MindsDB's JOBS: statements run on a schedule, with `LAST` for new rows only.

`job_store` keeps jobs, their runs (`log.jobs_history`) and their LAST values in the
catalog; `schedule` reads START / END / EVERY; `last_values` rewrites `col > LAST`;
`scheduler` claims due runs in the catalog (once across servers) and runs them.
"""
