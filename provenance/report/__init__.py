"""Reports from THUNDER_TRACE logs (`thunder-trace report`): one pass, in folders that are its
pipeline (docs/report.md lists every module):

- read/: the log files, records one at a time, checked against provenance.log.events; records read
  ahead of the pass (profiles).
- analyze/: one handler per event type (handlers.py) hands each record to the run (run.py) or
  its compile (compile.py); the analyses: diffs, recompiles, phases, source view, ranks,
  call sites, ThunderFX graphs, time.
- model/: the dataclasses the pages are made from (imports nothing of the report).
- render/: pages, HTML, trace data for the pages' script, Perfetto, compile_directory.json,
  templates.

cli.py is the command's options (the work of each imported when it runs: report_command.py), build.py
the pipeline (build_report), jobs.py how many processes, workers.py the forked workers that read the logs too.
"""
