# Makefile: builds what this machine can build, says what it left out, and rebuilds what a change of the machine
# affects.
#   make            train_gpt, test_gpt, tokenize, test binaries, bench_comm; ends with one line per binary saying
#                   what it was built with (also `./train_gpt --version`, `./tokenize --version`, ...)
#   make test       all tests (single process and multi-rank under mpirun); last line "N passed, N failed"
#   make bench      the training-step benchmark (GPT-2 124M, B=4, T=64), one row per --dtype x --recompute
#   make plot       loss curves of out/default.jsonl (or LOGS="a.jsonl b.jsonl") into out/plot.svg
#   make asan       test binaries with AddressSanitizer + UBSan
#   NO_BLAS=1, NO_MPI=1, NO_PCRE2=1, NO_CJSON=1, NO_XXHASH=1, NO_ZLIB=1, NO_OPENMP=1 hide a library from the probes
#   WERROR=0        CUDA files without warnings as errors (another compiler's new warnings need not stop a GPU check)
#
# Each binary depends on a stamp, build/<binary>.features, holding the compiler, flags and libraries it is built
# with. The stamp is rewritten only when that text changes, so installing or removing a library (or changing
# CC/OPT) rebuilds exactly the binaries that use it, and nothing else.
CC ?= cc
# FP_FLAGS: what lets GCC vectorize the CPU kernels' loops without changing any operation's value (NaN and infinity
# included). -fno-trapping-math: no program here traps on floating-point exceptions, so the kernels' selects (exp's
# clamps, the softmax's max) may become vector blends (clang's default); without it the softmax and GELU loops stay
# scalar. -fno-math-errno: no program reads errno after a math function, so sqrtf is one instruction with no branch
# to the library for a negative argument; without it AdamW's loop stays scalar (2.5x slower). Both are in every
# binary's feature stamp (CC_DESC), so changing them rebuilds every binary, and the start-up table shows them.
FP_FLAGS ?= -fno-trapping-math -fno-math-errno
CFLAGS_COMMON = -Wall -Wextra -Wshadow -Wstrict-prototypes -Wno-unused-function -std=gnu11 -g $(FP_FLAGS)
# The trainer may use -O3 -march=native; test binaries use TEST_OPT (IEEE semantics, no fast-math) so NaN stays visible.
OPT ?= -O3 -march=native
TEST_OPT ?= -O2 -march=native
LDLIBS = -lm
CC_VERSION := $(shell $(CC) -dumpfullversion -dumpversion 2>/dev/null | head -n 1)
BUILD_COMMIT := $(shell git describe --always --dirty 2>/dev/null || echo unknown)

# --- OpenMP -------------------------------------------------------------------------------------------------
OMP_OK := $(if $(filter 1,$(NO_OPENMP)),,$(shell echo 'int main(void){return 0;}' | $(CC) -fopenmp -x c - -o /dev/null 2>/dev/null && echo yes))
ifeq ($(OMP_OK),yes)
  CFLAGS_COMMON += -fopenmp
  FOUND += openmp
  F_OMP = openmp
else
  LEFT_OUT += "openmp (single-threaded kernels)$(if $(filter 1,$(NO_OPENMP)), [hidden by NO_OPENMP=1])"
  F_OMP = no-openmp
endif

# --- BLAS: prefer the OpenMP build of OpenBLAS so BLAS and our kernels share one thread pool ----------------
OPENBLAS_OMP_DIR = /usr/lib/x86_64-linux-gnu/openblas-openmp
ifeq ($(NO_BLAS),1)
  LEFT_OUT += "BLAS (matmuls fall back to the slow built-in loops) [hidden by NO_BLAS=1]"
  F_BLAS = no-blas
else ifneq ($(wildcard $(OPENBLAS_OMP_DIR)/libopenblas.so),)
  BLAS_CFLAGS = -DUSE_BLAS -I/usr/include/x86_64-linux-gnu/openblas-openmp
  BLAS_LIBS = -L$(OPENBLAS_OMP_DIR) -Wl,-rpath,$(OPENBLAS_OMP_DIR) -lopenblas
  FOUND += openblas-openmp
  BLAS_VERSION := $(shell grep -o 'OpenBLAS [0-9.]*' /usr/include/x86_64-linux-gnu/openblas-openmp/openblas_config.h 2>/dev/null)
  F_BLAS = openblas-openmp ($(BLAS_VERSION))
else ifneq ($(shell echo 'int main(void){return 0;}' | $(CC) -x c - -lopenblas -o /dev/null 2>/dev/null && echo yes),)
  BLAS_CFLAGS = -DUSE_BLAS
  BLAS_LIBS = -lopenblas
  FOUND += openblas
  F_BLAS = openblas
else
  LEFT_OUT += "BLAS (matmuls fall back to the slow built-in loops)"
  F_BLAS = no-blas
endif

# --- MPI ------------------------------------------------------------------------------------------------------
# Open MPI's wrapper (its --showme flags give the compile and link lines; another MPI's mpicc counts as none)
MPICC := $(if $(filter 1,$(NO_MPI)),,$(shell command -v mpicc >/dev/null 2>&1 && mpicc --showme:compile >/dev/null 2>&1 && command -v mpicc))
ifneq ($(MPICC),)
  MPI_CFLAGS = -DUSE_MPI $(shell mpicc --showme:compile 2>/dev/null)
  MPI_LIBS = $(shell mpicc --showme:link 2>/dev/null)
  FOUND += mpi
  MPI_VERSION := $(shell mpicc --showme:version 2>/dev/null | sed -e 's/^[^:]*: //' -e 's/ .Language.*//' | head -n 1)
  F_MPI = mpi ($(MPI_VERSION))
