# Everything a fresh machine needs: `make demo` runs the app, `make test-all` runs what CI runs (`make test` is the
# fast tier, for every change; CONTRIBUTING.md says which tier to run when).
PYTHON   ?= python3
VENV     ?= .venv
PY       := $(VENV)/bin/python
STAMP    := $(VENV)/.installed
ENGINES  := $(VENV)/.engines-installed
LMMS_EVAL := lmms-eval==0.7.3
OVERLAYS := .overlays
# The version matrix: what requirements.txt allows besides what the main environment installs.
PILLOW_13          := pillow>=13,<14
OLDEST_TRANSFORMERS := transformers==5.20.2

.PHONY: demo test test-all test-slow check matrix browser conformance mutation clean

# The requirements, then tempo itself (editable, nothing more), so that `.venv/bin/tempo` exists after any target.
$(STAMP): requirements.txt requirements-dev.txt constraints-cpu.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade "pip>=25.3"
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt -r requirements-dev.txt \
	  -c constraints-cpu.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-build-isolation --no-deps -e .
	touch $(STAMP)

demo: $(STAMP)
	$(PY) app.py

# Debian's Chromium for the browser test (the test tools never download a browser of their own).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the browser test"; \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium >/dev/null; }

# The fast tier: every test not marked `slow`, then the ten slowest of them.
test: $(STAMP) $(ENGINES)
	$(PY) -m pytest -q -m "not slow" --durations=10

# The slow tier: training chains, the soak, the load test, the GPU check's dry run, the browser journeys.
# It prints its forty slowest: the list to start from when test-all is over its 30 minutes.
test-slow: $(STAMP) $(ENGINES) browser
	$(PY) -m pytest -q -m slow --durations=40

# What CI runs (.ci/run): lint and types, then the slow tier beside the fast tier and the matrix. A third of the slow
# tier's time is waiting (live streams in real time, the browser, servers starting), which the other two fill; the
# slow tier's output is printed when it ends. (make -j2 would not start the slow tier first.) Each side's pytest
# process computes on one torch thread (tests/conftest.py): two apiece on two cores spin waiting for each other. Not
# OMP_NUM_THREADS, which the processes they start would inherit: a decoder with one thread needs less memory, and
# tests/test_hostile.py's out-of-memory decode then succeeds.
test-all: check $(ENGINES) browser
	@export TEMPO_TEST_TORCH_THREADS=1; log=$$(mktemp); $(MAKE) --no-print-directory test-slow > $$log 2>&1 & slow=$$!; \
	$(MAKE) --no-print-directory test matrix; others=$$?; \
	wait $$slow; slow_status=$$?; echo "--- the slow tier:"; cat $$log; rm -f $$log; \
	[ $$others = 0 ] && [ $$slow_status = 0 ]

# Lint and import order (ruff; pyproject.toml's [tool.ruff]) and types (mypy on tempo/ and demo/).
check: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# The engines the suite tests Tempo in (pyproject's extras tempo[lmms] and tempo[ray]), with tempo itself installed
# editable so that lmms-eval finds `--model tempo` through its entry point. Neither extra names torch, and the
# constraints keep the CPU build; lmms-eval goes in without its own requirements, which would add a CUDA torchvision.
$(ENGINES): $(STAMP) pyproject.toml
	$(PY) -m pip install --quiet --disable-pip-version-check --no-build-isolation -e ".[lmms,ray]" -c constraints-cpu.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps "$(LMMS_EVAL)"
	touch $(ENGINES)

# The same numbers under every supported version: the pixel and conformance tests again with Pillow 13 (gradio
# keeps the main environment below 13) and with the oldest transformers, each as an overlay on the main
# environment; then requirements.txt must resolve for ZeroGPU's Pythons, 3.10 and 3.12 (the Space's), both with the
# newest versions it admits and with every floor (torch 2.8, ZeroGPU's oldest, among them). The four resolutions run
# at once: each is half waiting on the index.
matrix: $(STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --upgrade --target $(OVERLAYS)/pillow13 "$(PILLOW_13)"
	PYTHONPATH=$(OVERLAYS)/pillow13 $(PY) -c "import PIL; assert PIL.__version__.startswith('13.'), PIL.__version__; print('Pillow', PIL.__version__)"
	PYTHONPATH=$(OVERLAYS)/pillow13 $(PY) -m pytest -q -p no:cacheprovider tests/test_resample.py tests/test_patches.py tests/test_conformance.py
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --upgrade --target $(OVERLAYS)/transformers "$(OLDEST_TRANSFORMERS)"
	PYTHONPATH=$(OVERLAYS)/transformers $(PY) -c "import transformers as t; print('transformers', t.__version__)"
	PYTHONPATH=$(OVERLAYS)/transformers $(PY) -m pytest -q -p no:cacheprovider tests/test_conformance.py tests/test_loading.py \
	  tests/test_static_decoding.py tests/test_fused_step.py tests/test_fused_norms.py tests/test_vision_attention.py
	mkdir -p $(OVERLAYS) && sed -E 's/>=([^,;[:space:]]+)(,[^;[:space:]]*)?/==\1/' requirements.txt > $(OVERLAYS)/floors.txt
	pids=""; for version in 3.10 3.12; do for spec in requirements floors; do \
	  ( file=requirements.txt; [ $$spec = floors ] && file=$(OVERLAYS)/floors.txt; \
	    $(PY) -m pip install --quiet --disable-pip-version-check --dry-run --ignore-installed --only-binary=:all: \
	      --python-version $$version --target $(OVERLAYS)/dry-run-$$version-$$spec -r $$file \
	      > $(OVERLAYS)/resolve-$$version-$$spec.log 2>&1 \
	    && echo "requirements.txt resolves for Python $$version ($$spec)" \
	    || { echo "requirements.txt does not resolve for Python $$version ($$spec):"; \
	         grep -v "^WARNING: Location" $(OVERLAYS)/resolve-$$version-$$spec.log; exit 1; } ) & \
	  pids="$$pids $$!"; done; done; \
	failed=0; for pid in $$pids; do wait $$pid || failed=1; done; exit $$failed

# Mutation testing (mutmut) of the modules whose numbers users trust, each against its own fast tests; it writes
# benchmarks/results/mutation.md (and .json) and fails under 90 %. About an hour on 2 cores: not part of test-all.
mutation: $(STAMP)
	$(PY) -m benchmarks.mutation

conformance: $(STAMP)
	$(PY) -m tempo conformance tests/fixtures/conformance

clean:
	rm -rf $(VENV) $(OVERLAYS) .pytest_cache .hypothesis
