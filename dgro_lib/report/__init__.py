"""What a notebook reports: run-level inference (:mod:`.inference`), the one verdict rule (:mod:`.verdict`) and the
claims file every notebook writes and ``make reproduce`` compares (:mod:`.claims`). No torch in this package."""