else
  LEFT_OUT += "MPI (single-process builds only; multi-rank tests skipped)$(if $(filter 1,$(NO_MPI)), [hidden by NO_MPI=1])"
  F_MPI = no-mpi
endif

# --- PCRE2 (Unicode classes for the tokenizer's pre-tokenization) -------------------------------------------
PCRE2_OK := $(if $(filter 1,$(NO_PCRE2)),,$(shell echo 'int main(void){return 0;}' | $(CC) -x c - -lpcre2-8 -o /dev/null 2>/dev/null && echo yes))
ifeq ($(PCRE2_OK),yes)
  TOK_LIBS = -lpcre2-8
  FOUND += pcre2
else
  LEFT_OUT += "pcre2 (tokenize and test_tokenizer not built: apt-get install libpcre2-dev)$(if $(filter 1,$(NO_PCRE2)), [hidden by NO_PCRE2=1])"
endif

# --- cJSON (Hugging Face checkpoints: --init model.safetensors, --export-hf; tests/test_hf) ---------------------
CJSON_OK := $(if $(filter 1,$(NO_CJSON)),,$(shell echo 'int main(void){cJSON_Delete(cJSON_Parse("{}"));return 0;}' | $(CC) -include cjson/cJSON.h -x c - -lcjson -o /dev/null 2>/dev/null && echo yes))
ifeq ($(CJSON_OK),yes)
  CJSON_CFLAGS = -DUSE_CJSON
  CJSON_LIBS = -lcjson
  FOUND += cjson
  F_CJSON = cjson
else
  LEFT_OUT += "cjson (no Hugging Face safetensors in train_gpt; tokenize, tests/test_tokenizer and tests/test_hf not built: apt-get install libcjson-dev)$(if $(filter 1,$(NO_CJSON)), [hidden by NO_CJSON=1])"
  F_CJSON = no-cjson
endif

# --- GPT-2's BPE encoder inside train_gpt (--prompt): PCRE2 and cJSON both; tokenizer.h's encoder, which
# compiles as C and as C++ (nvcc, the emulator), goes into every build of train_gpt.c with the cJSON flags
ifeq ($(PCRE2_OK)$(CJSON_OK),yesyes)
  CJSON_CFLAGS += -DUSE_ENCODER
  CJSON_LIBS += -lpcre2-8
  F_CJSON = cjson; encoder
else
  LEFT_OUT += "the BPE encoder in train_gpt (--prompt refused; samples print as ids without --tokenizer): needs both pcre2 and cjson"
endif

# --- xxHash (XXH3-64 checkpoint checksums; header-only use, no library linked) -------------------------------
XXHASH_OK := $(if $(filter 1,$(NO_XXHASH)),,$(shell printf '#define XXH_INLINE_ALL\n#include <xxhash.h>\nint main(void){return (int)XXH3_64bits("", 0);}\n' | $(CC) -x c - -o /dev/null 2>/dev/null && echo yes))
ifeq ($(XXHASH_OK),yes)
  XXHASH_CFLAGS = -DUSE_XXHASH
  FOUND += xxhash
  F_XXHASH = xxhash
else
  LEFT_OUT += "xxhash (checkpoints get the slower legacy FNV checksums, XXH3 ones cannot be read: apt-get install libxxhash-dev)$(if $(filter 1,$(NO_XXHASH)), [hidden by NO_XXHASH=1])"
  F_XXHASH = no-xxhash
endif

# --- zlib (parquet_text: GZIP-compressed parquet pages; snappy, FineWeb's codec, is built in) ------------------
ZLIB_OK := $(if $(filter 1,$(NO_ZLIB)),,$(shell printf '#include <zlib.h>\nint main(void){return zlibVersion() == 0;}\n' | $(CC) -x c - -lz -o /dev/null 2>/dev/null && echo yes))
ifeq ($(ZLIB_OK),yes)
  ZLIB_LIBS = -lz
  FOUND += zlib
  F_ZLIB = zlib
else
  ZLIB_CFLAGS = -DNO_ZLIB
  LEFT_OUT += "zlib (parquet_text refuses GZIP-compressed parquet files: apt-get install zlib1g-dev)$(if $(filter 1,$(NO_ZLIB)), [hidden by NO_ZLIB=1])"
  F_ZLIB = no-zlib
endif

# --- CUDA (train_gpt_cu, test_gpt_cu): nvcc and cuBLASLt; cuDNN and NCCL are probed and reported ------------------
# Built wherever nvcc is installed, GPU or not (CI compiles and links them; scripts/gpu_check.sh runs them).
# CUDA_ARCH: the compute capability to build for (90: H100/H200; 80: A100). PRECISION: train_gpt_cu's storage type
# (BF16, FP16, FP32); test_gpt_cu is always FP32 (the op tests' fp32 tolerances) and test_gpt_cu_bf16 the bf16 one.
NVCC ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA_ARCH ?= 90
PRECISION ?= BF16
ifeq ($(NO_CUDA),1)
  NVCC :=
