# Makefile: builds what this machine can build and says what it left out.
#   make            train_gpt, test_gpt, tokenize, test binaries, bench_comm
#   make test       all tests (single process and multi-rank under mpirun); last line "N passed, N failed"
#   make bench      the training-step benchmark (GPT-2 124M, B=4, T=64), figure last
#   make plot       loss curves of out/default.jsonl (or LOGS="a.jsonl b.jsonl") into out/plot.svg
#   make asan       test binaries with AddressSanitizer + UBSan
CC ?= cc
CFLAGS_COMMON = -Wall -Wextra -Wshadow -Wstrict-prototypes -Wno-unused-function -std=gnu11 -g
# The trainer may use -O3 -march=native; test binaries use TEST_OPT (IEEE semantics, no fast-math) so NaN stays visible.
OPT ?= -O3 -march=native
TEST_OPT ?= -O2 -march=native
LDLIBS = -lm

# --- OpenMP -------------------------------------------------------------------------------------------------
OMP_OK := $(shell echo 'int main(void){return 0;}' | $(CC) -fopenmp -x c - -o /dev/null 2>/dev/null && echo yes)
ifeq ($(OMP_OK),yes)
  CFLAGS_COMMON += -fopenmp
  FOUND += openmp
else
  LEFT_OUT += "openmp (single-threaded kernels)"
endif

# --- BLAS: prefer the OpenMP build of OpenBLAS so BLAS and our kernels share one thread pool ----------------
OPENBLAS_OMP_DIR = /usr/lib/x86_64-linux-gnu/openblas-openmp
ifneq ($(wildcard $(OPENBLAS_OMP_DIR)/libopenblas.so),)
  BLAS_CFLAGS = -DUSE_BLAS -I/usr/include/x86_64-linux-gnu/openblas-openmp
  BLAS_LIBS = -L$(OPENBLAS_OMP_DIR) -Wl,-rpath,$(OPENBLAS_OMP_DIR) -lopenblas
  FOUND += openblas-openmp
else ifneq ($(shell echo 'int main(void){return 0;}' | $(CC) -x c - -lopenblas -o /dev/null 2>/dev/null && echo yes),)
  BLAS_CFLAGS = -DUSE_BLAS
  BLAS_LIBS = -lopenblas
  FOUND += openblas
else
  LEFT_OUT += "BLAS (matmuls fall back to the slow built-in loops)"
endif

# --- MPI ------------------------------------------------------------------------------------------------------
MPICC := $(shell command -v mpicc 2>/dev/null)
ifneq ($(MPICC),)
  MPI_CFLAGS = -DUSE_MPI $(shell mpicc --showme:compile 2>/dev/null)
  MPI_LIBS = $(shell mpicc --showme:link 2>/dev/null)
  FOUND += mpi
else
  LEFT_OUT += "MPI (single-process builds only; multi-rank tests skipped)"
endif

# --- PCRE2 (Unicode classes for the tokenizer's pre-tokenization) -------------------------------------------
PCRE2_OK := $(shell echo 'int main(void){return 0;}' | $(CC) -x c - -lpcre2-8 -o /dev/null 2>/dev/null && echo yes)
ifeq ($(PCRE2_OK),yes)
  TOK_LIBS = -lpcre2-8
  FOUND += pcre2
else
  LEFT_OUT += "pcre2 (tokenize and test_tokenizer not built: apt-get install libpcre2-dev)"
endif

# --- cJSON (Hugging Face checkpoints: --init model.safetensors, --export-hf; tests/test_hf) ---------------------
CJSON_OK := $(shell echo 'int main(void){cJSON_Delete(cJSON_Parse("{}"));return 0;}' | $(CC) -include cjson/cJSON.h -x c - -lcjson -o /dev/null 2>/dev/null && echo yes)
ifeq ($(CJSON_OK),yes)
  CJSON_CFLAGS = -DUSE_CJSON
  CJSON_LIBS = -lcjson
  FOUND += cjson
else
  LEFT_OUT += "cjson (no Hugging Face safetensors in train_gpt, tests/test_hf not built: apt-get install libcjson-dev)"
endif

BINS = train_gpt test_gpt
ifeq ($(CJSON_OK),yes)
  BINS += tests/test_hf
