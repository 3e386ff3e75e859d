"""The commands, each ``python -m dgro_lib.cli.<name>`` behind a make target: :mod:`.reproduce`, :mod:`.estimate`,
:mod:`.dryrun`, :mod:`.preflight`, :mod:`.rebuild_base`, :mod:`.results`, :mod:`.split_half`. Nothing imports
them."""