endif
# CUDA_LIB_DIR / CUDA_INC: where cuBLASLt's library and headers are when not in the toolkit (scripts/gpu_check.sh
# points them into a Python package's nvidia/cublas on machines that keep it there).
ifneq ($(NVCC),)
  CUDA_HOME := $(patsubst %/bin/nvcc,%,$(NVCC))
  NVCC_VERSION := $(shell $(NVCC) --version 2>/dev/null | grep -o 'release [0-9.]*' | head -n 1)
  CUDA_LIB_DIR ?= $(CUDA_HOME)/lib64
  CUDA_LT_OK := $(shell test -e $(CUDA_LIB_DIR)/libcublasLt.so && echo yes)
endif
ifeq ($(CUDA_LT_OK),yes)
  WERROR ?= 1
  comma := ,
  NVCC_FLAGS = -std=c++17 -O3 -g -lineinfo -gencode arch=compute_$(CUDA_ARCH),code=sm_$(CUDA_ARCH) \
               $(if $(filter 1,$(WERROR)),-Werror all-warnings) -diag-suppress 177 \
               -Xcompiler -fopenmp,-Wall,-Wno-unused-function$(if $(filter 1,$(WERROR)),$(comma)-Werror) $(CUDA_INC)
  CUDA_LIBS = -L$(CUDA_LIB_DIR) -Xlinker -rpath=$(CUDA_LIB_DIR) -lcublasLt -lcublas -lgomp -lm
  ifneq ($(MPICC),)
    # several processes (ZeRO, and several sharing one GPU in tests): MPI on pinned host copies of device buffers
    NVCC_FLAGS += $(filter -I% -D%,$(MPI_CFLAGS))
    CUDA_LIBS += $(filter -L% -l%,$(MPI_LIBS))
    F_CUDA_MPI = ; $(F_MPI)
  endif
  FOUND += cuda
  F_CUDA = nvcc $(NVCC_VERSION) sm_$(CUDA_ARCH); cublasLt$(empty)
  # (the headers given by CUDNN_INC / NCCL_INC first: the ones built against, such as a pip wheel's)
  CUDNN_VERSION := $(shell grep -h '^\#define CUDNN_MAJOR\|^\#define CUDNN_MINOR\|^\#define CUDNN_PATCHLEVEL' $(patsubst -I%,%/cudnn_version.h,$(filter -I%,$(CUDNN_INC))) $(CUDA_HOME)/include/cudnn_version.h /usr/include/cudnn_version.h 2>/dev/null | awk '{print $$3}' | head -n 3 | paste -sd.)
  NCCL_VERSION := $(shell grep -h '^\#define NCCL_MAJOR\|^\#define NCCL_MINOR\|^\#define NCCL_PATCH' $(patsubst -I%,%/nccl.h,$(filter -I%,$(NCCL_INC))) $(CUDA_HOME)/include/nccl.h /usr/include/nccl.h 2>/dev/null | awk '{print $$3}' | head -n 3 | paste -sd.)
  CUDNN_LIB_DIR ?= $(CUDA_LIB_DIR)
  CUDNN_OK := $(if $(filter 1,$(NO_CUDNN)),,$(shell test -e $(CUDNN_LIB_DIR)/libcudnn.so && echo yes))
  ifeq ($(CUDNN_OK),yes)
    NVCC_FLAGS += -DUSE_CUDNN $(CUDNN_INC)
    CUDA_LIBS += -L$(CUDNN_LIB_DIR) -Xlinker -rpath=$(CUDNN_LIB_DIR) -lcudnn
    FOUND += cudnn
    F_CUDA += ; cudnn $(CUDNN_VERSION)
    CUDNN_BINS = tests/test_cudnn_graph
  else
    LEFT_OUT += "cudnn (train_gpt_cu gets the native attention kernels only; CUDNN_LIB_DIR names where libcudnn.so is)$(if $(filter 1,$(NO_CUDNN)), [hidden by NO_CUDNN=1])"
  endif
  # NCCL (--comm nccl): the toolkit's, or NCCL_LIB_DIR / NCCL_INC (scripts/gpu_check.sh points them into a Python
  # package's nvidia/nccl where the machine keeps it there)
  NCCL_LIB_DIR ?= $(CUDA_LIB_DIR)
  NCCL_OK := $(if $(filter 1,$(NO_NCCL)),,$(shell test -e $(NCCL_LIB_DIR)/libnccl.so && echo yes))
  ifeq ($(NCCL_OK)$(if $(MPICC),yes,),yesyes)
    NVCC_FLAGS += -DUSE_NCCL $(NCCL_INC)
    CUDA_LIBS += -L$(NCCL_LIB_DIR) -Xlinker -rpath=$(NCCL_LIB_DIR) -lnccl
    FOUND += nccl
    F_CUDA += ; nccl $(NCCL_VERSION)
  else
    LEFT_OUT += "nccl$(if $(NCCL_VERSION), $(NCCL_VERSION) found,) (train_gpt_cu without --comm nccl: $(if $(MPICC),no libnccl.so in $(NCCL_LIB_DIR),NCCL is bootstrapped over MPI, which is missing)$(if $(filter 1,$(NO_NCCL)), [hidden by NO_NCCL=1]))"
  endif
else
  LEFT_OUT += "CUDA (train_gpt_cu, test_gpt_cu not built: $(if $(NVCC),no libcublasLt.so in $(CUDA_LIB_DIR) (set CUDA_LIB_DIR),no nvcc)$(if $(filter 1,$(NO_CUDA)), [hidden by NO_CUDA=1]))"
endif

