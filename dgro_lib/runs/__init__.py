"""Runs: one run from a config to its files (:mod:`.training`, :mod:`.launch` and its process entry point
:mod:`.train`), its inputs (:mod:`.inputs`), the run store (:mod:`.store`), the archive of finished runs
(:mod:`.archive`) and a notebook's sweep (:mod:`.experiment`). docs/architecture.md follows one run through them."""
