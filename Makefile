# placegym: `make demo` and `make test` are all a new user needs.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# torch is pinned in the same pip command as everything else, so pip takes the local CPU
# wheel instead of resolving a multi-GB CUDA build; pyproject.toml itself asks for torch>=2.4.
TORCH  ?= torch==2.13.0

export WANDB_MODE ?= offline
export MPLBACKEND ?= Agg

.PHONY: install demo test test-all bench calibrate-check gpu-check wheelhouse lint typecheck \
	format clean docs

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,pettingzoo,ray,docs]' '$(TORCH)'
	@# compile the simulator's numba kernels once into their on-disk cache
	$(PY) -c 'from placegym.envs.sim.simulator import warmup; warmup()'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/placegym demo --out demo-out
	@# train the quickstart agent (resumes when run again; once finished, prints its results)
	$(VENV)/bin/placegym train configs/quickstart.yaml out=demo-out/quickstart
	@# the agent (greedy and best of 16 samples) next to every teacher and baseline
	$(VENV)/bin/placegym bench --workloads ffnn \
		--agents demo-out/quickstart/checkpoints/final.pt --agent-k 16 --out demo-out/bench

test: $(STAMP)
	WANDB_MODE=disabled $(PY) -m pytest -q

test-all: $(STAMP)
	WANDB_MODE=disabled $(PY) -m pytest -q -m "not gpu"

bench: $(STAMP)
	WANDB_MODE=disabled $(PY) -m pytest -q -s -m benchmark tests/benchmarks

# The simulator against measured CPU makespans (placegym calibrate --devices cpu#2 --profile
# --check: Spearman >= 0.95, median relative error <= 10%), about 1.5 minutes on an idle
# 2-core machine; skipped, naming its figures, when the machine is busy. Not in `make test`:
# its outcome depends on the machine's load.
calibrate-check: $(STAMP)
	WANDB_MODE=disabled $(PY) -m pytest -q -s -m slow \
		tests/test_backend.py::test_profiled_calibration_predicts_cpu_makespans

# On a machine with a CUDA GPU (at most 5 minutes on one H200), with the interpreter that
# has the machine's CUDA torch (GPU_PYTHON) and no network: placegym itself is installed
# into it without dependencies, whatever else is missing comes from WHEELHOUSE (made by
# `make wheelhouse` on a networked machine). Checks correctness against the CPU, profiled
# calibration of cuda:0, the cuda:0 + cpu#2 rank check and a few phase III updates;
# the report goes to runs/gpu-check. Never part of `make test`.
# GPU_CHECK_ARGS=--dry-run runs the same on CPU workers (any machine).
GPU_PYTHON ?= python3
WHEELHOUSE ?= wheelhouse
GPU_CHECK_ARGS ?=
gpu-check:
	$(GPU_PYTHON) -c 'import placegym.train.machine.gpu_check' 2>/dev/null || \
		$(GPU_PYTHON) -m pip install --no-index --find-links $(WHEELHOUSE) --no-deps -e .
	$(GPU_PYTHON) -m placegym.train.machine.gpu_check --wheelhouse $(WHEELHOUSE) --out runs/gpu-check \
		$(GPU_CHECK_ARGS)

# Wheels of everything placegym needs besides torch, for a GPU machine without network:
# run here (networked, after `make install`), copy the folder along with the checkout.
# The platforms are the manylinux tags a glibc >= 2.28 machine runs (that of torch's own
# CUDA wheels); pip does not expand such tags by itself.
WHEEL_PYTHON    ?= 3.12
WHEEL_ARCH      ?= x86_64
WHEEL_PLATFORMS ?= manylinux_2_28 manylinux_2_27 manylinux_2_26 manylinux_2_24 manylinux_2_17 \
	manylinux2014 manylinux_2_12 manylinux2010 manylinux_2_5 manylinux1
wheelhouse: $(STAMP)
	mkdir -p $(WHEELHOUSE)
	$(PY) -m placegym.train.machine.wheelhouse $(WHEEL_PYTHON) > $(WHEELHOUSE)/requirements.txt
	$(PY) -m pip download --quiet --no-deps --only-binary=:all: --dest $(WHEELHOUSE) \
		$(foreach p,$(WHEEL_PLATFORMS),--platform $(p)_$(WHEEL_ARCH)) \
		--python-version $(WHEEL_PYTHON) -r $(WHEELHOUSE)/requirements.txt

# Learned-agent report. First the per-graph table from the saved rows of
# docs/results/per_graph.jsonl (plan-imitation agents, 12 instances x 3 seeds) and the
# rollout generalist's tables from docs/results/generalist.jsonl (3 seeds, 76 unseen
# instances), with the baselines stored beside them (NAME.baselines.json): nothing is
# trained or recomputed. Without --results / --generalist-results, `placegym report
# --parts per_graph` / `--parts generalist` retrain the rows (the stored rows record 2.1 h
# and 14 min of training, evaluation excluded). Then `placegym report --out runs/report`
# trains the presets (finished runs under runs/report are loaded, not retrained): agents
# vs teachers on p100x4 and doppler-unit-4, optimality gap, ablation, reward and transfer
# tables (markdown, also in runs/report/report.md).
.PHONY: agent-report
agent-report: $(STAMP)
	WANDB_MODE=disabled $(VENV)/bin/placegym report --parts per_graph,generalist \
		--results docs/results/per_graph.jsonl \
		--generalist-results docs/results/generalist.jsonl --out runs/report
	WANDB_MODE=disabled $(VENV)/bin/placegym report --out runs/report

lint: $(STAMP) typecheck
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# mypy on the installed namespace: the four folders linked as .typecheck/placegym/*, and
# the benchmark's public module placegym/benchmark.py beside them
typecheck: $(STAMP)
	@mkdir -p .typecheck/placegym
	@for d in envs teachers agents train; do ln -sfn ../../$$d .typecheck/placegym/$$d; done
	@ln -sfn ../../placegym/benchmark.py .typecheck/placegym/benchmark.py
	$(VENV)/bin/mypy -p placegym.envs -p placegym.teachers -p placegym.agents -p placegym.train \
		-m placegym.benchmark

# The documentation site (mkdocs.yml, docs/) into site/: warnings fail the build, nothing
# is fetched from the network. First the generated results blocks must match docs/results
# (python -m placegym.train.experiments.pages rewrites them). The API pages read the
# sources through .docs-src/placegym, links to the four folders of the one namespace and
# to the benchmark's public module.
docs: $(STAMP)
	$(PY) -m placegym.train.experiments.pages --check
	@mkdir -p .docs-src/placegym
	@ln -sfn ../../placegym/__init__.py .docs-src/placegym/__init__.py
	@ln -sfn ../../placegym/benchmark.py .docs-src/placegym/benchmark.py
	@for d in envs teachers agents train; do ln -sfn ../../$$d .docs-src/placegym/$$d; done
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean:
	rm -rf $(VENV) demo-out .pytest_cache .hypothesis .ruff_cache .mypy_cache .typecheck \
		site .docs-src
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
