"""Each notebook's claims, one module per notebook and named like it (``dgro_lib.papers.dgro_fig2_beta`` for
``notebooks/dgro_fig2_beta.ipynb``, ``params/*/dgro_fig2_beta.yaml`` and ``reference/*/dgro_fig2_beta/``): what the
paper says, as comparisons with a direction, judged by :mod:`dgro_lib.report`. :mod:`.common` builds the rows."""
