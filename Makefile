# daytona-worker — see README.md. Every target installs what it needs itself.
GO ?= go
BIN := bin/daytona-worker

.PHONY: build test stress package demo bench fuzz live fidelity mutate dropcond clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN) ./cmd/daytona-worker
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/daytona-sim ./cmd/daytona-sim

# The README's test command: vet, staticcheck, race tests, real-host interop.
test:
	bash scripts/test.sh

# The suite RUNS times (default 5) under stress-ng --cpu CPUS (default 2).
stress:
	bash scripts/stress.sh

# Cross-compiled binaries + npm pack (PROFILE=compat-2026.916 by default).
package:
	bash scripts/package.sh

# A full lease lifecycle against the emulator (or real Daytona with
# DAYTONA_API_KEY); V=1 also prints each step's raw JSON result.
demo:
	bash scripts/demo.sh $(if $(V),-v)

# The live tier against real Daytona (starts billable sandboxes; docs/development.md,
# "Live tests"): needs DAYTONA_API_KEY; LIVE_RUN narrows the tests.
live:
	DAYTONA_LIVE=1 $(GO) test -count=1 -timeout $${LIVE_TIMEOUT:-30m} -run "$${LIVE_RUN:-Live}" -v ./daytona/ ./provider/

# The fidelity tier: the toolbox probes against the emulator, or with
# DAYTONA_DAEMON=/path/to/daemon (or DAYTONA_DAEMON_URL) against Daytona's
# real toolbox daemon, with the worker's exec tests written for it
# (docs/emulator.md#the-fidelity-tier).
fidelity:
	bash scripts/fidelity.sh

# Start-up and execute benchmarks; the execute one runs at each round trip of
# BENCH_RTT (default 0,40,100 ms; `make bench BENCH_RTT=0,80`), over TLS with
# the daemon's labeler cost. Knobs in scripts/bench.sh.
bench:
	bash scripts/bench.sh

fuzz:
	$(GO) test ./rpc -run '^$$' -fuzz FuzzReader -fuzztime $${FUZZTIME:-60s}
	$(GO) test ./rpc -run '^$$' -fuzz FuzzDispatch -fuzztime $${FUZZTIME:-60s}

# Mutation testing (gremlins v0.6.0) of the lines changed since BASE (default:
# the last merge commit), bounded by MUTATE_BUDGET (default 20m); prints the
# survivors and the score. Not part of CI; docs/testing.md says how to read it.
mutate:
	bash scripts/mutate.sh

# Dropped-condition mutants (each operand of each && and ||) in DIRS (default:
# rpc cleanup), only on lines changed since BASE when it is set; bounded by
# MUTATE_BUDGET (default 20m). docs/testing.md#dropped-conditions-make-dropcond.
dropcond:
	$(GO) run ./internal/tools/dropcond $(if $(BASE),-base $(BASE)) $(if $(COVER),-cover) -budget $(or $(MUTATE_BUDGET),20m) $(or $(DIRS),rpc cleanup)

clean:
	rm -rf bin dist npm/bin npm/manifest.js npm/*.tgz