# --- the CUDA backend on the CPU (tests/cuda_emu): train_gpt_emu, test_gpt_emu, test_gpt_emu_bf16 ------------------
# The same sources as train_gpt_cu / test_gpt_cu, compiled by g++ against the CUDA headers only (no nvcc, driver, GPU
# or CUDA library), each kernel launch rewritten into a call of the emulator, which runs the kernels on the CPU and
# stands in for the runtime, cuBLASLt, cub and (over MPI) NCCL. `bash scripts/gpu_check.sh --emu` runs the GPU
# check's correctness stages with them; make test does. Not a performance model, nor of concurrency: see
# tests/cuda_emu/cuda_emu.h.
EMU_CUDA_INC := $(firstword $(wildcard $(CUDA_HOME)/include/cublasLt.h /usr/local/cuda/include/cublasLt.h /usr/include/cublasLt.h))
ifeq ($(filter 1,$(NO_CUDA_EMU))$(if $(EMU_CUDA_INC),,none),)
  EMU_OK = yes
  EMU_NCCL_H := $(firstword $(wildcard $(patsubst -I%,%/nccl.h,$(NCCL_INC)) $(dir $(EMU_CUDA_INC))nccl.h /usr/include/nccl.h))
  EMU_FLAGS = -x c++ -std=c++17 -O2 -g -fopenmp -Wall -Wno-unused-function -Wno-unused-variable -Werror -DCUDA_EMU -DOMPI_SKIP_MPICXX=1 \
              -include tests/cuda_emu/cuda_emu.h -Itests/cuda_emu/include -Itests/cuda_emu -Ibuild/emu/src -I$(dir $(EMU_CUDA_INC)) \
              $(if $(MPICC),$(if $(EMU_NCCL_H),-DUSE_NCCL -I$(dir $(EMU_NCCL_H)),),) $(MPI_CFLAGS) $(BLAS_CFLAGS) $(CJSON_CFLAGS) $(XXHASH_CFLAGS)
  EMU_LIBS = $(MPI_LIBS) $(BLAS_LIBS) $(CJSON_LIBS) -lgomp -lm
  F_EMU = cuda_emu ($(F_BLAS)) on $(CXX) $(shell $(CXX) -dumpfullversion 2>/dev/null); CUDA headers $(dir $(EMU_CUDA_INC))$(if $(MPICC),$(if $(EMU_NCCL_H),; nccl over mpi,),)
else
  LEFT_OUT += "cuda_emu (train_gpt_emu, test_gpt_emu: the CUDA backend on the CPU needs the CUDA headers, cublasLt.h)$(if $(filter 1,$(NO_CUDA_EMU)), [hidden by NO_CUDA_EMU=1])"
endif

BINS = train_gpt test_gpt
ifeq ($(CUDA_LT_OK),yes)
  BINS += train_gpt_cu test_gpt_cu test_gpt_cu_bf16 bench_kernels_cu $(CUDNN_BINS)
  ON_DEMAND_BINS = train_gpt_cu_fp16 # built by name only (scripts/gpu_check.sh)
endif
ifeq ($(EMU_OK),yes)
  BINS += train_gpt_emu train_gpt_emu_fp16 test_gpt_emu test_gpt_emu_bf16 bench_kernels_emu tests/test_cuda_emu
endif
ifeq ($(CJSON_OK),yes)
  BINS += tests/test_hf
endif
# the tokenizer's encoder needs PCRE2 (pre-tokenization) and cJSON (encoder.json)
ifeq ($(PCRE2_OK)$(CJSON_OK),yesyes)
  BINS += tokenize tests/test_tokenizer
endif
BINS += parquet_text tests/test_dataloader tests/test_runs tests/test_tp_runs tests/test_pp_runs tests/test_hellaswag tests/test_precision tests/test_pp bench_checksum bench_sample
ifneq ($(MPICC),)
  BINS += bench_comm tests/test_comm tests/test_tp tests/test_powersgd
endif

