# Finds gpudiag's dependencies and reports what each one enables.
#
# Required: CLI11, spdlog, nlohmann_json, OpenSSL's libcrypto (Debian:
# libcli11-dev libspdlog-dev nlohmann-json3-dev libssl-dev; libcrypto proves
# the store's job secret, HMAC-SHA256). Optional: CUDA toolkit + NCCL (NCCL backend, GPU scanner),
# MPI (exchange and host collectives under mpirun/srun --mpi=pmix).
# CUDA is searched in CUDAToolkit_ROOT, CUDA_HOME, then /usr/local/cuda;
# NCCL is not needed to build (it is loaded at run time).
find_package(Threads REQUIRED)
find_package(CLI11 CONFIG QUIET)
if(NOT CLI11_FOUND)
  find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp)
  if(NOT CLI11_INCLUDE_DIR)
    message(FATAL_ERROR "CLI11 not found: run scripts/install-deps.sh (Debian package libcli11-dev)")
  endif()
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  target_include_directories(CLI11::CLI11 INTERFACE ${CLI11_INCLUDE_DIR})
endif()
find_package(spdlog CONFIG)
if(NOT spdlog_FOUND)
  message(FATAL_ERROR "spdlog not found: run scripts/install-deps.sh (Debian package libspdlog-dev)")
endif()
find_package(nlohmann_json 3 CONFIG)
if(NOT nlohmann_json_FOUND)
  message(FATAL_ERROR "nlohmann_json not found: run scripts/install-deps.sh (Debian package nlohmann-json3-dev)")
endif()
find_package(OpenSSL COMPONENTS Crypto)
if(NOT OpenSSL_FOUND OR NOT TARGET OpenSSL::Crypto)
  message(FATAL_ERROR "OpenSSL's libcrypto not found: run scripts/install-deps.sh (Debian package libssl-dev)")
endif()

# --- CUDA -------------------------------------------------------------------
set(GPUDIAG_HAVE_CUDA OFF)
if(GPUDIAG_WITH_CUDA)
  if(NOT CUDAToolkit_ROOT)
    if(DEFINED ENV{CUDAToolkit_ROOT})
      set(CUDAToolkit_ROOT $ENV{CUDAToolkit_ROOT})
    elseif(DEFINED ENV{CUDA_HOME})
      set(CUDAToolkit_ROOT $ENV{CUDA_HOME})
    elseif(EXISTS /usr/local/cuda)
      set(CUDAToolkit_ROOT /usr/local/cuda)
    endif()
  endif()
  if(CUDAToolkit_ROOT AND NOT CMAKE_CUDA_COMPILER AND EXISTS ${CUDAToolkit_ROOT}/bin/nvcc)
    set(CMAKE_CUDA_COMPILER ${CUDAToolkit_ROOT}/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  find_package(CUDAToolkit QUIET)
  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND)
    # A100 (sm_80), H100/H200 (sm_90), B200 (sm_100), RTX 50xx / RTX PRO (sm_120),
    # plus PTX of the newest so later GPUs JIT-compile. Override with
    # -DCMAKE_CUDA_ARCHITECTURES=... (e.g. 90 for H100/H200; "native" needs CMake 3.24
    # and a visible GPU, so scripts/gpu-check.sh asks nvidia-smi instead).
    # CUDA 12.8 is the first toolkit that knows sm_100 and sm_120; CUDA 12.0
    # to 12.7 stop at Hopper (PTX of sm_90 then covers later GPUs). CUDA 11.x
    # lacks what the build uses (C++20 in device code), and no toolkit before
    # 12.5 has been tested (the scanner library's CUDART_VERSION guards are
    # there for one that is): both are refused below.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      if(CUDAToolkit_VERSION VERSION_GREATER_EQUAL 12.8)
        set(CMAKE_CUDA_ARCHITECTURES 80-real 90-real 100-real 120)
      else()
        set(CMAKE_CUDA_ARCHITECTURES 80-real 90)
      endif()
    endif()
    if(CUDAToolkit_VERSION VERSION_LESS 12.5)
      message(FATAL_ERROR "gpudiag needs a CUDA 12.5-12.x or 13.x toolkit; found ${CUDAToolkit_VERSION} "
                          "(set CUDA_HOME, or -DGPUDIAG_WITH_CUDA=OFF for the host backend only)")
    endif()
    enable_language(CUDA)
    set(GPUDIAG_HAVE_CUDA ON)
  else()
    message(STATUS "gpudiag: CUDA toolkit not found (set CUDA_HOME or CUDAToolkit_ROOT)")
  endif()
endif()

# --- NCCL -------------------------------------------------------------------
# Not searched: the NCCL backend loads libnccl.so.2 at run time (--nccl-lib,
# GPUDIAG_NCCL_LIB, the loader's path), so the build needs no NCCL at all and
# the binary tests whichever NCCL the job uses.
set(GPUDIAG_HAVE_NCCL ${GPUDIAG_HAVE_CUDA})

# --- MPI --------------------------------------------------------------------
set(GPUDIAG_HAVE_MPI OFF)
if(GPUDIAG_WITH_MPI)
  find_package(MPI COMPONENTS C QUIET)
  if(MPI_C_FOUND)
    set(GPUDIAG_HAVE_MPI ON)
  else()
    message(STATUS "gpudiag: MPI not found (Debian: libopenmpi-dev)")
  endif()
endif()

message(STATUS "gpudiag: CUDA ${GPUDIAG_HAVE_CUDA} ${CUDAToolkit_VERSION}  -> GPU device checks, CUDA scanner")
message(STATUS "gpudiag: NCCL ${GPUDIAG_HAVE_NCCL} (libnccl.so.2 loaded at run time)  -> --backend nccl")
message(STATUS "gpudiag: MPI  ${GPUDIAG_HAVE_MPI} ${MPI_C_VERSION}  -> exchange and host collectives under mpirun")