endif
ifeq ($(PCRE2_OK),yes)
  BINS += tokenize tests/test_tokenizer
endif
BINS += tests/test_dataloader tests/test_runs
ifneq ($(MPICC),)
  BINS += bench_comm tests/test_comm
endif

.PHONY: all test run bench plot clean asan report
all: report $(BINS)

report:
	@echo "make: found: $(FOUND)"
	@for x in $(LEFT_OUT); do echo "make: left out: $$x"; done

HEADERS = utils.h kernels_cpu.h comm.h zero.h dataloader.h tokenizer.h safetensors.h hf_gpt2.h

train_gpt: train_gpt.c $(HEADERS)
	$(CC) $(CFLAGS_COMMON) $(OPT) $(BLAS_CFLAGS) $(MPI_CFLAGS) $(CJSON_CFLAGS) $< -o $@ $(BLAS_LIBS) $(MPI_LIBS) $(CJSON_LIBS) $(LDLIBS)

# test_gpt includes train_gpt.c (with TRAIN_GPT_NO_MAIN) so the tests exercise the real code.
test_gpt: test_gpt.c train_gpt.c tests/testing.h $(HEADERS)
	$(CC) $(CFLAGS_COMMON) $(TEST_OPT) $(BLAS_CFLAGS) $(MPI_CFLAGS) $(CJSON_CFLAGS) $< -o $@ $(BLAS_LIBS) $(MPI_LIBS) $(CJSON_LIBS) $(LDLIBS)

# test_hf: Hugging Face checkpoints in and out (includes train_gpt.c; runs ./train_gpt --export-hf in child processes)
tests/test_hf: tests/test_hf.c train_gpt.c tests/testing.h $(HEADERS)
	$(CC) $(CFLAGS_COMMON) $(TEST_OPT) $(CJSON_CFLAGS) -I. $< -o $@ $(CJSON_LIBS) $(LDLIBS)

tokenize: tokenize.c tokenizer.h utils.h
	$(CC) $(CFLAGS_COMMON) $(OPT) $< -o $@ $(TOK_LIBS) $(LDLIBS)

tests/test_tokenizer: tests/test_tokenizer.c tests/testing.h tokenizer.h utils.h
	$(CC) $(CFLAGS_COMMON) $(TEST_OPT) -I. $< -o $@ $(TOK_LIBS) $(LDLIBS)

# test_runs drives ./train_gpt in child processes; it includes train_gpt.c only for the file layouts (no MPI, no BLAS)
tests/test_runs: tests/test_runs.c train_gpt.c tests/testing.h $(HEADERS)
	$(CC) $(CFLAGS_COMMON) $(TEST_OPT) -I. $< -o $@ $(LDLIBS)

tests/test_dataloader: tests/test_dataloader.c tests/testing.h dataloader.h utils.h
	$(CC) $(CFLAGS_COMMON) $(TEST_OPT) -I. $< -o $@ $(LDLIBS)

bench_comm: bench_comm.c comm.h utils.h
	$(CC) $(CFLAGS_COMMON) $(OPT) $(MPI_CFLAGS) $< -o $@ $(MPI_LIBS) $(LDLIBS)

tests/test_comm: tests/test_comm.c comm.h utils.h
	$(CC) $(CFLAGS_COMMON) $(TEST_OPT) $(MPI_CFLAGS) -I. $< -o $@ $(MPI_LIBS) $(LDLIBS)

# `make test` and `make run` work on a fresh machine: install what is missing, then build (a sub-make, so the
# probes above see the new packages), then run.
test:
	@bash scripts/setup.sh
	@$(MAKE) --no-print-directory all
	bash scripts/run_tests.sh

run:
	@bash scripts/setup.sh
	@$(MAKE) --no-print-directory all
	bash scripts/run_default.sh

# The benchmark lets OpenBLAS choose its kernels by its own CPU detection: some machines export OPENBLAS_CORETYPE
# (and OPENBLAS_L2_SIZE) to force an older kernel family; tests keep whatever the environment sets.
# The loss curves of the default job (or LOGS="a.jsonl b.jsonl"), as out/plot.svg, via gnuplot.
LOGS ?= out/default.jsonl
plot:
	bash scripts/plot_log.sh --out out/plot.svg $(LOGS)