# --- feature stamps: build/<binary>.features, rewritten only when the text changes --------------------------
# FEATURES_<binary>: what that binary is built with (compiler, optimisation, the libraries it links)
CC_DESC = $(CC) $(CC_VERSION) $(FP_FLAGS)
FEATURES_train_gpt = $(CC_DESC) $(OPT); $(F_OMP); $(F_BLAS); $(F_MPI); $(F_CJSON); $(F_XXHASH)
FEATURES_test_gpt = $(CC_DESC) $(TEST_OPT); $(F_OMP); $(F_BLAS); $(F_MPI); $(F_CJSON); $(F_XXHASH)
FEATURES_tests/test_hf = $(CC_DESC) $(TEST_OPT); $(F_OMP); $(F_CJSON); $(F_XXHASH)
FEATURES_tokenize = $(CC_DESC) $(OPT); $(F_OMP); pcre2; $(F_CJSON)
FEATURES_parquet_text = $(CC_DESC) $(OPT); $(F_ZLIB)
FEATURES_tests/test_tokenizer = $(CC_DESC) $(TEST_OPT); $(F_OMP); pcre2; $(F_CJSON)
FEATURES_tests/test_runs = $(CC_DESC) $(TEST_OPT); $(F_OMP); $(F_XXHASH)
FEATURES_tests/test_tp_runs = $(CC_DESC) $(TEST_OPT); $(F_OMP); $(F_XXHASH)
FEATURES_tests/test_pp_runs = $(CC_DESC) $(TEST_OPT); $(F_OMP); $(F_XXHASH)
FEATURES_tests/test_hellaswag = $(CC_DESC) $(TEST_OPT); $(F_OMP); $(F_XXHASH)
FEATURES_tests/test_dataloader = $(CC_DESC) $(TEST_OPT); $(F_OMP)
FEATURES_tests/test_precision = $(CC_DESC) $(TEST_OPT); $(F_OMP)
FEATURES_tests/test_pp = $(CC_DESC) $(TEST_OPT)
FEATURES_bench_comm = $(CC_DESC) $(OPT); $(F_OMP); $(F_MPI)
FEATURES_bench_checksum = $(CC_DESC) $(OPT); $(F_XXHASH)
FEATURES_bench_sample = $(CC_DESC) $(OPT); $(F_XXHASH)
FEATURES_tests/test_comm = $(CC_DESC) $(TEST_OPT); $(F_OMP); $(F_MPI)
FEATURES_tests/test_powersgd = $(CC_DESC) $(TEST_OPT); $(F_OMP); $(F_MPI)
FEATURES_tests/test_tp = $(CC_DESC) $(TEST_OPT); $(F_OMP); $(F_BLAS); $(F_MPI); $(F_CJSON); $(F_XXHASH)
FEATURES_train_gpt_cu = $(F_CUDA)$(F_CUDA_MPI); $(PRECISION); $(F_CJSON); $(F_XXHASH)
FEATURES_test_gpt_cu = $(F_CUDA)$(F_CUDA_MPI); FP32; $(F_CJSON); $(F_XXHASH)
FEATURES_test_gpt_cu_bf16 = $(F_CUDA)$(F_CUDA_MPI); BF16; $(F_CJSON); $(F_XXHASH)
FEATURES_tests/test_cudnn_graph = $(F_CUDA)$(F_CUDA_MPI)
FEATURES_bench_kernels_cu = $(F_CUDA)$(F_CUDA_MPI); BF16
FEATURES_train_gpt_emu = $(F_EMU); $(F_MPI); $(PRECISION); $(F_CJSON); $(F_XXHASH)
FEATURES_test_gpt_emu = $(F_EMU); $(F_MPI); FP32; $(F_CJSON); $(F_XXHASH)
FEATURES_test_gpt_emu_bf16 = $(F_EMU); $(F_MPI); BF16; $(F_CJSON); $(F_XXHASH)
FEATURES_tests/test_cuda_emu = $(F_EMU); $(F_MPI)
FEATURES_train_gpt_emu_fp16 = $(F_EMU); $(F_MPI); FP16; $(F_CJSON); $(F_XXHASH)
FEATURES_bench_kernels_emu = $(F_EMU); $(F_MPI); BF16
FEATURES_train_gpt_cu_fp16 = $(F_CUDA)$(F_CUDA_MPI); FP16; $(F_CJSON); $(F_XXHASH)
stamp = build/$(subst /,_,$(1)).features
# evaluated while the Makefile is read, so the stamps are current before make compares timestamps
$(shell mkdir -p build)
$(foreach b,$(BINS) $(ON_DEMAND_BINS),$(shell printf '%s\n' '$(FEATURES_$(b))' | cmp -s - $(call stamp,$(b)) || printf '%s\n' '$(FEATURES_$(b))' > $(call stamp,$(b))))
# what a binary prints for --version: the commit and its features (utils.h print_version)
BUILD_DEFS = -DBUILD_COMMIT='"$(BUILD_COMMIT)"' -DBUILD_FEATURES='"$(FEATURES_$@)"'

.PHONY: all test run bench bench-tp bench-pp bench-multihost plot clean asan report
all: report $(BINS)
	@for b in $(BINS); do printf 'make: built %-22s with %s\n' "$$b" "$$(cat build/$$(echo $$b | tr / _).features)"; done

report:
	@echo "make: found: $(FOUND)"
	@for x in $(LEFT_OUT); do echo "make: left out: $$x"; done

HEADERS = utils.h precision.h kernels.h kernels_cpu.h comm.h comm_timeout.h comm_nccl.h comm_remote.h powersgd.h zero.h zero3.h model.h forward_backward.h run_report.h run_data.h run_modes.h tp.h pipeline.h pipeline_train.h plan.h sharedfs.h layout.h model_files.h dataloader.h tokenizer.h json.h safetensors.h hf_gpt2.h checkpoint.h run_settings.h llmc_state.h hellaswag.h evaluate.h sample.h outlier.h flags.h

train_gpt: train_gpt.c $(HEADERS) $(call stamp,train_gpt)
	$(CC) $(CFLAGS_COMMON) $(OPT) $(BLAS_CFLAGS) $(MPI_CFLAGS) $(CJSON_CFLAGS) $(XXHASH_CFLAGS) $(BUILD_DEFS) $< -o $@ $(BLAS_LIBS) $(MPI_LIBS) $(CJSON_LIBS) $(LDLIBS)

# test_gpt includes train_gpt.c (with TRAIN_GPT_NO_MAIN) so the tests exercise the real code.
# test_gpt.c's groups, one header of tests/ a topic (included by test_gpt.c, in the CPU, CUDA and emulated builds)
TEST_GPT_PARTS = tests/gpt_ops.h tests/gpt_ops_stored.h tests/gpt_ops_cuda.h tests/gpt_reference.h tests/gpt_units.h tests/gpt_precision.h tests/gpt_sampling.h
test_gpt: test_gpt.c train_gpt.c tests/testing.h tests/kv_rows.h $(TEST_GPT_PARTS) $(HEADERS) $(call stamp,test_gpt)
	$(CC) $(CFLAGS_COMMON) $(TEST_OPT) $(BLAS_CFLAGS) $(MPI_CFLAGS) $(CJSON_CFLAGS) $(XXHASH_CFLAGS) $(BUILD_DEFS) $< -o $@ $(BLAS_LIBS) $(MPI_LIBS) $(CJSON_LIBS) $(LDLIBS)

