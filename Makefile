# Pagoda: the two commands a newcomer needs are `make serve` and `make test`.
BUILD ?= build
JOBS ?= 2
BUILD_TYPE ?= Release
PAGODA := $(BUILD)/apps/pagoda

.PHONY: deps configure build test test-all serve bench clean asan fuzz

deps:
	@./scripts/install-deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

configure: deps $(BUILD)/build.ninja

build: configure
	ninja -C $(BUILD) -j$(JOBS)

# Every test but the `slow` label.
test: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS) -LE slow

test-all: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

# For now: generate from the bundled model (the server issue turns this into `pagoda serve`).
serve: build
	$(PAGODA) serve

bench: build
	./scripts/bench-micro.sh

# ASan + UBSan build of the unit tests. -O1 -g1 (line tables for the reports): compiles in
# ~60% of the time -O2 -g takes, which keeps CI within its budget.
asan: deps
	cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPAGODA_SANITIZE=ON -DPAGODA_BENCH=OFF \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG"
	ninja -C build-asan -j$(JOBS) $$(ninja -C build-asan -t targets all | grep '_test: CXX_EXECUTABLE_LINKER' | cut -d: -f1)
	ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan --output-on-failure -j$(JOBS) -L 'unit|integration'

# Short libFuzzer runs of the GGUF parser, tokenizer, Jinja templates, bench scenarios, OpenAI request bodies (and their one-pass JSON parser), grammars and tool-call outputs (FUZZ_SECONDS each).
FUZZ_SECONDS ?= 60
fuzz: deps
	CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPAGODA_FUZZ=ON -DPAGODA_TESTS=OFF -DPAGODA_BENCH=OFF \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"
	ninja -C build-fuzz -j$(JOBS) gguf_fuzz tokenizer_fuzz jinja_fuzz scenario_fuzz request_fuzz control_fuzz rules_fuzz trace_fuzz router_fuzz grammar_fuzz weight_cache_fuzz safetensors_fuzz json_body_fuzz
	mkdir -p build-fuzz/corpus-gguf build-fuzz/corpus-tokenizer build-fuzz/corpus-jinja build-fuzz/corpus-scenario build-fuzz/corpus-request build-fuzz/corpus-control build-fuzz/corpus-rules build-fuzz/corpus-trace build-fuzz/corpus-router build-fuzz/corpus-grammar build-fuzz/corpus-weight_cache build-fuzz/corpus-safetensors build-fuzz/corpus-json_body
	@for t in gguf:4096 tokenizer:1024 jinja:2048 scenario:2048 request:4096 control:2048 rules:4096 trace:4096 router:4096 grammar:2048 weight_cache:8448 safetensors:4096 json_body:4096; do name=$${t%%:*}; len=$${t##*:}; \
	  echo "fuzzing $$name for $(FUZZ_SECONDS) s (log: build-fuzz/$$name.log)"; \
	  if build-fuzz/fuzz/$${name}_fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=$$len \
	      build-fuzz/corpus-$$name fuzz/corpus/$$name $$([ $$name = jinja ] && echo testdata/chat-templates/corpus) \
	      > build-fuzz/$$name.log 2>&1; then \
	    tail -n 1 build-fuzz/$$name.log; \
	  else tail -n 60 build-fuzz/$$name.log; exit 1; fi; done

clean:
	rm -rf $(BUILD) build-asan build-fuzz
