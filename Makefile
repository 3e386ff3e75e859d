# Two commands matter: `make reproduce` and `make test`. Everything else is plumbing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PROFILE ?= cpu
ONLY ?=
RETRAIN ?=
PRESET ?=
STAMP := $(VENV)/.installed

.PHONY: venv reproduce base results split-half dry-run test test-unit test-notebooks bench clean-outputs

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch first and pinned: this exact version is served from local disk (CPU build); any other spec downloads GBs.
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[notebooks,math,dev]'
	# deepspeed builds against the torch above (no isolated build env, which would fetch a CUDA torch); its ops are
	# compiled at first use. The ZeRO-3 two-process test runs it on DeepSpeed's CPU accelerator.
	DS_BUILD_OPS=0 $(PY) -m pip install --quiet --no-build-isolation 'deepspeed==0.19.8'
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

# Restores every archived run whose identity matches (a fresh clone: minutes); RETRAIN=1 trains every run here.
reproduce: $(STAMP)
	$(PY) -m dgro_lib.reproduce --profile $(PROFILE) $(if $(ONLY),--only $(ONLY),) $(if $(RETRAIN),--retrain,)

# Rebuilds an embedded base from its recipe and compares it with reference/bases/$(PRESET)/ bit for bit.
base: $(STAMP)
	@test -n "$(PRESET)" || (echo "usage: make base PRESET=mini" >&2; exit 2)
	OMP_NUM_THREADS=1 $(PY) -m dgro_lib.rebuild_base $(PRESET)

# Writes the README's claims table and every results table of docs/results.md from reference/$(PROFILE)/*/claims.csv (a test checks they are current).
results: $(STAMP)
	$(PY) -m dgro_lib.results --profile $(PROFILE)

# Claims on the first half of SEEDS against the second half: consistent, or exit 1 (trains nothing).
split-half: $(STAMP)
	@test -n "$(NB)" -a -n "$(SEEDS)" || (echo "usage: make split-half NB=dgro_fig1_reward_variance SEEDS=0,1,2,3" >&2; exit 2)
	OMP_NUM_THREADS=1 $(PY) -m dgro_lib.split_half $(NB) --seeds $(SEEDS) --profile $(PROFILE)

dry-run: $(STAMP)
	$(PY) -m dgro_lib.reproduce --profile paper --dry-run

test: test-unit test-notebooks

test-unit: $(STAMP)
	TRL_EXPERIMENTAL_SILENCE=1 OMP_NUM_THREADS=1 $(PY) -m pytest tests -q

test-notebooks: $(STAMP)
	rm -rf outputs/ci  # the ci profile's outputs are throwaway; a fresh run exercises training, not the resume cache
	TRL_EXPERIMENTAL_SILENCE=1 OMP_NUM_THREADS=1 DGRO_PROFILE=ci $(PY) -m pytest --nbval-lax notebooks -q -p no:cacheprovider

bench: $(STAMP)
	$(PY) bench/trainer_overhead.py

clean-outputs:
	rm -rf outputs/ci outputs/cpu
