"""Floor 0, imported by every other floor and importing nothing of them: :mod:`.paths` (the repository's folders,
hub ids), :mod:`.numerics` (portable CPU numerics), :mod:`.typed` (strict typed dataclasses, ``ConfigError``),
:mod:`.files` (atomic writes) and :mod:`.manifest` (commit, versions and machine of every run). Torch-free at
import."""
