# Everything a fresh machine needs: `make demo` runs the app, `make test` runs the test suite.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test browser conformance clean

$(STAMP): requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt -r requirements-dev.txt
	touch $(STAMP)

demo: $(STAMP)
	$(PY) app.py

# Debian's Chromium for the browser test (the test tools never download a browser of their own).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the browser test"; \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium >/dev/null; }

test: $(STAMP) browser
	$(PY) -m pytest -q

conformance: $(STAMP)
	$(PY) -m tempo.conformance tests/fixtures/conformance

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