# test_tp: the tensor-parallel building blocks (tp.h) under mpirun against the single-rank ops
tests/test_tp: tests/test_tp.c train_gpt.c tp.h tests/kv_rows.h $(HEADERS) $(call stamp,tests/test_tp)
	$(CC) $(CFLAGS_COMMON) $(TEST_OPT) $(BLAS_CFLAGS) $(MPI_CFLAGS) $(CJSON_CFLAGS) $(XXHASH_CFLAGS) $(BUILD_DEFS) -I. $< -o $@ $(BLAS_LIBS) $(MPI_LIBS) $(CJSON_LIBS) $(LDLIBS)

# test_hf: Hugging Face checkpoints in and out (includes train_gpt.c; runs ./train_gpt --export-hf in child processes)
tests/test_hf: tests/test_hf.c train_gpt.c tests/testing.h $(HEADERS) $(call stamp,tests/test_hf)
	$(CC) $(CFLAGS_COMMON) $(TEST_OPT) $(CJSON_CFLAGS) $(XXHASH_CFLAGS) $(BUILD_DEFS) -I. $< -o $@ $(CJSON_LIBS) $(LDLIBS)

tokenize: tokenize.c tokenizer.h json.h utils.h hellaswag.h $(call stamp,tokenize)
	$(CC) $(CFLAGS_COMMON) $(OPT) $(BUILD_DEFS) $< -o $@ $(TOK_LIBS) $(CJSON_LIBS) $(LDLIBS)

# parquet_text: a string column of parquet files as NUL-terminated documents (scripts/prepare_fineweb.sh)
parquet_text: parquet_text.c parquet.h utils.h $(call stamp,parquet_text)
	$(CC) $(CFLAGS_COMMON) $(OPT) $(ZLIB_CFLAGS) $(BUILD_DEFS) $< -o $@ $(ZLIB_LIBS) $(LDLIBS)

tests/test_tokenizer: tests/test_tokenizer.c tests/testing.h tokenizer.h json.h utils.h $(call stamp,tests/test_tokenizer)
	$(CC) $(CFLAGS_COMMON) $(TEST_OPT) $(BUILD_DEFS) -I. $< -o $@ $(TOK_LIBS) $(CJSON_LIBS) $(LDLIBS)

# test_runs drives ./train_gpt in child processes; it includes train_gpt.c only for the file layouts (no MPI, no BLAS)
tests/test_runs: tests/test_runs.c train_gpt.c tests/testing.h tests/runs_common.h tests/runs_planner.h tests/runs_ramp.h tests/runs_llmc.h tests/runs_generate.h $(HEADERS) $(call stamp,tests/test_runs)
	$(CC) $(CFLAGS_COMMON) $(TEST_OPT) $(XXHASH_CFLAGS) $(BUILD_DEFS) -I. $< -o $@ $(LDLIBS)

# test_tp_runs: tensor parallelism through ./train_gpt under mpirun (built like test_runs)
tests/test_tp_runs: tests/test_tp_runs.c train_gpt.c tests/testing.h tests/runs_common.h $(HEADERS) $(call stamp,tests/test_tp_runs)
	$(CC) $(CFLAGS_COMMON) $(TEST_OPT) $(XXHASH_CFLAGS) $(BUILD_DEFS) -I. $< -o $@ $(LDLIBS)

# test_pp_runs: pipeline parallelism through ./train_gpt under mpirun (built like test_runs)
tests/test_pp_runs: tests/test_pp_runs.c train_gpt.c tests/testing.h tests/runs_common.h pipeline_train.h $(HEADERS) $(call stamp,tests/test_pp_runs)
	$(CC) $(CFLAGS_COMMON) $(TEST_OPT) $(XXHASH_CFLAGS) $(BUILD_DEFS) -I. $< -o $@ $(LDLIBS)

# test_hellaswag: the multiple-choice evaluation through ./train_gpt and ./tokenize (built like test_runs)
tests/test_hellaswag: tests/test_hellaswag.c train_gpt.c tests/testing.h tests/runs_common.h $(HEADERS) $(call stamp,tests/test_hellaswag)
	$(CC) $(CFLAGS_COMMON) $(TEST_OPT) $(XXHASH_CFLAGS) $(BUILD_DEFS) -I. $< -o $@ $(LDLIBS)

# test_pp: the pipeline schedules (pipeline.h) without a model: order, deadlock, memory, bubble; the partition
tests/test_pp: tests/test_pp.c pipeline.h tests/testing.h $(call stamp,tests/test_pp)
	$(CC) $(CFLAGS_COMMON) $(TEST_OPT) $(BUILD_DEFS) -I. $< -o $@ $(LDLIBS)

tests/test_dataloader: tests/test_dataloader.c tests/testing.h dataloader.h utils.h $(call stamp,tests/test_dataloader)
	$(CC) $(CFLAGS_COMMON) $(TEST_OPT) $(BUILD_DEFS) -I. $< -o $@ $(LDLIBS)

