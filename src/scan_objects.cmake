# gpudiag_scan_objects: the scanner's sources compiled once, position-independent
# and with hidden symbols, for both gpudiag_core (the binary, the tests) and
# libgpudiag_scan.so (capi/), which had compiled its own copy of each: the
# CUDA kernels alone are four GPU architectures a file. Nothing here reads a
# GPUDIAG_HAVE_* macro, so one compile serves both. Without CUDA the library
# needs only the CPU scanner and the stub, and gpudiag_core lists the rest itself.
set(_n numerics/scan)
add_library(gpudiag_scan_objects OBJECT
  ${_n}/dtype.cpp ${_n}/tensor_stats.cpp ${_n}/scan_kernels.cpp ${_n}/cpu_scanner.cpp
  util/env.cpp util/strings.cpp)
target_compile_features(gpudiag_scan_objects PUBLIC cxx_std_20)
target_include_directories(gpudiag_scan_objects PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(gpudiag_scan_objects PUBLIC spdlog::spdlog Threads::Threads)
target_compile_options(gpudiag_scan_objects PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>)
set_target_properties(gpudiag_scan_objects PROPERTIES POSITION_INDEPENDENT_CODE ON
  CXX_VISIBILITY_PRESET hidden CUDA_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
if(GPUDIAG_SANITIZE)
  target_compile_options(gpudiag_scan_objects PUBLIC -fsanitize=address,undefined -fno-omit-frame-pointer)
endif()
# The scan loops are written for the auto-vectoriser, which -O2 keeps cheap;
# on x86-64 a second copy is built for AVX2 and chosen at run time.
set_source_files_properties(${_n}/scan_kernels.cpp TARGET_DIRECTORY gpudiag_scan_objects PROPERTIES
  COMPILE_OPTIONS "$<$<CXX_COMPILER_ID:GNU,Clang>:-O3>")
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64" AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  target_sources(gpudiag_scan_objects PRIVATE ${_n}/scan_kernels_avx2.cpp)
  set_source_files_properties(${_n}/scan_kernels_avx2.cpp TARGET_DIRECTORY gpudiag_scan_objects
    PROPERTIES COMPILE_OPTIONS "-O3;-mavx2")
endif()
if(GPUDIAG_HAVE_CUDA)
  # The CUDA scanner: its kernels (nvcc), its host pipelines, the file reads behind them.
  target_sources(gpudiag_scan_objects PRIVATE
    ${_n}/scan_plan.cpp ${_n}/staged_reads.cpp ${_n}/window_plan.cpp ${_n}/cuda_scan_decode.cpp
    numerics/formats/mapped_file.cpp util/file_kind.cpp
    ${_n}/cuda_scan_kernel.cu ${_n}/cuda_scanner.cpp ${_n}/cuda_pread_pipeline.cpp
    ${_n}/cuda_window_pipeline.cpp ${_n}/device_scope.cpp gpu/cuda_runtime.cpp
    ${_n}/cuda_checksum_kernel.cu ${_n}/cuda_checksum.cpp gpu/cuda_diagnosis.cpp)
  target_link_libraries(gpudiag_scan_objects PUBLIC CUDA::cudart_static)
  target_compile_definitions(gpudiag_scan_objects PUBLIC GPUDIAG_HAVE_CUDA=1)
  # Lets kernels call the constexpr helpers that host code shares (gpu/cuda.h);
  # the shared numerics headers use C++20 (std::span), nvcc defaults to C++17.
  target_compile_options(gpudiag_scan_objects PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -std=c++20>)
else()
  target_sources(gpudiag_scan_objects PRIVATE ${_n}/cuda_scanner_stub.cpp)
endif()
target_link_libraries(gpudiag_core PUBLIC gpudiag_scan_objects)
