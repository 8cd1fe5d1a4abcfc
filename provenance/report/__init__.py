"""Reports from THUNDER_TRACE logs (`thunder-trace report`): read -> model -> render, in one pass.

- read: reader.py (records, tolerant of bad lines), logs.py (the run's log files, their labels),
  provinfo.py (a log's provenance records as the pages show them), profiles.py (profile records,
  read ahead of the pass: they follow their compile's end).
- model: build.py (build_report, the whole pipeline), run.py (record dispatch over the logs, the
  run's model), compiles.py (one compile's records -> its pages' models), diffs.py, source_view.py,
  ranks.py, call_sites.py, timing.py (where profiled calls' time went); model.py holds the
  dataclasses every template reads.
- render: pages.py (the registry of the run's pages), output.py (the output directory, a compile's
  pages), html.py (jinja2 and the fragments built in Python), directory.py
  (compile_directory.json), perfetto.py, highlight.py, templates/.
"""