# CUDA builds: nvcc compiles train_gpt.c (and test_gpt.c) as CUDA with kernels.cuh instead of kernels_cpu.h (with
# MPI where it is installed)
CUDA_HEADERS = kernels.cuh kernels_layers.cuh kernels_matmul.cuh kernels_lt_tune.cuh kernels_attention.cuh kernels_optim.cuh cudnn_att.cuh $(filter-out kernels_cpu.h,$(HEADERS))
train_gpt_cu: train_gpt.c $(CUDA_HEADERS) $(call stamp,train_gpt_cu)
	$(NVCC) -x cu $(NVCC_FLAGS) -DENABLE_$(PRECISION) $(CJSON_CFLAGS) $(XXHASH_CFLAGS) $(BUILD_DEFS) -I. $< -o $@ $(CUDA_LIBS) $(CJSON_LIBS)

# fp16 storage with loss scaling, for scripts/gpu_check.sh (not built by `make`: one more nvcc build CI does not need)
train_gpt_cu_fp16: train_gpt.c $(CUDA_HEADERS) $(call stamp,train_gpt_cu_fp16)
	$(NVCC) -x cu $(NVCC_FLAGS) -DENABLE_FP16 $(CJSON_CFLAGS) $(XXHASH_CFLAGS) $(BUILD_DEFS) -I. $< -o $@ $(CUDA_LIBS) $(CJSON_LIBS)

test_gpt_cu: test_gpt.c train_gpt.c tests/testing.h tests/kv_rows.h tests/stage_ops.h $(TEST_GPT_PARTS) $(CUDA_HEADERS) $(call stamp,test_gpt_cu)
	$(NVCC) -x cu $(NVCC_FLAGS) -DENABLE_FP32 $(CJSON_CFLAGS) $(XXHASH_CFLAGS) $(BUILD_DEFS) -I. $< -o $@ $(CUDA_LIBS) $(CJSON_LIBS)

test_gpt_cu_bf16: test_gpt.c train_gpt.c tests/testing.h tests/kv_rows.h tests/stage_ops.h $(TEST_GPT_PARTS) $(CUDA_HEADERS) $(call stamp,test_gpt_cu_bf16)
	$(NVCC) -x cu $(NVCC_FLAGS) -DENABLE_BF16 $(CJSON_CFLAGS) $(XXHASH_CFLAGS) $(BUILD_DEFS) -I. $< -o $@ $(CUDA_LIBS) $(CJSON_LIBS)

bench_kernels_cu: bench_kernels.cu $(CUDA_HEADERS) $(call stamp,bench_kernels_cu)
	$(NVCC) -x cu $(NVCC_FLAGS) -DENABLE_BF16 -I. $< -o $@ $(CUDA_LIBS)

tests/test_cudnn_graph: tests/test_cudnn_graph.cu cudnn_att.cuh $(CUDA_HEADERS) $(call stamp,tests/test_cudnn_graph)
	$(NVCC) -x cu $(NVCC_FLAGS) -I. $< -o $@ $(CUDA_LIBS)

# The emulated CUDA builds compile copies of the sources in build/emu/src whose kernel launches are rewritten
EMU_SRC = $(CUDA_HEADERS) train_gpt.c test_gpt.c bench_kernels.cu tests/testing.h tests/kv_rows.h tests/stage_ops.h $(TEST_GPT_PARTS) tests/test_cuda_emu.cu
EMU_DEPS = build/emu/src/.rewritten tests/cuda_emu/cuda_emu.h tests/cuda_emu/cublaslt_emu.h tests/cuda_emu/nccl_emu.h tests/cuda_emu/include/cub/cub.cuh tests/cuda_emu/include/mma.h
build/emu/src/.rewritten: $(EMU_SRC) tests/cuda_emu/rewrite.sh Makefile
	bash tests/cuda_emu/rewrite.sh build/emu/src $(EMU_SRC) && touch $@

train_gpt_emu: $(EMU_DEPS) $(call stamp,train_gpt_emu)
	$(CXX) $(EMU_FLAGS) -DENABLE_$(PRECISION) $(BUILD_DEFS) build/emu/src/train_gpt.c -o $@ $(EMU_LIBS)

test_gpt_emu: $(EMU_DEPS) $(call stamp,test_gpt_emu)
	$(CXX) $(EMU_FLAGS) -DENABLE_FP32 $(BUILD_DEFS) build/emu/src/test_gpt.c -o $@ $(EMU_LIBS)

test_gpt_emu_bf16: $(EMU_DEPS) $(call stamp,test_gpt_emu_bf16)
	$(CXX) $(EMU_FLAGS) -DENABLE_BF16 $(BUILD_DEFS) build/emu/src/test_gpt.c -o $@ $(EMU_LIBS)

# fp16 storage with loss scaling (train_gpt_emu is PRECISION's, bf16 by default): gpu_check.sh compares it with the CPU
train_gpt_emu_fp16: $(EMU_DEPS) $(call stamp,train_gpt_emu_fp16)
	$(CXX) $(EMU_FLAGS) -DENABLE_FP16 $(BUILD_DEFS) build/emu/src/train_gpt.c -o $@ $(EMU_LIBS)

# bench_kernels.cu under the emulation: its plumbing only (gpu_check.sh --emu runs it tiny; the figures mean nothing)
bench_kernels_emu: $(EMU_DEPS) $(call stamp,bench_kernels_emu)
	$(CXX) $(EMU_FLAGS) -DENABLE_BF16 $(BUILD_DEFS) build/emu/src/bench_kernels.cu -o $@ $(EMU_LIBS)