bench: train_gpt
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE ./train_gpt --bench 1 --model d12 --batch-size 4 --seq-len 64

asan: OPT = -O1 -fsanitize=address,undefined -fno-omit-frame-pointer
asan: TEST_OPT = -O1 -fsanitize=address,undefined -fno-omit-frame-pointer
asan: clean all

clean:
	rm -f train_gpt test_gpt tokenize bench_comm tests/test_tokenizer tests/test_dataloader tests/test_comm tests/test_runs tests/test_hf

# ==============================================================================================================
# Fuzzing: libFuzzer harnesses for every parser (fuzz/*.c), built with clang, AddressSanitizer and UBSan.
#   make fuzz-build                               fuzz/bin/<target> for every target
#   make fuzz [FUZZ_SECONDS=60] [FUZZ_TARGETS=..] runs each target for FUZZ_SECONDS (scripts/fuzz.sh); fails on any
#                                                 crash, leak, timeout or broken invariant and prints the reproducer
#   make fuzz-clean                               removes the binaries, the grown corpora and the crash files
# No OpenMP in these builds (one deterministic thread per fuzzer; the pragmas are ignored), no BLAS, no MPI.
# ==============================================================================================================
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
# one harness per file, fuzz/<target>.c (its seeds in fuzz/corpus/<target>/)
FUZZ_TARGETS ?= $(sort $(basename $(notdir $(wildcard fuzz/*.c))))
FUZZ_CFLAGS = -Wall -Wextra -Wshadow -Wstrict-prototypes -Wno-unused-function -Wno-unknown-pragmas -std=gnu11 \
              -g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
              -DFUZZING -I.
FUZZ_LIBS = -lpcre2-8 $(CJSON_LIBS) -lm
ifneq ($(CJSON_OK),yes)
  FUZZ_TARGETS := $(filter-out safetensors,$(FUZZ_TARGETS)) # needs cJSON (see above)
endif
FUZZ_OK := $(if $(shell command -v $(FUZZ_CC) 2>/dev/null),$(shell echo 'int LLVMFuzzerTestOneInput(const unsigned char* d, unsigned long n) { (void)d; (void)n; return 0; }' | $(FUZZ_CC) -fsanitize=fuzzer,address,undefined -x c - -o /dev/null 2>/dev/null && echo yes))
FUZZ_MISSING = fuzzing ($(FUZZ_CC) with libFuzzer not found: apt-get install clang libclang-rt-dev)
ifeq ($(FUZZ_OK),yes)
  FOUND += libfuzzer
else
  LEFT_OUT += "$(FUZZ_MISSING)"
endif

.PHONY: fuzz fuzz-build fuzz-clean
ifeq ($(FUZZ_OK),yes)
fuzz-build: $(addprefix fuzz/bin/,$(FUZZ_TARGETS))

fuzz/bin/%: fuzz/%.c fuzz/fuzz_common.h fuzz/encoder_checks.h train_gpt.c $(HEADERS)
	@mkdir -p fuzz/bin
	$(FUZZ_CC) $(FUZZ_CFLAGS) $< -o $@ $(FUZZ_LIBS)

fuzz: fuzz-build
	FUZZ_SECONDS=$(FUZZ_SECONDS) bash scripts/fuzz.sh $(FUZZ_TARGETS)
else
fuzz-build fuzz:
	@echo "make: left out: $(FUZZ_MISSING)" >&2; exit 1
endif

fuzz-clean:
	rm -rf fuzz/bin fuzz/work fuzz/artifacts

# --- mutation testing (scripts/mutate.sh, tests/mutants.txt; see README "Mutation testing") ------------------
#   make mutate                       every mutant against the full suite; prints the score and the survivors
#   make mutate MUTANTS='warmup clip' only the mutants whose names match; MUTATE_TEST_CMD: a narrower suite
#   make mutate-check                 every mutant's text still occurs exactly once (seconds; after editing)
.PHONY: mutate mutate-check
mutate:
	bash scripts/mutate.sh
mutate-check:
	bash scripts/mutate.sh --check
