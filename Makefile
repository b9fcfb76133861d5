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

.PHONY: install demo test test-all bench gpu-check lint typecheck format clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]' '$(TORCH)'
	@# compile the simulator's numba kernels once into their on-disk cache
	$(PY) -c 'from placegym.envs.simulator import warmup; warmup()'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/placegym demo --out demo-out
	@# train the quickstart agent (resumes, or only re-evaluates, when run again)
	$(VENV)/bin/placegym train configs/quickstart.yaml out=demo-out/quickstart
	@# the agent (greedy and best of 16 samples) next to the teachers
	$(VENV)/bin/placegym bench --teachers critical_path,heft,nest,anneal --workloads ffnn \
		--agents demo-out/quickstart/checkpoints/final.pt --agent-k 16 --out demo-out/bench

test: $(STAMP)
	WANDB_MODE=disabled $(PY) -m pytest -q

test-all: $(STAMP)
	WANDB_MODE=disabled $(PY) -m pytest -q -m "not gpu"

bench: $(STAMP)
	WANDB_MODE=disabled $(PY) -m pytest -q -s -m benchmark tests/benchmarks

# On a machine with a CUDA GPU (about 5 minutes on one H200): the real backend on four
# streams of cuda:0, calibration with its rank check, GPU tests, a few phase III updates.
gpu-check: $(STAMP)
	$(VENV)/bin/placegym calibrate --devices cuda:0#4 --out runs/cuda0x4.json --check --scale 1
	WANDB_MODE=disabled $(PY) -m pytest -q -s -m gpu tests/test_backend_gpu.py
	WANDB_MODE=disabled $(VENV)/bin/placegym train configs/phase3_gpu.yaml progress=false

# Learned-agent report (about 70 minutes on 2 CPU cores; finished runs under runs/report are
# loaded, not retrained): agents vs teachers on p100x4 and doppler-unit-4, optimality gap,
# ablation, reward and transfer tables (markdown, also in runs/report/report.md).
.PHONY: agent-report
agent-report: $(STAMP)
	WANDB_MODE=disabled $(VENV)/bin/placegym report --out runs/report

lint: $(STAMP) typecheck
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# mypy on the installed namespace: the four folders linked as .typecheck/placegym/*
typecheck: $(STAMP)
	@mkdir -p .typecheck/placegym
	@for d in envs teachers agents train; do ln -sfn ../../$$d .typecheck/placegym/$$d; done
	$(VENV)/bin/mypy -p placegym.envs -p placegym.teachers -p placegym.agents -p placegym.train

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean:
	rm -rf $(VENV) demo-out .pytest_cache .hypothesis .ruff_cache .mypy_cache .typecheck
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