# the emulator's own test (tests/test_cuda_emu.cu)
tests/test_cuda_emu: $(EMU_DEPS) $(call stamp,tests/test_cuda_emu)
	$(CXX) $(EMU_FLAGS) $(BUILD_DEFS) build/emu/src/tests/test_cuda_emu.cu -o $@ $(EMU_LIBS)

tests/test_precision: tests/test_precision.c tests/testing.h precision.h $(call stamp,tests/test_precision)
	$(CC) $(CFLAGS_COMMON) $(TEST_OPT) $(BUILD_DEFS) -I. $< -o $@ $(LDLIBS)

bench_comm: bench_comm.c comm.h comm_timeout.h comm_remote.h utils.h $(call stamp,bench_comm)
	$(CC) $(CFLAGS_COMMON) $(OPT) $(MPI_CFLAGS) $(BUILD_DEFS) $< -o $@ $(MPI_LIBS) $(LDLIBS)

bench_checksum: bench_checksum.c utils.h $(call stamp,bench_checksum)
	$(CC) $(CFLAGS_COMMON) $(OPT) $(XXHASH_CFLAGS) $(BUILD_DEFS) $< -o $@ $(LDLIBS)

# bench_sample: sample_pick's filters at GPT-2's vocabulary beside a sort (includes train_gpt.c like test_runs)
bench_sample: bench_sample.c train_gpt.c $(HEADERS) $(call stamp,bench_sample)
	$(CC) $(CFLAGS_COMMON) $(OPT) $(XXHASH_CFLAGS) $(BUILD_DEFS) -I. $< -o $@ $(LDLIBS)

tests/test_comm: tests/test_comm.c comm.h comm_timeout.h comm_remote.h utils.h $(call stamp,tests/test_comm)
	$(CC) $(CFLAGS_COMMON) $(TEST_OPT) $(MPI_CFLAGS) $(BUILD_DEFS) -I. $< -o $@ $(MPI_LIBS) $(LDLIBS)

# test_powersgd: PowerSGD compression (powersgd.h) under mpirun against a double-precision reference
tests/test_powersgd: tests/test_powersgd.c powersgd.h comm.h comm_timeout.h comm_remote.h utils.h $(call stamp,tests/test_powersgd)
	$(CC) $(CFLAGS_COMMON) $(TEST_OPT) $(MPI_CFLAGS) $(BUILD_DEFS) -I. $< -o $@ $(MPI_LIBS) $(LDLIBS)

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

# The loss curves of the default job (or LOGS="a.jsonl b.jsonl"), as out/plot.svg, via gnuplot.
LOGS ?= out/default.jsonl
plot:
	bash scripts/plot_log.sh --out out/plot.svg $(LOGS)

# The benchmark lets OpenBLAS choose its kernels by its own CPU detection (and the trainer replace a generic
# choice): some machines export OPENBLAS_CORETYPE (and OPENBLAS_L2_SIZE) to force an older kernel family.
# One row per --dtype x --recompute (scripts/bench_dtypes.sh): ms/step, tokens/s, activation bytes.
bench: train_gpt
	bash scripts/bench_dtypes.sh d12 4 64 5

# tensor parallel (scripts/bench_tp.sh): tp 1 against tp 2 with and without sequence parallelism, GPT-2 124M
bench-tp: train_gpt
	bash scripts/bench_tp.sh d12 4 64 3

# collectives across "hosts" of network namespaces next to within one host (scripts/bench_multihost.sh; needs root)
bench-multihost: bench_comm
	bash scripts/bench_multihost.sh

# pipeline parallel (scripts/bench_pp.sh): every schedule with pp 2 against one process, GPT-2 124M, 8 micro-batches
bench-pp: train_gpt
	bash scripts/bench_pp.sh d12 2 64 8 2

# a sub-make with other flags: the stamps record them, so a later plain `make` rebuilds the normal binaries
SAN = -O1 -fsanitize=address,undefined -fno-omit-frame-pointer
asan:
	@$(MAKE) --no-print-directory OPT="$(SAN)" TEST_OPT="$(SAN)" all

clean:
	rm -f train_gpt test_gpt tokenize parquet_text bench_comm bench_checksum bench_sample tests/test_tokenizer tests/test_dataloader tests/test_comm tests/test_runs tests/test_tp_runs tests/test_pp_runs tests/test_pp tests/test_hf tests/test_precision tests/test_tp tests/test_powersgd train_gpt_cu test_gpt_cu test_gpt_cu_bf16 tests/test_cudnn_graph bench_kernels_cu train_gpt_cu_fp16 train_gpt_emu train_gpt_emu_fp16 test_gpt_emu test_gpt_emu_bf16 bench_kernels_emu tests/test_cuda_emu
	rm -rf build

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
              -DFUZZING -I. $(XXHASH_CFLAGS) $(ZLIB_CFLAGS)
FUZZ_LIBS = -lpcre2-8 $(CJSON_LIBS) $(ZLIB_LIBS) -lm
ifneq ($(CJSON_OK),yes)
  FUZZ_TARGETS := $(filter-out safetensors vocab encode,$(FUZZ_TARGETS)) # need cJSON (see above)
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

fuzz/bin/%: fuzz/%.c fuzz/fuzz_common.h fuzz/encoder_checks.h train_gpt.c $(HEADERS) parquet.h
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
