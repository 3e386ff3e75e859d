"""Runs: one run from a config to its files (:mod:`.training`, :mod:`.launch` and the entry point of each of a run's
processes, :mod:`.process_main`), where its model and data come from (:mod:`.data_sources`), the run store
(:mod:`.store`), the archive of finished runs (:mod:`.archive`) and a notebook's sweep (:mod:`.experiment`).
docs/architecture.md follows one run through them."""
